package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// This file runs several Hosts in one process, one per simulated node, each
// over its own Pebble store on a crash-simulating in-memory filesystem. No
// host loop goroutine runs: the test calls tick and iterate itself and moves
// every message through a simulated network, so a script is replayed step
// by step.
//
// What is deterministic: the message schedule (FIFO per send, or a seeded
// shuffle), the stores (a crash keeps exactly what was synced), and
// elections the script starts itself (campaign, forget-leader, transfer).
// What is not: etcd raft draws each follower's election timeout from
// crypto/rand, in [ElectionTicks, 2*ElectionTicks). Scripts therefore never
// let two nodes race for leadership on their own: with a leader reachable,
// heartbeats (every tick) keep followers from campaigning, and a node cut
// off from the leader can only pre-vote (PreVote), which changes neither
// its term nor anything others see. Status printed after at least
// 2*ElectionTicks ticks of isolation is the same whatever the timeouts were.

// Keys of clusterSM, beside the host's 'r' keys:
//
//	y <group:8> 'e' <index:8>  data of the entry applied at that index
//	y <group:8> 'n'            entries applied since the last snapshot (8 bytes)
//	y <group:8> 's'            index of the last snapshot restored (8 bytes)
func smKey(group uint64, suffix byte) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{'y'}, group), suffix)
}

func smEntryKey(group, index uint64) []byte {
	return binary.BigEndian.AppendUint64(smKey(group, 'e'), index)
}

// getUint64 reads an 8-byte value; 0 if k is not set.
func getUint64(db *pebble.DB, k []byte) (uint64, error) {
	v, closer, err := db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("value of %d bytes under %x", len(v), k)
	}
	return binary.BigEndian.Uint64(v), nil
}

// smRow is one applied entry as the state machine stored it.
type smRow struct {
	index uint64
	data  string
}

// smState is what a clusterSM has stored.
type smState struct {
	snapshot uint64 // index of the last restored snapshot, 0 if none
	count    uint64
	rows     []smRow
}

func readSMState(db *pebble.DB, group uint64) (smState, error) {
	var st smState
	var err error
	if st.snapshot, err = getUint64(db, smKey(group, 's')); err != nil {
		return st, err
	}
	if st.count, err = getUint64(db, smKey(group, 'n')); err != nil {
		return st, err
	}
	it, err := db.NewIter(&pebble.IterOptions{
		LowerBound: smEntryKey(group, 0), UpperBound: smKey(group, 'e'+1),
	})
	if err != nil {
		return st, err
	}
	for valid := it.First(); valid; valid = it.Next() {
		st.rows = append(st.rows, smRow{binary.BigEndian.Uint64(it.Key()[10:]), string(it.Value())})
	}
	return st, errors.Join(it.Error(), it.Close())
}

// clusterSM stores each applied entry under its own index, so what every
// node applied can be compared index by index. It tracks its own proposals
// to their outcome (applied, dropped, lost by a leader change as
// AppliedTerm reveals, or unknown because a snapshot jumped over them), and
// reports anything impossible to the cluster.
//
// The host calls it from iterate, which the test goroutine runs, so it needs
// no lock.
type clusterSM struct {
	c     *cluster
	node  uint64
	group uint64

	queue      [][]byte
	truncateAt uint64
	leader     uint64
	term       uint64
	// last is the highest index applied or restored; count the entries
	// applied since the last snapshot. Both are loaded from the store.
	last, count uint64
	inflight    []proposal
	pending     []string // outcomes waiting for Durable
	outcomes    []string
}

type proposal struct {
	data string
	// term the proposal was handed to raft under; 0 when this node did
	// not lead then (a forwarded proposal's term is unknown).
	term uint64
}

func newClusterSM(c *cluster, n *simNode, group uint64) *clusterSM {
	st, err := readSMState(n.db, group)
	if err != nil {
		c.t.Fatal(err)
	}
	sm := &clusterSM{c: c, node: n.id, group: group, last: st.snapshot, count: st.count}
	if len(st.rows) > 0 {
		sm.last = max(sm.last, st.rows[len(st.rows)-1].index)
	}
	return sm
}

