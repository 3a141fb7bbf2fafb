// Package meta is the metadata state machine: the cluster's members, the
// catalog of topics with the placement of their partitions' replicas, and
// the plugin registry (package plugins), kept in its own raft group whose
// voters are the members. Placement is computed at apply, so every member
// agrees on it. Topic ids and partition group ids come
// from counters advanced at apply, so they are never reused: a re-created
// topic never aliases the old one's message IDs or resume tokens.
package meta

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/plugins"
	"github.com/rewind-io/rewind/raftlog"
)

var (
	// ErrTopicExists is the result of creating a topic whose name is taken.
	ErrTopicExists = errors.New("meta: topic already exists")
	// ErrNoTopic is the result of deleting a topic that does not exist.
	ErrNoTopic = errors.New("meta: no such topic")
	// ErrStopped is returned once the metadata group stopped.
	ErrStopped = errors.New("meta: stopped")
	// ErrOutcomeUnknown is returned when a wait ended before the command's
	// fate was known.
	ErrOutcomeUnknown = errors.New("meta: outcome unknown")
	// ErrNotProposed is returned when raft refused a command before
	// appending it anywhere (no leader known: an election, or this node is
	// cut off): it was certainly not applied, and may be sent again.
	ErrNotProposed = errors.New("meta: not proposed")
	// ErrNotEnoughNodes is the result of creating a topic with more
	// replicas than the cluster has members.
	ErrNotEnoughNodes = errors.New("meta: not enough nodes")
	// ErrRemovedID is the result of adding a node under a removed id.
	ErrRemovedID = errors.New("meta: node id belonged to a removed node")
	// ErrNodeExists is the result of adding a node whose id is taken by a
	// member at another address.
	ErrNodeExists = errors.New("meta: node id in use")
	// ErrNoNode is the result of removing a node that is no member.
	ErrNoNode = errors.New("meta: no such node")
	// ErrShrink is the result of giving a topic fewer partitions than it
	// has: partitions are never removed.
	ErrShrink = errors.New("meta: a topic's partitions can only grow")
	// ErrGrowKeyIndex is the result of growing a topic that keeps the key
	// index (grow.go).
	ErrGrowKeyIndex = errors.New("meta: a topic with the key index cannot grow")
)

// GroupID is the raft group of the metadata state machine.
const GroupID = 1

// FirstPartitionGroup is the first group id given to a partition.
const FirstPartitionGroup = 2

// Retention is a topic's retention policy. Zero means no limit.
type Retention struct {
	MaxAgeNanos int64  `json:"max_age_ns,omitempty"`
	MaxBytes    uint64 `json:"max_bytes,omitempty"`
	MaxRecords  uint64 `json:"max_records,omitempty"`
	// Cleanup: "delete" (the default when empty), "compact" or
	// "compact,delete".
	Cleanup              string `json:"cleanup,omitempty"`
	DeleteRetentionNanos int64  `json:"delete_retention_ns,omitempty"`
	// LocalMaxAgeNanos and LocalMaxBytes bound what stays on the nodes'
	// disks when tiered storage is on; older records are read from the
	// object store. Zero: no local limit.
	LocalMaxAgeNanos int64  `json:"local_max_age_ns,omitempty"`
	LocalMaxBytes    uint64 `json:"local_max_bytes,omitempty"`
}

// Tiers reports whether the retention moves history to tiered storage.
func (r Retention) Tiers() bool { return r.LocalMaxAgeNanos > 0 || r.LocalMaxBytes > 0 }

// Deletes reports whether limits are enforced (cleanup includes delete).
func (r Retention) Deletes() bool {
	return r.Cleanup == "" || r.Cleanup == "delete" || r.Cleanup == "compact,delete"
}

// Compacts reports whether key compaction runs.
func (r Retention) Compacts() bool { return r.Cleanup == "compact" || r.Cleanup == "compact,delete" }

