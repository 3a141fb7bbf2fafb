package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/raftlog"
)

// identity is what a data directory records about its node.
type identity struct {
	NodeID    uint64 `json:"node_id"`
	ClusterID uint64 `json:"cluster_id"`
}

// checkIdentity records the node's identity in a new store, and refuses a
// store that belongs to another node or another cluster: starting on it
// would mix two nodes' raft state.
func checkIdentity(db *pebble.DB, cfg Config) error {
	want := identity{NodeID: cfg.NodeID, ClusterID: cfg.Cluster.ID}
	v, closer, err := db.Get(keys.IdentityKey)
	if errors.Is(err, pebble.ErrNotFound) {
		data, _ := json.Marshal(want)
		b := db.NewBatch()
		if err := b.Set(keys.IdentityKey, data, nil); err != nil {
			b.Close()
			return err
		}
		if err := store.Commit(b, pebble.Sync); err != nil {
			return err // the batch is left to the collector: Pebble may hold it
		}
		return b.Close()
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	var got identity
	if err := json.Unmarshal(v, &got); err != nil {
		return fmt.Errorf("broker: %w: node identity in %s: %v", ErrInvalid, cfg.Dir, err)
	}
	if got.NodeID != want.NodeID {
		return fmt.Errorf("broker: %w: data directory %s belongs to node %d, not %d (a wiped node rejoins under a new id)",
			ErrInvalid, cfg.Dir, got.NodeID, want.NodeID)
	}
	if got.ClusterID != want.ClusterID {
		return fmt.Errorf("broker: %w: data directory %s belongs to cluster %016x, not %016x (check --initial-cluster)",
			ErrInvalid, cfg.Dir, got.ClusterID, want.ClusterID)
	}
	return nil
}

// initialVoters are the metadata group's voters at bootstrap.
func (b *Broker) initialVoters() []uint64 {
	if len(b.cfg.Cluster.InitialMembers) == 0 {
		return []uint64{b.cfg.NodeID}
	}
	return slices.Sorted(maps.Keys(b.cfg.Cluster.InitialMembers))
}

// clustered reports whether the node runs with peers.
func (b *Broker) clustered() bool { return len(b.cfg.Cluster.InitialMembers) > 0 }

// initMembers records the initial members in the metadata group once it
// has a leader (every node tries; the first to apply wins).
func (b *Broker) initMembers() {
	defer b.wg.Done()
	nodes := make([]meta.Node, 0, len(b.cfg.Cluster.InitialMembers))
	for _, id := range b.initialVoters() {
		nodes = append(nodes, meta.Node{ID: id, Addr: b.cfg.Cluster.InitialMembers[id]})
	}
	for len(b.meta.Nodes()) == 0 {
		if b.meta.Leader() != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := b.meta.Init(ctx, nodes)
			cancel()
			if err != nil {
				b.log.Debug("record members", "error", err)
			}
		}
		select {
		case <-b.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitMembers waits (up to 10 s, or ctx) until a cluster node knows the
// members: placement needs them. Just after a cluster's first start that
// takes one election.
func (b *Broker) waitMembers(ctx context.Context) error {
	if !b.clustered() {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(b.meta.Nodes()) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: the cluster's members are not recorded yet (no metadata quorum?)", ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Addr returns a member's address ("" if unknown).
func (b *Broker) Addr(node uint64) (string, bool) {
	for _, n := range b.meta.Nodes() {
		if n.ID == node {
			return n.Addr, n.Addr != ""
		}
	}
	addr, ok := b.cfg.Cluster.InitialMembers[node]
	return addr, ok
}

// IsMember reports whether node may send this node raft messages: a
// member of the initial cluster or of the metadata. A removed member
// still may, until the configuration changes that take it out of every
// raft group have gone through (a metadata leader that removes itself
// must still get its last configuration change replicated); raft itself
// then ignores it. The member services ask IsCurrentMember.
func (b *Broker) IsMember(node uint64) bool {
	if _, ok := b.cfg.Cluster.InitialMembers[node]; ok {
		return true
	}
	return slices.ContainsFunc(b.meta.Nodes(), func(n meta.Node) bool { return n.ID == node })
}

// IsCurrentMember reports whether node is a member now: not removed (from
// the moment this node applies the removal, though it was in the initial
// cluster). The member services (peer reads, the member path) admit only
// current members.
func (b *Broker) IsCurrentMember(node uint64) bool {
	return node != 0 && !b.meta.Removed(node) && b.IsMember(node)
}

// NodeID returns this node's id.
func (b *Broker) NodeID() uint64 { return b.cfg.NodeID }

// ClusterID returns the cluster's id.
func (b *Broker) ClusterID() uint64 { return b.cfg.Cluster.ID }

// hosted returns the partitions with a replica on this node.
func (lt *liveTopic) hosted() []*partition.Partition {
	out := make([]*partition.Partition, 0, len(lt.parts))
	for _, p := range lt.parts {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// hostsAll reports whether every partition has a replica on this node.
func (lt *liveTopic) hostsAll() bool { return !slices.Contains(lt.parts, nil) }

// replicaNodes lists the nodes that keep a replica of every partition.
func (lt *liveTopic) replicaNodes() []uint64 {
	var out []uint64
	for i := range lt.parts {
		r := lt.meta.ReplicasOf(i)
		if i == 0 {
			out = slices.Clone(r)
			continue
		}
		out = slices.DeleteFunc(out, func(n uint64) bool { return !slices.Contains(r, n) })
	}
	return out
}

// maintainInterval is how often maintain looks at the groups this node
// leads.
const maintainInterval = 200 * time.Millisecond

// transferLag is how far behind the leader's last index a preferred leader
// may be when leadership is handed to it: raft itself sends it the rest
// and hands over once it has caught up (or gives up after an election
// timeout). Requiring an exact match missed most chances under steady
// load (a benchmark saw leadership come back after 6.7 s at the median).
const transferLag = 256

// maintain makes the raft groups this node leads follow the metadata: their
// configurations follow the replica sets (and the metadata group's the
// members), a leader that is no longer a replica hands leadership to one,
// and, every LeaderBalanceInterval, each partition is handed to its
// preferred leader (its first replica) once that replica has caught up, so
// leadership spreads as placement intended, also after a node came back
// from a failure. Replicas this node no longer keeps are deleted once the
// partition's configuration excludes it.
func (b *Broker) maintain() {
	defer b.wg.Done()
	if !b.clustered() {
		return
	}
	tick := time.NewTicker(maintainInterval)
	defer tick.Stop()
	lastBalance := time.Now()
	coordinating := false
	lb := newLeaderBalance(time.Duration(b.cfg.Cluster.ElectionTicks)*b.cfg.Cluster.TickInterval + maintainInterval)
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		balance := b.cfg.Cluster.LeaderBalanceInterval > 0 && time.Since(lastBalance) >= b.cfg.Cluster.LeaderBalanceInterval
		if balance {
			lastBalance = time.Now()
		}
		// A node that stops coordinating ends its group members' streams:
		// they reconnect to the new coordinator, which fences the old
		// generation.
		now := b.coordinates() == nil
		if coordinating && !now {
			b.groups.CloseAll(b.coordinates())
		}
		coordinating = now
		var members []uint64
		for _, n := range b.meta.Nodes() {
			members = append(members, n.ID)
		}
		if len(members) > 0 {
			b.follow(meta.GroupID, members, 0, false, nil)
		}
		b.mu.Lock()
		var todo []*liveTopic
		for _, lt := range b.mu.topics {
			todo = append(todo, lt)
		}
		b.mu.Unlock()
		for _, lt := range todo {
			for i, p := range lt.parts {
				if p == nil || lt.meta.ReplicasOf(i) == nil {
					continue
				}
				r := lt.meta.ReplicasOf(i)
				if b.follow(p.Group(), r, r[0], balance, lb) {
					b.dropReplica(lt.meta, i)
				}
			}
		}
	}
}

// follow moves group toward the replica set want, if this node leads it:
// one configuration change at a time (joint consensus when it both adds
// and removes), leadership handed away when this node is not in want or
// (a partition, lb set) its disk is below MinFreeBytes, and to preferred
// when balance is set and it caught up. It reports whether this node keeps
// a replica nobody counts on any more (not in want, and the group's
// applied configuration excludes it).
func (b *Broker) follow(group uint64, want []uint64, preferred uint64, balance bool, lb *leaderBalance) (drop bool) {
	st, ok := b.host.Status(group)
	if !ok || st.Err != nil {
		return false
	}
	self := b.cfg.NodeID
	if !slices.Contains(want, self) && !slices.Contains(st.Voters, self) && !slices.Contains(st.VotersOutgoing, self) {
		return true
	}
	if !st.Leading {
		return false
	}
	if lb != nil {
		lb.leads(group, st.Term, time.Now())
	}
	if lb != nil && b.diskFull.Load() {
		// A leader that refuses every publish for lack of disk would hold
		// its partition unwritable although other replicas could take
		// it: hand it to one (and again whenever raft elects this node).
		if to := handOffTarget(st, preferred, self); to != 0 {
			b.log.Info("disk almost full: handing leadership to another replica", "group", group, "to", to)
			_ = b.host.TransferLeader(group, to)
		}
		return false
	}
	if !slices.Contains(want, self) {
		// Hand leadership to a caught-up replica that stays before this
		// node takes itself out.
		for _, n := range want {
			if slices.Contains(st.Voters, n) && st.Match[n] >= st.Last {
				_ = b.host.TransferLeader(group, n)
				return false
			}
		}
	}
	if len(st.VotersOutgoing) > 0 {
		return false // a joint change is still being left (raft does it)
	}
	var cc pb.ConfChangeV2
	for _, n := range want {
		if !slices.Contains(st.Voters, n) {
			cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: pb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(n)})
		}
	}
	for _, n := range st.Voters {
		if !slices.Contains(want, n) && n != self {
			cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(n)})
		}
	}
	if len(cc.Changes) > 0 {
		if err := b.host.ProposeConfChange(group, &cc); err != nil {
			b.log.Debug("configuration change", "group", group, "error", err)
		} else {
			b.log.Debug("proposed a configuration change", "group", group, "voters", st.Voters, "want", want)
		}
		return false
	}
	if balance && preferred != 0 && preferred != self && st.Match[preferred]+transferLag >= st.Last && b.settled(preferred) && lb.mayHand(group, time.Now()) {
		b.log.Debug("handing leadership to the preferred leader", "group", group, "to", preferred)
		_ = b.host.TransferLeader(group, preferred)
	}
	return false
}

// settled reports whether node has been reachable long enough to be
// handed back the partitions it prefers to lead: two balance rounds. In a
// crash loop (the scenario group-reset, its partition leader killed
// every 5 s) a preferred leader was handed its partition back about 2 s
// after each restart, so every kill moved the leadership twice.
func (b *Broker) settled(node uint64) bool {
	return b.tr == nil || b.tr.UpFor(node) >= 2*b.cfg.Cluster.LeaderBalanceInterval
}

// handOffTarget picks the replica a leader low on disk hands a group to:
// the preferred leader if it is caught up enough (transferLag), else the
// voter whose log matches the most of the leader's; 0 if none qualifies.
// Which replicas have disk space is not known here: one that is low too
// hands the group on in turn.
func handOffTarget(st raftlog.Status, preferred, self uint64) uint64 {
	ok := func(n uint64) bool {
		return n != self && slices.Contains(st.Voters, n) && st.Match[n]+transferLag >= st.Last
	}
	if preferred != 0 && ok(preferred) {
		return preferred
	}
	var best uint64
	for _, n := range st.Voters {
		if ok(n) && (best == 0 || st.Match[n] > st.Match[best]) {
			best = n
		}
	}
	return best
}

// balanceHoldOff is how long a leader stops handing a group to its
// preferred leader after the group came straight back from it.
const balanceHoldOff = time.Minute

// leaderBalance remembers, for the maintain loop that owns it, when (and
// at which raft term) this node last handed each group to its preferred
// leader, and since when (and at which term) it leads each group.
//
// A group handed away that this node leads again at a later term, having
// taken it back within backWithin of the hand-off, came straight back: the
// preferred leader took it and refused to lead (its disk is low). Handing
// it over at every round would cost two leader changes each time (each a
// short pause of the partition's publishes), so balancing that group
// holds off for balanceHoldOff.
//
// backWithin is one election timeout plus a maintain round: a group can
// come back that fast only by a transfer, never by a failover, which first
// waits an election timeout for the missing leader. A group that came
// back later (the preferred leader led it, then failed: a kill soon after
// a restart) is balanced as usual, and so is one still led here at the
// same term (the transfer never happened: the preferred leader was still
// catching up after a restart).
type leaderBalance struct {
	backWithin time.Duration
	handed     map[uint64]termAt // the last hand-off of each group
	leading    map[uint64]termAt // since when this node leads each group
	holdOff    map[uint64]time.Time
}

// termAt is a moment and the raft term of a group then.
type termAt struct {
	at   time.Time
	term uint64
}

func newLeaderBalance(backWithin time.Duration) *leaderBalance {
	return &leaderBalance{backWithin: backWithin, handed: map[uint64]termAt{}, leading: map[uint64]termAt{}, holdOff: map[uint64]time.Time{}}
}

// leads records that this node leads group at term, as seen at now (the
// maintain loop calls it every round for every group it leads).
func (lb *leaderBalance) leads(group, term uint64, now time.Time) {
	if l, ok := lb.leading[group]; !ok || l.term != term {
		lb.leading[group] = termAt{at: now, term: term}
	}
}

// mayHand reports whether group (led here, its preferred leader caught up)
// may be handed to its preferred leader now, and records it if so. leads
// must have been called for the current term first.
func (lb *leaderBalance) mayHand(group uint64, now time.Time) bool {
	if now.Before(lb.holdOff[group]) {
		return false
	}
	l := lb.leading[group]
	if h, ok := lb.handed[group]; ok && l.term > h.term && l.at.Sub(h.at) <= lb.backWithin {
		delete(lb.handed, group)
		lb.holdOff[group] = now.Add(balanceHoldOff)
		return false
	}
	lb.handed[group] = termAt{at: now, term: l.term}
	return true
}

// dropReplica deletes this node's replica of partition i of t, which
// moved to other nodes.
func (b *Broker) dropReplica(t *meta.Topic, i int) {
	b.mu.Lock()
	lt, ok := b.mu.topics[t.ID]
	if !ok || lt.parts[i] == nil {
		b.mu.Unlock()
		return
	}
	p := lt.parts[i]
	nlt := &liveTopic{meta: lt.meta, parts: slices.Clone(lt.parts), counters: lt.counters, spread: lt.spread}
	nlt.parts[i] = nil
	b.mu.topics[t.ID] = nlt
	b.mu.Unlock()
	p.Fail(fmt.Errorf("%w: partition %d of %q moved off node %d", ErrUnavailable, i, t.Name, b.cfg.NodeID))
	if err := b.deleteGroup(p.Group()); err != nil {
		b.log.Error("delete a moved replica", "group", p.Group(), "error", err)
		return
	}
	b.log.Debug("deleted a replica that moved off this node", "topic", t.Name, "partition", i)
}

// HandOff hands the leadership of every group this node leads (the
// metadata group's too) to a caught-up replica, and waits until they moved
// or timeout passed: a graceful shutdown then costs no election timeout.
// Not while the disk is out (disk.go): the raft loop may be waiting for
// space in a write, and a transfer waits for the loop (Close ends that
// wait, after the hand-off); the others elect instead.
func (b *Broker) HandOff(timeout time.Duration) {
	if !b.clustered() || b.diskOut.Load() {
		return
	}
	deadline := time.Now().Add(timeout)
	groups := []uint64{meta.GroupID}
	b.mu.Lock()
	for _, lt := range b.mu.topics {
		for _, p := range lt.parts {
			if p != nil {
				groups = append(groups, p.Group())
			}
		}
	}
	b.mu.Unlock()
	for {
		leading := 0
		for _, g := range groups {
			st, ok := b.host.Status(g)
			if !ok || !st.Leading {
				continue
			}
			leading++
			for _, n := range st.Voters {
				if n != b.cfg.NodeID && st.Match[n] >= st.Last {
					_ = b.host.TransferLeader(g, n)
					break
				}
			}
		}
		if leading == 0 || time.Now().After(deadline) {
			if leading > 0 {
				b.log.Warn("shutting down while still leading", "groups", leading)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NotCoordinatorError is the answer of a node asked to serve a subscriber
// group while another node coordinates groups (the metadata leader does).
type NotCoordinatorError struct {
	Node uint64 // the coordinator (0: none known, an election is on)
	Addr string
}

func (e *NotCoordinatorError) Error() string {
	if e.Node == 0 {
		return "subscriber groups are coordinated by the metadata leader, and none is known now: try again"
	}
	return fmt.Sprintf("subscriber groups are coordinated by node %d (%s): connect there", e.Node, e.Addr)
}

// Is makes it ErrUnavailable.
func (e *NotCoordinatorError) Is(target error) bool { return target == ErrUnavailable }

// coordinates returns nil if this node coordinates subscriber groups: it
// runs alone, or leads the metadata group. One coordinator for the whole
// cluster keeps a group's members on one node, where assignments and
// generations live; commits reach each partition's leader inside raft.
func (b *Broker) coordinates() error {
	if !b.clustered() {
		return nil
	}
	if st, ok := b.host.Status(meta.GroupID); ok && st.Leading {
		return nil
	}
	l := b.meta.Leader()
	addr, _ := b.Addr(l)
	return &NotCoordinatorError{Node: l, Addr: addr}
}

// NotMetaLeaderError is the answer of a node asked for a membership change
// while it does not lead the metadata group.
type NotMetaLeaderError struct{ Leader uint64 }

func (e *NotMetaLeaderError) Error() string {
	return fmt.Sprintf("this node does not lead the metadata group (leader: %d)", e.Leader)
}

// Is makes it ErrUnavailable.
func (e *NotMetaLeaderError) Is(target error) bool { return target == ErrUnavailable }

// leadsMeta returns nil if this node leads the metadata group, else who
// does, waiting up to 5 s for an election (or a node that just joined to
// hear from the leader).
func (b *Broker) leadsMeta() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, ok := b.host.Status(meta.GroupID); ok && st.Leading {
			return nil
		}
		if l := b.meta.Leader(); l != 0 || time.Now().After(deadline) {
			return &NotMetaLeaderError{Leader: l}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Members returns the recorded members.
func (b *Broker) Members() []meta.Node { return b.meta.Nodes() }

// AddNode records a new member and waits until it is a voter of the
// metadata group. This node must lead the metadata group.
func (b *Broker) AddNode(ctx context.Context, id uint64, addr string) ([]meta.Node, error) {
	if err := b.leadsMeta(); err != nil {
		return nil, err
	}
	// The first members must be recorded first: a member added before
	// them would make the new node the only voter (TestAuthJoin hit it).
	if err := b.waitMembers(ctx); err != nil {
		return nil, err
	}
	if id == 0 || addr == "" {
		return nil, fmt.Errorf("%w: a node needs an id and an address", ErrInvalid)
	}
	err := b.meta.AddNode(ctx, meta.Node{ID: id, Addr: addr})
	switch {
	case errors.Is(err, meta.ErrRemovedID):
		return nil, fmt.Errorf("%w: %w", ErrFailedPrecondition, err)
	case errors.Is(err, meta.ErrNodeExists):
		return nil, fmt.Errorf("%w: %w", ErrTopicExists, err)
	case err != nil:
		return nil, unavailable(err)
	}
	if err := b.waitGroupVoters(ctx, meta.GroupID, func(v []uint64) bool { return slices.Contains(v, id) }); err != nil {
		return nil, err
	}
	return b.meta.Nodes(), nil
}

// waitGroupVoters waits until this node's view of group's configuration
// satisfies ok (and no joint change is under way).
func (b *Broker) waitGroupVoters(ctx context.Context, group uint64, ok func([]uint64) bool) error {
	for {
		if st, found := b.host.Status(group); found && len(st.VotersOutgoing) == 0 && ok(st.Voters) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the configuration change of group %d: %w", ErrUnavailable, group, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Reassignment is one partition RemoveNode moves.
type Reassignment struct {
	Topic     string
	Partition uint32
	Group     uint64
	Replicas  []uint64
	Shrunk    bool
	// From and To: the replica that moves (To is 0 when Shrunk).
	From, To uint64
}

// replicaLoad counts the replicas of every member not leaving (and not
// skip).
func replicaLoad(nodes []meta.Node, topics []*meta.Topic, skip uint64) map[uint64]int {
	load := map[uint64]int{}
	for _, n := range nodes {
		if !n.Leaving && n.ID != skip {
			load[n.ID] = 0
		}
	}
	for _, t := range topics {
		for _, r := range t.Replicas {
			for _, n := range r {
				if _, ok := load[n]; ok {
					load[n]++
				}
			}
		}
	}
	return load
}

// Rebalance plans moves that even out the replicas per member (at most one
// move per partition, from the most loaded member to the least loaded one
// that has no replica of the partition) and, unless dryRun, records the new
// replica sets; the partitions' leaders then follow (maintain). This node
// must lead the metadata group.
func (b *Broker) Rebalance(ctx context.Context, dryRun bool) ([]Reassignment, error) {
	if err := b.leadsMeta(); err != nil {
		return nil, err
	}
	topics := b.meta.Topics()
	load := replicaLoad(b.meta.Nodes(), topics, 0)
	moved := map[uint64]bool{}
	var out []Reassignment
	var rs []meta.Reassign
	for {
		ids := slices.Sorted(maps.Keys(load))
		if len(ids) < 2 {
			break
		}
		hi, lo := ids[0], ids[0]
		for _, n := range ids {
			if load[n] > load[hi] {
				hi = n
			}
			if load[n] < load[lo] {
				lo = n
			}
		}
		if load[hi]-load[lo] <= 1 {
			break
		}
		var found *Reassignment
		for _, t := range topics {
			for i, r := range t.Replicas {
				if found != nil || moved[t.Groups[i]] || !slices.Contains(r, hi) || slices.Contains(r, lo) {
					continue
				}
				nr := slices.Clone(r)
				nr[slices.Index(nr, hi)] = lo
				found = &Reassignment{Topic: t.Name, Partition: uint32(i), Group: t.Groups[i], Replicas: nr, From: hi, To: lo}
				rs = append(rs, meta.Reassign{TopicID: t.ID, Partition: uint32(i), Replicas: nr})
			}
		}
		if found == nil {
			break
		}
		moved[found.Group] = true
		load[hi]--
		load[lo]++
		out = append(out, *found)
	}
	if dryRun || len(rs) == 0 {
		return out, nil
	}
	if err := b.meta.ReassignReplicas(ctx, rs); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// StartRemoveNode marks node as leaving and gives every partition with a
// replica on it a new replica set: the node is replaced by the member with
// the fewest replicas that has none of the partition, or left out when no
// member is free (one replica fewer). This node must lead the metadata
// group. The caller waits for the partitions to follow (their leaders
// change their configurations), then calls FinishRemoveNode.
func (b *Broker) StartRemoveNode(ctx context.Context, id uint64) ([]Reassignment, error) {
	if err := b.leadsMeta(); err != nil {
		return nil, err
	}
	nodes := b.meta.Nodes()
	if !slices.ContainsFunc(nodes, func(n meta.Node) bool { return n.ID == id }) {
		return nil, fmt.Errorf("%w: node %d is not a member", ErrNoTopic, id)
	}
	if len(nodes) < 2 {
		return nil, fmt.Errorf("%w: node %d is the only member", ErrFailedPrecondition, id)
	}
	if err := b.meta.Leave(ctx, id); err != nil {
		return nil, unavailable(err)
	}
	topics := b.meta.Topics()
	load := replicaLoad(nodes, topics, id)
	var out []Reassignment
	var rs []meta.Reassign
	for _, t := range topics {
		for i, r := range t.Replicas {
			k := slices.Index(r, id)
			if k < 0 {
				continue
			}
			var best uint64
			for _, n := range slices.Sorted(maps.Keys(load)) {
				if !slices.Contains(r, n) && (best == 0 || load[n] < load[best]) {
					best = n
				}
			}
			nr := slices.Clone(r)
			shrunk := best == 0
			if shrunk {
				if len(r) == 1 {
					return nil, fmt.Errorf("%w: partition %d of %q has its only replica on node %d and no other member can take it", ErrFailedPrecondition, i, t.Name, id)
				}
				nr = slices.Delete(nr, k, k+1)
			} else {
				nr[k] = best
				load[best]++
			}
			rs = append(rs, meta.Reassign{TopicID: t.ID, Partition: uint32(i), Replicas: nr})
			out = append(out, Reassignment{Topic: t.Name, Partition: uint32(i), Group: t.Groups[i], Replicas: nr, Shrunk: shrunk, From: id, To: best})
		}
	}
	if len(rs) > 0 {
		if err := b.meta.ReassignReplicas(ctx, rs); err != nil {
			return nil, unavailable(err)
		}
	}
	return out, nil
}

// FinishRemoveNode forgets node for good (its id is never reused) and
// waits until the metadata group's configuration excludes it.
func (b *Broker) FinishRemoveNode(ctx context.Context, id uint64) error {
	if err := b.leadsMeta(); err != nil {
		return err
	}
	if err := b.meta.Forget(ctx, id); err != nil {
		return unavailable(err)
	}
	return b.waitGroupVoters(ctx, meta.GroupID, func(v []uint64) bool { return !slices.Contains(v, id) })
}

// TransferLeader asks raft to hand partition p of topic to node, a replica
// caught up enough, and returns once asked (raft hands over when the node
// has the whole log, or gives up after an election timeout). This node
// must lead the partition: otherwise a *NotLeaderError names the leader it
// knows (nothing was done). Asking the leader itself is done already.
func (b *Broker) TransferLeader(topic string, p uint32, node uint64) error {
	part, replicas, err := b.partitionOf(topic, p)
	if err != nil {
		return err
	}
	if !slices.Contains(replicas, node) {
		return fmt.Errorf("%w: node %d keeps no replica of partition %d of %q (replicas: %v)", ErrFailedPrecondition, node, p, topic, replicas)
	}
	leader := uint64(0)
	if part != nil {
		leader = part.Leader()
	}
	switch {
	case leader == node:
		return nil
	case part == nil || leader != b.cfg.NodeID:
		return &NotLeaderError{Topic: topic, Partition: p, Node: b.cfg.NodeID, Leader: leader}
	}
	return b.host.TransferLeader(part.Group(), node)
}

// PreferLeader makes node the preferred leader of partition p of topic
// (its first replica, metadata that every member keeps), so that leader
// balancing keeps the leadership there, and gives it back there after a
// failover, instead of undoing a manual transfer. Only the metadata leader
// records it (a *NotMetaLeaderError otherwise); a node already preferred
// needs nothing.
func (b *Broker) PreferLeader(ctx context.Context, topic string, p uint32, node uint64) error {
	_, replicas, err := b.partitionOf(topic, p)
	if err != nil {
		return err
	}
	k := slices.Index(replicas, node)
	switch {
	case k < 0:
		return fmt.Errorf("%w: node %d keeps no replica of partition %d of %q (replicas: %v)", ErrFailedPrecondition, node, p, topic, replicas)
	case k == 0:
		return nil
	}
	if err := b.leadsMeta(); err != nil {
		return err
	}
	t, ok := b.meta.Topic(topic)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoTopic, topic)
	}
	nr := append([]uint64{node}, slices.Delete(slices.Clone(replicas), k, k+1)...)
	if err := b.meta.ReassignReplicas(ctx, []meta.Reassign{{TopicID: t.ID, Partition: p, Replicas: nr}}); err != nil {
		return unavailable(err)
	}
	return nil
}

// partitionOf returns this node's replica of partition p of topic (nil if
// it keeps none) and the partition's replicas, preferred leader first.
func (b *Broker) partitionOf(topic string, p uint32) (*partition.Partition, []uint64, error) {
	lt, err := b.anyTopic(topic)
	if err != nil {
		return nil, nil, err
	}
	if int(p) >= len(lt.parts) {
		return nil, nil, fmt.Errorf("%w: partition %d does not exist (topic %q has %d)", ErrInvalid, p, topic, len(lt.parts))
	}
	return lt.parts[p], lt.meta.ReplicasOf(int(p)), nil
}

// ErrFailedPrecondition marks a request the cluster's state refuses now.
var ErrFailedPrecondition = errors.New("failed precondition")

// NodeState is one member in ClusterStatus.
type NodeState struct {
	ID      uint64
	Addr    string
	Self    bool
	Leaving bool
}

// PartitionStatus is one partition in ClusterStatus, as this node sees it.
type PartitionStatus struct {
	Topic     string
	Partition uint32
	Group     uint64
	Replicas  []uint64
	Hosted    bool
	Raft      raftlog.Status
	Bounds    partition.State
}

// ClusterStatus is the cluster as this node sees it.
type ClusterStatus struct {
	MetaLeader uint64
	Nodes      []NodeState
	Partitions []PartitionStatus
}

// Status returns the members and every partition as this node sees them.
func (b *Broker) Status() ClusterStatus {
	cs := ClusterStatus{MetaLeader: b.meta.Leader()}
	for _, n := range b.meta.Nodes() {
		cs.Nodes = append(cs.Nodes, NodeState{ID: n.ID, Addr: n.Addr, Self: n.ID == b.cfg.NodeID, Leaving: n.Leaving})
	}
	if len(cs.Nodes) == 0 {
		// Not recorded yet (no metadata quorum so far): the initial list.
		for _, id := range b.initialVoters() {
			cs.Nodes = append(cs.Nodes, NodeState{ID: id, Addr: b.cfg.Cluster.InitialMembers[id], Self: id == b.cfg.NodeID})
		}
	}
	for _, t := range b.meta.Topics() {
		b.mu.Lock()
		lt := b.mu.topics[t.ID]
		b.mu.Unlock()
		for i, g := range t.Groups {
			ps := PartitionStatus{Topic: t.Name, Partition: uint32(i), Group: g, Replicas: t.ReplicasOf(i)}
			if ps.Replicas == nil {
				ps.Replicas = []uint64{b.cfg.NodeID}
			}
			if lt != nil && i < len(lt.parts) && lt.parts[i] != nil {
				ps.Hosted = true
				ps.Raft, _ = b.host.Status(g)
				ps.Bounds = lt.parts[i].Bounds()
			}
			cs.Partitions = append(cs.Partitions, ps)
		}
	}
	return cs
}