func (sm *clusterSM) TakeProposals(dst [][]byte) [][]byte {
	for _, d := range sm.queue {
		p := proposal{data: string(d)}
		if sm.leader == sm.node {
			p.term = sm.term
		}
		sm.inflight = append(sm.inflight, p)
	}
	dst = append(dst, sm.queue...)
	sm.queue = nil
	return dst
}

func (sm *clusterSM) Dropped(data [][]byte, err error) {
	for _, d := range data {
		if sm.forget(string(d)) {
			sm.outcomes = append(sm.outcomes, fmt.Sprintf("%s: dropped (%v)", d, err))
		}
	}
}

// forget removes data from the proposals in flight and reports whether it
// was there.
func (sm *clusterSM) forget(data string) bool {
	i := slices.IndexFunc(sm.inflight, func(p proposal) bool { return p.data == data })
	if i < 0 {
		return false
	}
	sm.inflight = slices.Delete(sm.inflight, i, i+1)
	return true
}

func (sm *clusterSM) Apply(w *pebble.Batch, ents []*pb.Entry) error {
	for _, e := range ents {
		idx, data := e.GetIndex(), string(e.GetData())
		if idx <= sm.last {
			sm.c.violate("n%d g%d: applied index %d after %d", sm.node, sm.group, idx, sm.last)
		}
		sm.last = idx
		sm.count++
		if err := w.Set(smEntryKey(sm.group, idx), e.GetData(), nil); err != nil {
			return err
		}
		sm.c.observeApply(sm.node, sm.group, idx, data)
		if sm.forget(data) {
			sm.pending = append(sm.pending, fmt.Sprintf("%s: applied at %d", data, idx))
		}
	}
	return w.Set(smKey(sm.group, 'n'), binary.BigEndian.AppendUint64(nil, sm.count), nil)
}

func (sm *clusterSM) AppliedTerm(term uint64) {
	sm.inflight = slices.DeleteFunc(sm.inflight, func(p proposal) bool {
		if p.term == 0 || p.term >= term {
			return false
		}
		sm.pending = append(sm.pending, fmt.Sprintf("%s: lost (proposed at term %d, applied term %d)", p.data, p.term, term))
		sm.c.observeLost(sm.node, sm.group, p.data)
		return true
	})
}

func (sm *clusterSM) Durable() {
	sm.outcomes = append(sm.outcomes, sm.pending...)
	sm.pending = nil
}

func (sm *clusterSM) LeaderChanged(leader, term uint64) { sm.leader, sm.term = leader, term }

func (sm *clusterSM) Stopped(err error) {
	if !errors.Is(err, ErrStopped) {
		sm.c.violate("n%d g%d stopped: %v", sm.node, sm.group, err)
	}
}

func (sm *clusterSM) TruncateLog() uint64 { return sm.truncateAt }

// SnapshotData returns the index itself: the state machine has no state
// beyond its rows, and the receiver checks it got the index it restores at.
func (sm *clusterSM) SnapshotData(index uint64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, index), nil
}

func (sm *clusterSM) RestoreSnapshot(w *pebble.Batch, index uint64, data []byte) error {
	if len(data) != 8 || binary.BigEndian.Uint64(data) != index {
		return fmt.Errorf("snapshot at %d carries %x", index, data)
	}
	if index <= sm.last {
		sm.c.violate("n%d g%d: snapshot at %d after applying %d", sm.node, sm.group, index, sm.last)
	}
	if err := w.DeleteRange(smEntryKey(sm.group, 0), smKey(sm.group, 'e'+1), nil); err != nil {
		return err
	}
	if err := w.Set(smKey(sm.group, 's'), data, nil); err != nil {
		return err
	}
	sm.last, sm.count = index, 0
	sm.c.stats.snapshots++
	if err := w.Set(smKey(sm.group, 'n'), binary.BigEndian.AppendUint64(nil, 0), nil); err != nil {
		return err
	}
	// Entries up to index may have been committed without this node seeing
	// them: what became of its proposals is unknown.
	for _, p := range sm.inflight {
		sm.pending = append(sm.pending, fmt.Sprintf("%s: unknown (snapshot at %d)", p.data, index))
	}
	sm.inflight = nil
	return nil
}