// Topic is one topic's catalog record.
type Topic struct {
	ID                uint64    `json:"id"`
	Name              string    `json:"name"`
	Partitions        uint32    `json:"partitions"`
	ReplicationFactor uint32    `json:"replication_factor"`
	MaxRecordBytes    uint32    `json:"max_record_bytes"`
	Retention         Retention `json:"retention"`
	// DedupeWindowNanos is how long idempotency keys are remembered; 0:
	// off.
	DedupeWindowNanos int64 `json:"dedupe_window_ns,omitempty"`
	// KeyIndex: the partitions keep the key and tag indexes (key versions,
	// conditional appends). Fixed at creation; false for topics created
	// before the indexes existed.
	KeyIndex bool `json:"key_index,omitempty"`
	// Groups holds the raft group id of each partition, by partition number.
	Groups []uint64 `json:"groups"`
	// Epochs lists the partition counts the topic had before its last
	// growth, oldest first, with when each ended (grow.go). Empty for a
	// topic that never grew.
	Epochs []Epoch `json:"epochs,omitempty"`
	// Replicas holds, by partition number, the nodes that keep a copy; the
	// first is the preferred leader. Empty for topics created before the
	// node was part of a cluster: their one replica is that node.
	Replicas   [][]uint64 `json:"replicas,omitempty"`
	CreateTime int64      `json:"create_time_ns"`
	// Creator is the principal that created the topic (empty: created
	// without authentication, or before creators were recorded). The
	// topic counts against its topic and partition quotas while it exists.
	Creator string `json:"creator,omitempty"`
}

// ReplicasOf returns partition i's replicas; nil means "the local node
// only" (a topic from a single-node store).
func (t *Topic) ReplicasOf(i int) []uint64 {
	if i < len(t.Replicas) {
		return t.Replicas[i]
	}
	return nil
}

// Node is a member of the cluster.
type Node struct {
	ID uint64 `json:"id"`
	// Addr is where peers and clients reach it (host:port).
	Addr string `json:"addr"`
	// Leaving is set while its replicas move off (RemoveNode).
	Leaving bool `json:"leaving,omitempty"`
}

// Reassign gives one partition a new replica set.
type Reassign struct {
	TopicID   uint64   `json:"topic_id"`
	Partition uint32   `json:"partition"`
	Replicas  []uint64 `json:"replicas"`
}

// Spec is what a topic is created with.
type Spec struct {
	Name              string
	Partitions        uint32
	ReplicationFactor uint32
	MaxRecordBytes    uint32
	Retention         Retention
	DedupeWindowNanos int64
	KeyIndex          bool `json:",omitempty"`
	CreateTime        int64
	// Creator is the principal creating the topic ("": none). Its topic
	// and partition quotas are checked at apply (quota.go).
	Creator string `json:",omitempty"`
}

// command is one metadata entry. Encoded as JSON: metadata changes are rare
// and small, and a readable log helps operators.
type command struct {
	ID     uint64 `json:"id"` // proposal id
	Create *Spec  `json:"create,omitempty"`
	Delete string `json:"delete,omitempty"`
	Alter  *Alter `json:"alter,omitempty"`
	Grow   *Grow  `json:"grow,omitempty"`

	PluginUpload *plugins.Upload `json:"plugin_upload,omitempty"`
	PluginDelete *plugins.Delete `json:"plugin_delete,omitempty"`

	// Init records the cluster's first members; applied once (later ones
	// are no-ops), so every node may propose it.
	Init []Node `json:"init,omitempty"`
	// AddNode records a new member; Leave marks one as leaving; Removed
	// forgets it for good (its id is never reused).
	AddNode  *Node      `json:"add_node,omitempty"`
	Leave    uint64     `json:"leave,omitempty"`
	Removed  uint64     `json:"removed,omitempty"`
	Reassign []Reassign `json:"reassign,omitempty"`

	// Auth changes the authorization state (auth.go).
	Auth *auth.Command `json:"auth,omitempty"`
}

// Alter changes a topic's retention policy.
type Alter struct {
	Name      string    `json:"name"`
	Retention Retention `json:"retention"`
}