// simNode is one simulated node: a store that survives crashes, and the
// host running on it while the node is up.
type simNode struct {
	id     uint64
	fs     *vfs.MemFS
	db     *pebble.DB
	h      *Host // nil while down
	sms    map[uint64]*clusterSM
	groups map[uint64]GroupConfig // what to run after a restart (SM unset)
}

func (n *simNode) up() bool { return n.h != nil }

type link struct{ from, to uint64 }

// simMsg is a message on the simulated wire, marshalled as a real transport
// would, so no node ever shares memory with another.
type simMsg struct {
	from, to, group uint64
	typ             pb.MessageType
	data            []byte
	hold            int // delivery rounds left to wait
}

// cluster is the simulated network and its nodes.
type cluster struct {
	t        testing.TB
	rng      *rand.Rand
	election int
	// detect is every host's FailureDetectTicks: -1 (off) unless a
	// script sets it, so scripts start elections themselves.
	detect int
	// stalled nodes neither tick nor run their loop: what they receive
	// waits in their inbox, as in a paused process.
	stalled map[uint64]bool
	nodes   []*simNode // nodes[i] has id i+1
	queue   []*simMsg

	cut      map[link]bool
	delay    map[link]int
	reorder  bool
	dropRate float64 // random loss, for the randomized test

	// history holds, per group, the entry applied at each index by
	// whichever node applied it first; every later apply must agree.
	history map[uint64]map[uint64]string
	indexOf map[uint64]map[string]uint64
	lost    map[uint64]map[string]uint64 // data reported lost -> by node

	violations []string
	stats      struct{ crashes, snapshots int }
	// sends lists each Send call (its node and messages per group) while
	// recordSends is set.
	sends       []string
	recordSends bool
}

func newCluster(t testing.TB, seed uint64) *cluster {
	return &cluster{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		detect: -1, stalled: map[uint64]bool{},
		cut: map[link]bool{}, delay: map[link]int{},
		history: map[uint64]map[uint64]string{},
		indexOf: map[uint64]map[string]uint64{},
		lost:    map[uint64]map[string]uint64{},
	}
}

func (c *cluster) violate(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

// observeApply checks state machine safety as it happens: no two nodes
// apply different entries at one index, and no entry is applied at two
// indexes.
func (c *cluster) observeApply(node, group, index uint64, data string) {
	if c.history[group] == nil {
		c.history[group] = map[uint64]string{}
		c.indexOf[group] = map[string]uint64{}
	}
	if prev, ok := c.history[group][index]; ok && prev != data {
		c.violate("g%d index %d: n%d applied %q, another node %q", group, index, node, data, prev)
	}
	c.history[group][index] = data
	if prev, ok := c.indexOf[group][data]; ok && prev != index {
		c.violate("g%d: %q applied at %d and at %d (n%d)", group, data, prev, index, node)
	}
	c.indexOf[group][data] = index
	if by, ok := c.lost[group][data]; ok {
		c.violate("g%d: %q applied at %d after n%d reported it lost", group, data, index, by)
	}
}

func (c *cluster) observeLost(node, group uint64, data string) {
	if idx, ok := c.indexOf[group][data]; ok {
		c.violate("g%d: n%d reported %q lost, but it was applied at %d", group, node, data, idx)
	}
	if c.lost[group] == nil {
		c.lost[group] = map[string]uint64{}
	}
	c.lost[group][data] = node
}

func (c *cluster) node(id uint64) *simNode {
	if id == 0 || id > uint64(len(c.nodes)) {
		c.t.Fatalf("no node %d", id)
	}
	return c.nodes[id-1]
}

// simTransport is one node's side of the network.
type simTransport struct {
	c    *cluster
	from uint64
}

func (s simTransport) Send(envs []Envelope) {
	perGroup := map[uint64]int{}
	for _, e := range envs {
		perGroup[e.Group]++
	}
	if s.c.recordSends {
		var parts []string
		for _, g := range slices.Sorted(maps.Keys(perGroup)) {
			parts = append(parts, fmt.Sprintf("g%d:%d", g, perGroup[g]))
		}
		s.c.sends = append(s.c.sends, fmt.Sprintf("n%d: %s", s.from, strings.Join(parts, " ")))
	}
	for _, e := range envs {
		data, err := proto.Marshal(e.Msg)
		if err != nil {
			s.c.t.Fatal(err)
		}
		to := e.Msg.GetTo()
		s.c.queue = append(s.c.queue, &simMsg{
			from: s.from, to: to, group: e.Group, typ: e.Msg.GetType(), data: data,
			hold: s.c.delay[link{s.from, to}],
		})
	}
}

func (c *cluster) logger(id uint64) hclog.Logger {
	lvl := os.Getenv("RAFTLOG_CLUSTER_LOG")
	if lvl == "" {
		return nil
	}
	return hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("n%d", id), Level: hclog.LevelFromString(lvl)})
}

func (c *cluster) addNodes(n int) {
	for id := uint64(len(c.nodes) + 1); id <= uint64(n); id++ {
		nd := &simNode{id: id, fs: vfs.NewCrashableMem(), sms: map[uint64]*clusterSM{}, groups: map[uint64]GroupConfig{}}
		c.nodes = append(c.nodes, nd)
		c.start(nd)
	}
}

// start opens the node's store and host, and runs every group it ran before.
func (c *cluster) start(n *simNode) {
	n.db = openDB(c.t, n.fs)
	h, err := Open(Config{
		NodeID: n.id, DB: n.db, Transport: simTransport{c, n.id},
		ElectionTicks: c.election, Logger: c.logger(n.id), FailureDetectTicks: c.detect,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	n.h = h
	ids := make([]uint64, 0, len(n.groups))
	for id := range n.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		gc := n.groups[id]
		gc.Join = true // the state is on disk (or gone, after a wipe)
		if err := c.addGroup(n, gc); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *cluster) addGroup(n *simNode, gc GroupConfig) error {
	sm := newClusterSM(c, n, gc.ID)
	gc.SM = sm
	if _, err := n.h.addGroup(gc); err != nil {
		return err
	}
	n.sms[gc.ID] = sm
	gc.SM = nil
	n.groups[gc.ID] = gc
	c.iterate(n)
	return nil
}

// crash stops n at once: its host is dropped mid-flight and its store keeps
// what was synced (and, with keepPercent > 0, some of what was not).
func (c *cluster) crash(n *simNode, keepPercent int) {
	if !n.up() {
		return
	}
	delete(c.stalled, n.id)
	fs := n.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keepPercent, RNG: c.rng})
	if err := n.db.Close(); err != nil {
		c.t.Fatal(err)
	}
	n.fs, n.db, n.h = fs, nil, nil
	clear(n.sms)
}

func (c *cluster) iterate(n *simNode) {
	if !n.up() || c.stalled[n.id] {
		return
	}
	if err := n.h.iterate(); err != nil {
		c.t.Fatalf("n%d: %v", n.id, err)
	}
}

func (c *cluster) iterateAll() {
	for _, n := range c.nodes {
		c.iterate(n)
	}
}

// tick advances every live node's clock by one tick, then lets the nodes
// react.
func (c *cluster) tick() { c.tickNodes(nil) }

// tickNodes ticks the live nodes among ids (all if ids is empty).
func (c *cluster) tickNodes(ids []uint64) {
	for _, n := range c.nodes {
		if n.up() && !c.stalled[n.id] && (len(ids) == 0 || slices.Contains(ids, n.id)) {
			n.h.tick()
		}
	}
	c.iterateAll()
}

func (c *cluster) blocked(m *simMsg) bool {
	from, to := c.node(m.from), c.node(m.to)
	return !from.up() || !to.up() || c.cut[link{m.from, m.to}] ||
		(c.dropRate > 0 && c.rng.Float64() < c.dropRate)
}

// deliverRound delivers every message whose delay is over (dropping those
// the rules forbid), then lets every node handle what it received. It
// reports whether any message was in flight.
func (c *cluster) deliverRound() bool { return c.deliverRoundTo(true) }