// state holds the id counters and the members.
type state struct {
	NextTopicID uint64 `json:"next_topic_id"`
	NextGroupID uint64 `json:"next_group_id"`
	Nodes       []Node `json:"nodes,omitempty"`
	// RemovedNodes lists ids that were members: never reused.
	RemovedNodes []uint64 `json:"removed_nodes,omitempty"`
}

// Change reports what one applied command did.
type Change struct {
	Created *Topic
	Deleted *Topic
	Altered *Topic
	// Grown: the topic has more partitions (Grow), new groups included.
	Grown *Topic
	// Reassigned: some partitions have new replica sets.
	Reassigned *Topic
}

// Config configures the state machine.
type Config struct {
	DB   *pebble.DB
	Host interface{ Wake(group uint64) }
	// OnChange is called from the raft loop (in Durable) with the changes
	// that became durable. It must not block or call the host synchronously.
	OnChange func([]Change)
	// DefaultReplicas is the replication factor of a topic created without
	// one, capped at the number of members. Zero means 1 (the broker
	// passes its own default, 3).
	DefaultReplicas uint32
	Logger          hclog.Logger
}

// Meta is the metadata state machine. It implements raftlog.StateMachine.
type Meta struct {
	cfg Config
	reg *plugins.Registry
	// auth is the authorization state (auth.go).
	auth authState

	// Loop-owned.
	st      state
	topics  map[string]*Topic // applied
	changes []Change
	results []result

	mu struct {
		sync.Mutex
		topics  map[string]*Topic // durable: what readers see
		byID    map[uint64]*Topic
		nodes   []Node
		removed []uint64
		leader  uint64
		queue   [][]byte
		waiters map[uint64]chan result
		nextID  uint64
		err     error
	}
}

type result struct {
	id        uint64
	topic     *Topic
	plugins   []*plugins.Plugin
	unchanged bool
	auth      auth.Result
	err       error
}

// Open loads the catalog from the store.
func Open(cfg Config) (*Meta, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	m := &Meta{cfg: cfg, topics: make(map[string]*Topic)}
	m.st = state{NextTopicID: 1, NextGroupID: FirstPartitionGroup}
	v, closer, err := cfg.DB.Get(keys.MetaStateKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		err = json.Unmarshal(v, &m.st)
		closer.Close()
		if err != nil {
			return nil, fmt.Errorf("meta: state: %w", err)
		}
	}
	ts, err := ReadTopics(cfg.DB)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		m.topics[t.Name] = t
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	m.mu.nextID = binary.LittleEndian.Uint64(seed[:]) &^ (1<<32 - 1)
	m.mu.waiters = make(map[uint64]chan result)
	m.publishLocked()
	if m.reg, err = plugins.Open(cfg.DB, keys.PluginPrefix); err != nil {
		return nil, err
	}
	if err := m.openAuth(); err != nil {
		return nil, err
	}
	return m, nil
}

// publishLocked makes the applied catalog the visible one.
func (m *Meta) publishLocked() {
	m.mu.nodes = slices.Clone(m.st.Nodes)
	m.mu.removed = slices.Clone(m.st.RemovedNodes)
	m.mu.topics = make(map[string]*Topic, len(m.topics))
	m.mu.byID = make(map[uint64]*Topic, len(m.topics))
	for n, t := range m.topics {
		m.mu.topics[n] = t
		m.mu.byID[t.ID] = t
	}
}

// Topics returns every durable topic, ordered by name. The topics are shared:
// do not modify them.
func (m *Meta) Topics() []*Topic {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Topic, 0, len(m.mu.topics))
	for _, t := range m.mu.topics {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Topic) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Topic returns the topic named name.
func (m *Meta) Topic(name string) (*Topic, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.mu.topics[name]
	return t, ok
}

// TopicByID returns the topic with id.
func (m *Meta) TopicByID(id uint64) (*Topic, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.mu.byID[id]
	return t, ok
}

// Nodes returns the durable members, by id.
func (m *Meta) Nodes() []Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.nodes)
}