// deliverRoundTo is deliverRound; without iterate, the messages wait in the
// hosts' inboxes for their next loop pass.
func (c *cluster) deliverRoundTo(iterate bool) bool {
	if len(c.queue) == 0 {
		return false
	}
	msgs := c.queue
	c.queue = nil
	var ready []*simMsg
	for _, m := range msgs {
		if m.hold > 0 {
			m.hold--
			c.queue = append(c.queue, m)
			continue
		}
		ready = append(ready, m)
	}
	if c.reorder {
		c.rng.Shuffle(len(ready), func(i, j int) { ready[i], ready[j] = ready[j], ready[i] })
	}
	inbox := make([][]Envelope, len(c.nodes))
	for _, m := range ready {
		failed := c.blocked(m)
		if m.typ == pb.MsgSnap {
			// A transport reports how a snapshot went: raft does not resend
			// one on its own (the follower's progress stays paused).
			if from := c.node(m.from); from.up() {
				from.h.ReportSnapshot(m.group, m.to, failed)
			}
		}
		if failed {
			continue
		}
		msg := &pb.Message{}
		if err := proto.Unmarshal(m.data, msg); err != nil {
			c.t.Fatal(err)
		}
		inbox[m.to-1] = append(inbox[m.to-1], Envelope{Group: m.group, Msg: msg})
	}
	for i, envs := range inbox {
		if len(envs) > 0 {
			c.nodes[i].h.Deliver(envs)
		}
	}
	if iterate {
		c.iterateAll()
	}
	return true
}

// deliver runs delivery rounds until no message is in flight.
func (c *cluster) deliver() {
	for i := 0; c.deliverRound(); i++ {
		if i > 10000 {
			c.t.Fatalf("the network does not quiesce; in flight:\n%s", c.fmtQueue())
		}
	}
}

// call runs one of the host's blocking methods (they wait for the loop) by
// calling it from a goroutine and running the loop's work here once it is
// queued. Other operations may be queued already (ReportSnapshot), so it
// waits for one more.
func (c *cluster) call(n *simNode, fn func(h *Host) error) error {
	opsQueued := func() int {
		n.h.mu.Lock()
		defer n.h.mu.Unlock()
		return len(n.h.mu.ops)
	}
	before := opsQueued()
	errc := make(chan error, 1)
	go func() { errc <- fn(n.h) }()
	for opsQueued() == before {
		select {
		case err := <-errc:
			return err // returned without queuing anything
		default:
		}
		runtime.Gosched()
	}
	c.iterate(n)
	return <-errc
}

func (c *cluster) propose(n *simNode, group uint64, data ...string) error {
	sm, ok := n.sms[group]
	if !ok {
		return fmt.Errorf("n%d does not run group %d", n.id, group)
	}
	for _, d := range data {
		sm.queue = append(sm.queue, []byte(d))
	}
	n.h.Wake(group)
	c.iterate(n)
	return nil
}

func (c *cluster) partition(sets [][]uint64) {
	for i, a := range sets {
		for j, b := range sets {
			if i == j {
				continue
			}
			for _, x := range a {
				for _, y := range b {
					c.cut[link{x, y}] = true
				}
			}
		}
	}
}

func (c *cluster) heal() {
	clear(c.cut)
	clear(c.delay)
	c.reorder = false
	c.dropRate = 0
}

// check compares what every live node's state machine stored for group:
// entries at the same index agree, none is stored twice, the stored count
// matches, and the raft applied index covers them. It returns the problems.
func (c *cluster) check(group uint64) []string {
	var problems []string
	byIndex := map[uint64]string{}
	for _, n := range c.nodes {
		if !n.up() {
			continue
		}
		if _, ok := n.sms[group]; !ok {
			continue
		}
		st, err := readSMState(n.db, group)
		if err != nil {
			c.t.Fatal(err)
		}
		if st.count != uint64(len(st.rows)) {
			problems = append(problems, fmt.Sprintf("n%d: count %d, %d rows", n.id, st.count, len(st.rows)))
		}
		seen := map[string]uint64{}
		for _, r := range st.rows {
			if prev, ok := seen[r.data]; ok {
				problems = append(problems, fmt.Sprintf("n%d: %q at %d and %d", n.id, r.data, prev, r.index))
			}
			seen[r.data] = r.index
			if prev, ok := byIndex[r.index]; ok && prev != r.data {
				problems = append(problems, fmt.Sprintf("n%d: index %d holds %q, another node %q", n.id, r.index, r.data, prev))
			}
			byIndex[r.index] = r.data
			if r.index <= st.snapshot {
				problems = append(problems, fmt.Sprintf("n%d: row %d at or below snapshot %d", n.id, r.index, st.snapshot))
			}
		}
		if s, ok := n.h.Status(group); ok && len(st.rows) > 0 && st.rows[len(st.rows)-1].index > s.Applied {
			problems = append(problems, fmt.Sprintf("n%d: row %d beyond applied %d", n.id, st.rows[len(st.rows)-1].index, s.Applied))
		}
	}
	return append(problems, c.violations...)
}