// Leader returns the metadata group's leader as last seen (0: none).
func (m *Meta) Leader() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.leader
}

// AddNode proposes a new member and waits until it is durable.
func (m *Meta) AddNode(ctx context.Context, n Node) error {
	_, err := m.proposeResult(ctx, command{AddNode: &n})
	return err
}

// Leave proposes marking a member as leaving.
func (m *Meta) Leave(ctx context.Context, id uint64) error {
	_, err := m.proposeResult(ctx, command{Leave: id})
	return err
}

// Forget proposes removing a member for good.
func (m *Meta) Forget(ctx context.Context, id uint64) error {
	_, err := m.proposeResult(ctx, command{Removed: id})
	return err
}

// ReassignReplicas proposes new replica sets.
func (m *Meta) ReassignReplicas(ctx context.Context, rs []Reassign) error {
	_, err := m.proposeResult(ctx, command{Reassign: rs})
	return err
}

// Removed reports whether id belonged to a removed node.
func (m *Meta) Removed(id uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Contains(m.mu.removed, id)
}

// Init proposes the cluster's first members and waits until the
// membership is durable (whoever's proposal came first).
func (m *Meta) Init(ctx context.Context, nodes []Node) error {
	_, err := m.proposeResult(ctx, command{Init: nodes})
	return err
}

// Create proposes a new topic and waits until it is durable.
func (m *Meta) Create(ctx context.Context, spec Spec) (*Topic, error) {
	return m.propose(ctx, command{Create: &spec})
}

// AlterTopic proposes a new retention policy for a topic and waits until
// it is durable. It returns the altered topic.
func (m *Meta) AlterTopic(ctx context.Context, a Alter) (*Topic, error) {
	return m.propose(ctx, command{Alter: &a})
}

// Delete proposes deleting a topic and waits until it is durable. It
// returns the deleted topic.
func (m *Meta) Delete(ctx context.Context, name string) (*Topic, error) {
	return m.propose(ctx, command{Delete: name})
}

// Plugins is the plugin registry; its reads see what is durable.
func (m *Meta) Plugins() *plugins.Registry { return m.reg }

// UploadPlugin proposes registering a module (validated by the caller) and
// waits until it is durable. unchanged reports that the name's newest
// version already had these bytes.
func (m *Meta) UploadPlugin(ctx context.Context, u *plugins.Upload) (p *plugins.Plugin, unchanged bool, err error) {
	r, err := m.proposeResult(ctx, command{PluginUpload: u})
	if err != nil {
		return nil, false, err
	}
	return r.plugins[0], r.unchanged, nil
}

// DeletePlugin proposes deleting versions and waits until it is durable.
func (m *Meta) DeletePlugin(ctx context.Context, d *plugins.Delete) ([]*plugins.Plugin, error) {
	r, err := m.proposeResult(ctx, command{PluginDelete: d})
	return r.plugins, err
}

func (m *Meta) propose(ctx context.Context, cmd command) (*Topic, error) {
	r, err := m.proposeResult(ctx, cmd)
	return r.topic, err
}