func fmtIDs(ids []uint64) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return "(" + strings.Join(s, ",") + ")"
}

func (c *cluster) fmtStatus(group uint64, match bool) string {
	var b strings.Builder
	for _, n := range c.nodes {
		if _, ok := n.groups[group]; !ok {
			continue
		}
		if !n.up() {
			fmt.Fprintf(&b, "n%d: down\n", n.id)
			continue
		}
		s, ok := n.h.Status(group)
		if !ok {
			fmt.Fprintf(&b, "n%d: removed\n", n.id)
			continue
		}
		fmt.Fprintf(&b, "n%d: leader=%d term=%d commit=%d applied=%d first=%d last=%d voters=%s",
			n.id, s.Leader, s.Term, s.Commit, s.Applied, s.First, s.Last, fmtIDs(s.Voters))
		if len(s.VotersOutgoing) > 0 {
			fmt.Fprintf(&b, "&&%s", fmtIDs(s.VotersOutgoing))
		}
		if len(s.Learners) > 0 {
			fmt.Fprintf(&b, " learners=%s", fmtIDs(s.Learners))
		}
		if match && s.Leading {
			ids := make([]uint64, 0, len(s.Match))
			for id := range s.Match {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			parts := make([]string, len(ids))
			for i, id := range ids {
				parts[i] = fmt.Sprintf("%d:%d", id, s.Match[id])
			}
			fmt.Fprintf(&b, " match=(%s)", strings.Join(parts, ","))
		}
		if s.Err != nil {
			fmt.Fprintf(&b, " err=%v", s.Err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (c *cluster) fmtLog(group uint64, only uint64) string {
	var b strings.Builder
	for _, n := range c.nodes {
		if _, ok := n.groups[group]; !ok || (only != 0 && n.id != only) {
			continue
		}
		if !n.up() {
			fmt.Fprintf(&b, "n%d: down\n", n.id)
			continue
		}
		st, err := readSMState(n.db, group)
		if err != nil {
			c.t.Fatal(err)
		}
		fmt.Fprintf(&b, "n%d:", n.id)
		if st.snapshot > 0 {
			fmt.Fprintf(&b, " [snapshot %d]", st.snapshot)
		}
		for _, r := range st.rows {
			fmt.Fprintf(&b, " %d:%s", r.index, r.data)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (c *cluster) fmtQueue() string {
	var b strings.Builder
	for _, m := range c.queue {
		msg := &pb.Message{}
		if err := proto.Unmarshal(m.data, msg); err != nil {
			c.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d->%d g%d %s term=%d", m.from, m.to, m.group, msg.GetType(), msg.GetTerm())
		switch msg.GetType() {
		case pb.MsgApp:
			fmt.Fprintf(&b, " index=%d commit=%d entries=(", msg.GetIndex(), msg.GetCommit())
			for i, e := range msg.GetEntries() {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%d", e.GetIndex())
				if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 {
					fmt.Fprintf(&b, ":%s", e.GetData())
				} else if e.GetType() != pb.EntryNormal {
					b.WriteString(":conf")
				}
			}
			b.WriteByte(')')
		case pb.MsgAppResp:
			fmt.Fprintf(&b, " index=%d", msg.GetIndex())
			if msg.GetReject() {
				fmt.Fprintf(&b, " reject hint=%d", msg.GetRejectHint())
			}
		case pb.MsgSnap:
			fmt.Fprintf(&b, " snapshot=%d", msg.GetSnapshot().GetMetadata().GetIndex())
		case pb.MsgHeartbeat:
			fmt.Fprintf(&b, " commit=%d", msg.GetCommit())
		}
		if m.hold > 0 {
			fmt.Fprintf(&b, " (held %d)", m.hold)
		}
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		return "none\n"
	}
	return b.String()
}

func (c *cluster) close() {
	for _, n := range c.nodes {
		if n.up() {
			if err := n.db.Close(); err != nil {
				c.t.Error(err)
			}
			n.h, n.db = nil, nil
		}
	}
}