func (m *Meta) proposeResult(ctx context.Context, cmd command) (result, error) {
	ch := make(chan result, 1)
	m.mu.Lock()
	if m.mu.err != nil {
		err := m.mu.err
		m.mu.Unlock()
		return result{}, fmt.Errorf("%w: %w", ErrNotProposed, err)
	}
	m.mu.nextID++
	cmd.ID = m.mu.nextID
	data, err := json.Marshal(cmd)
	if err != nil {
		m.mu.Unlock()
		return result{}, err
	}
	m.mu.queue = append(m.mu.queue, data)
	m.mu.waiters[cmd.ID] = ch
	m.mu.Unlock()
	m.cfg.Host.Wake(GroupID)
	select {
	case r := <-ch:
		return r, r.err
	case <-ctx.Done():
		m.mu.Lock()
		delete(m.mu.waiters, cmd.ID)
		m.mu.Unlock()
		return result{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// TakeProposals implements raftlog.StateMachine.
func (m *Meta) TakeProposals(dst [][]byte) [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	dst = append(dst, m.mu.queue...)
	m.mu.queue = nil
	return dst
}

// Dropped implements raftlog.StateMachine.
func (m *Meta) Dropped(data [][]byte, err error) {
	for _, d := range data {
		var cmd command
		if json.Unmarshal(d, &cmd) == nil {
			m.answer(result{id: cmd.ID, err: fmt.Errorf("%w: raft dropped it: %w", ErrNotProposed, err)})
		}
	}
}

func (m *Meta) answer(r result) {
	m.mu.Lock()
	ch, ok := m.mu.waiters[r.id]
	delete(m.mu.waiters, r.id)
	m.mu.Unlock()
	if ok {
		ch <- r
	}
}

// Apply implements raftlog.StateMachine.
func (m *Meta) Apply(w *pebble.Batch, ents []*pb.Entry) error {
	for _, e := range ents {
		var cmd command
		if err := json.Unmarshal(e.GetData(), &cmd); err != nil {
			return fmt.Errorf("meta: entry %d: %w", e.GetIndex(), err)
		}
		r := result{id: cmd.ID}
		switch {
		case cmd.Create != nil:
			r.topic, r.err = m.applyCreate(w, cmd.Create)
		case cmd.Delete != "":
			r.topic, r.err = m.applyDelete(w, cmd.Delete)
		case cmd.Alter != nil:
			r.topic, r.err = m.applyAlter(w, cmd.Alter)
		case cmd.Grow != nil:
			r.topic, r.err = m.applyGrow(w, cmd.Grow)
		case cmd.PluginUpload != nil:
			var p *plugins.Plugin
			p, r.unchanged, r.err = m.reg.ApplyUpload(w, cmd.PluginUpload)
			r.plugins = []*plugins.Plugin{p}
		case cmd.PluginDelete != nil:
			r.plugins, r.err = m.reg.ApplyDelete(w, cmd.PluginDelete)
		case cmd.AddNode != nil:
			r.err = m.applyAddNode(*cmd.AddNode)
		case cmd.Leave != 0:
			r.err = m.applyLeave(cmd.Leave)
		case cmd.Removed != 0:
			m.st.Nodes = slices.DeleteFunc(m.st.Nodes, func(n Node) bool { return n.ID == cmd.Removed })
			if !slices.Contains(m.st.RemovedNodes, cmd.Removed) {
				m.st.RemovedNodes = append(m.st.RemovedNodes, cmd.Removed)
			}
		case cmd.Reassign != nil:
			r.err = m.applyReassign(w, cmd.Reassign)
		case cmd.Auth != nil:
			r.auth, r.err = m.applyAuth(w, cmd.Auth)
		case cmd.Init != nil:
			if len(m.st.Nodes) == 0 {
				m.st.Nodes = slices.Clone(cmd.Init)
				slices.SortFunc(m.st.Nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
			}
		default:
			return fmt.Errorf("meta: entry %d: empty command", e.GetIndex())
		}
		m.results = append(m.results, r)
	}
	v, err := json.Marshal(m.st)
	if err != nil {
		return err
	}
	return w.Set(keys.MetaStateKey, v, nil)
}

func (m *Meta) applyCreate(w *pebble.Batch, s *Spec) (*Topic, error) {
	if _, ok := m.topics[s.Name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, s.Name)
	}
	active := slices.DeleteFunc(slices.Clone(m.st.Nodes), func(n Node) bool { return n.Leaving })
	rf := s.ReplicationFactor
	if rf == 0 {
		rf = min(max(m.cfg.DefaultReplicas, 1), uint32(max(len(active), 1)))
	}
	if len(m.st.Nodes) > 0 && int(rf) > len(active) {
		return nil, fmt.Errorf("%w: replication factor %d but the cluster has %d nodes (not leaving)", ErrNotEnoughNodes, rf, len(active))
	}
	if err := m.checkTopicQuota(s); err != nil {
		return nil, err
	}
	t := &Topic{
		ID: m.st.NextTopicID, Name: s.Name, Partitions: s.Partitions,
		ReplicationFactor: rf, MaxRecordBytes: s.MaxRecordBytes,
		Retention: s.Retention, DedupeWindowNanos: s.DedupeWindowNanos, CreateTime: s.CreateTime,
		Creator: s.Creator, KeyIndex: s.KeyIndex,
	}
	m.st.NextTopicID++
	m.addPartitions(t, 0, s.Partitions, active, len(active) > 0)
	if err := m.putTopic(w, t, Change{Created: t}); err != nil {
		return nil, err
	}
	return t, nil
}

// addPartitions gives t partitions from up to n: group ids from the
// counter and, when placed, replicas over active (place). Creating and
// growing a topic share it, so every member computes the same.
func (m *Meta) addPartitions(t *Topic, from, n uint32, active []Node, placed bool) {
	for i := from; i < n; i++ {
		t.Groups = append(t.Groups, m.st.NextGroupID)
		m.st.NextGroupID++
		if placed {
			t.Replicas = append(t.Replicas, place(active, t.ID, i, t.ReplicationFactor))
		}
	}
}

// putTopic writes t, makes it the catalog's topic of its name (topics are
// shared read-only: a change replaces one, never modifies it), and records
// the change for the broker.
func (m *Meta) putTopic(w *pebble.Batch, t *Topic, c Change) error {
	v, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := w.Set(keys.TopicKey(t.ID), v, nil); err != nil {
		return err
	}
	m.topics[t.Name] = t
	m.changes = append(m.changes, c)
	return nil
}

func (m *Meta) applyAlter(w *pebble.Batch, a *Alter) (*Topic, error) {
	old, ok := m.topics[a.Name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, echo.Quote(a.Name))
	}
	t := *old // topics are shared read-only: replace, never modify
	t.Retention = a.Retention
	if err := m.putTopic(w, &t, Change{Altered: &t}); err != nil {
		return nil, err
	}
	return &t, nil
}

func (m *Meta) applyDelete(w *pebble.Batch, name string) (*Topic, error) {
	t, ok := m.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, echo.Quote(name))
	}
	if err := w.Delete(keys.TopicKey(t.ID), nil); err != nil {
		return nil, err
	}
	// The partitions' data is deleted after this is durable; the markers
	// make sure that also happens after a crash in between.
	for _, g := range t.Groups {
		if err := w.Set(keys.DeletionKey(g), nil, nil); err != nil {
			return nil, err
		}
	}
	delete(m.topics, name)
	m.changes = append(m.changes, Change{Deleted: t})
	return t, nil
}

// Durable implements raftlog.StateMachine.
func (m *Meta) Durable() {
	m.mu.Lock()
	m.publishLocked()
	m.mu.Unlock()
	m.reg.Publish()
	m.publishAuth()
	changes, results := m.changes, m.results
	m.changes, m.results = nil, nil
	if len(changes) > 0 && m.cfg.OnChange != nil {
		m.cfg.OnChange(changes)
	}
	for _, r := range results {
		m.answer(r)
	}
}

func (m *Meta) applyAddNode(n Node) error {
	if slices.Contains(m.st.RemovedNodes, n.ID) {
		return fmt.Errorf("%w: %d (ids are never reused: start the node under a new one)", ErrRemovedID, n.ID)
	}
	if i := slices.IndexFunc(m.st.Nodes, func(o Node) bool { return o.ID == n.ID }); i >= 0 {
		if m.st.Nodes[i].Addr != n.Addr {
			return fmt.Errorf("%w: node %d is a member at %s, not %s", ErrNodeExists, n.ID, m.st.Nodes[i].Addr, n.Addr)
		}
		return nil // a restart asking again
	}
	n.Leaving = false
	m.st.Nodes = append(m.st.Nodes, n)
	slices.SortFunc(m.st.Nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	return nil
}

func (m *Meta) applyLeave(id uint64) error {
	i := slices.IndexFunc(m.st.Nodes, func(o Node) bool { return o.ID == id })
	if i < 0 {
		return fmt.Errorf("%w: %d", ErrNoNode, id)
	}
	m.st.Nodes[i].Leaving = true
	return nil
}

func (m *Meta) applyReassign(w *pebble.Batch, rs []Reassign) error {
	changed := map[uint64]*Topic{}
	for _, r := range rs {
		var t *Topic
		for _, cand := range m.topics {
			if cand.ID == r.TopicID {
				t = cand
			}
		}
		if t == nil || int(r.Partition) >= len(t.Replicas) || len(r.Replicas) == 0 {
			continue // deleted meanwhile, or a topic from before placement
		}
		if c, ok := changed[t.ID]; ok {
			t = c
		} else {
			nt := *t // topics are shared read-only: replace, never modify
			nt.Replicas = slices.Clone(t.Replicas)
			t = &nt
			changed[t.ID] = t
		}
		t.Replicas[r.Partition] = slices.Clone(r.Replicas)
	}
	for _, t := range changed {
		if err := m.putTopic(w, t, Change{Reassigned: t}); err != nil {
			return err
		}
	}
	return nil
}

// place picks partition i's replicas: rf consecutive members, starting at
// a member that moves by one per partition (and per topic), so replicas and
// preferred leaders (the first replica) spread evenly over the members.
// It is deterministic: every replica of the metadata group computes the
// same placement at apply.
func place(nodes []Node, topicID uint64, i uint32, rf uint32) []uint64 {
	out := make([]uint64, 0, rf)
	start := (topicID + uint64(i)) % uint64(len(nodes))
	for k := range uint64(rf) {
		out = append(out, nodes[(start+k)%uint64(len(nodes))].ID)
	}
	return out
}

// LeaderChanged implements raftlog.StateMachine.
func (m *Meta) LeaderChanged(leader, term uint64) {
	m.mu.Lock()
	m.mu.leader = leader
	m.mu.Unlock()
}

// SnapshotData implements raftlog.Snapshotter. The metadata log is never
// truncated, so the only snapshot is the bootstrap one: empty state.
func (m *Meta) SnapshotData(index uint64) ([]byte, error) { return nil, nil }

// RestoreSnapshot implements raftlog.Snapshotter: a new member starts from
// the empty catalog and applies the whole metadata log.
func (m *Meta) RestoreSnapshot(w *pebble.Batch, index uint64, data []byte) error {
	if len(data) != 0 || len(m.topics) > 0 || len(m.st.Nodes) > 0 {
		return fmt.Errorf("meta: snapshot at %d over existing metadata (the metadata log is never truncated)", index)
	}
	return nil
}

// Stopped implements raftlog.StateMachine.
func (m *Meta) Stopped(err error) {
	m.mu.Lock()
	if m.mu.err == nil {
		m.mu.err = errors.Join(ErrStopped, err)
	}
	stopErr := m.mu.err
	waiters := m.mu.waiters
	m.mu.waiters = make(map[uint64]chan result)
	m.mu.queue = nil
	m.mu.Unlock()
	for id, ch := range waiters {
		ch <- result{id: id, err: stopErr}
	}
}

var _ raftlog.StateMachine = (*Meta)(nil)

// ReadTopics reads the catalog's topic records from r, by topic id (what
// Open loads; engine/offline reads a stopped node's with it).
func ReadTopics(r pebble.Reader) ([]*Topic, error) {
	start, end := keys.TopicSpan()
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var ts []*Topic
	for valid := it.First(); valid; valid = it.Next() {
		t := new(Topic)
		if err := json.Unmarshal(it.Value(), t); err != nil {
			return nil, fmt.Errorf("meta: topic record %x: %w", it.Key(), err)
		}
		if int(t.Partitions) != len(t.Groups) {
			return nil, fmt.Errorf("meta: topic %q has %d partitions but %d groups", t.Name, t.Partitions, len(t.Groups))
		}
		ts = append(ts, t)
	}
	return ts, it.Error()
}
