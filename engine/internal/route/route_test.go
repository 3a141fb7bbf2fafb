package route

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/partition"
)

// The routing loop's tests run without a network or a raft group: a fake
// replica (its leader set by the test), a fake address book, and fake
// peers that answer as the test scripts them. Each runs in a synctest
// bubble: the loop's backoffs, forward timeouts and waits for a new
// leader take no real time, and a test moves on only once every
// goroutine of the bubble is blocked, so outcomes never depend on the
// machine's speed.

// replica is a fake Leadership: the test sets whom it sees lead.
type replica struct {
	mu           sync.Mutex
	leader, last uint64
	changed      chan struct{}
}

func newReplica(leader uint64) *replica {
	return &replica{leader: leader, last: leader, changed: make(chan struct{})}
}

func (r *replica) LeaderWatch() (uint64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader, r.changed
}

func (r *replica) LastLeader() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// set makes raft on this node see leader (0: none) and wakes watchers.
func (r *replica) set(leader uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader = leader
	if leader != 0 {
		r.last = leader
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// book is a fake AddressBook of members 1 to n; down ones are
// unreachable.
type book struct {
	mu   sync.Mutex
	n    uint64
	down map[uint64]bool
}

func (b *book) Addr(node uint64) (string, bool) {
	if node == 0 || node > b.n {
		return "", false
	}
	return fmt.Sprintf("h%d:7070", node), true
}

func (b *book) Members() []uint64 {
	var out []uint64
	for i := uint64(1); i <= b.n; i++ {
		out = append(out, i)
	}
	return out
}

func (b *book) Reachable(node uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.down[node]
}

// hop is one call the router made to another member, or to this node
// (node 1, "local").
type hop struct {
	Node  uint64
	Relay bool
}

// peers records the router's calls and answers them with answer.
type peers struct {
	mu     sync.Mutex
	hops   []hop
	answer func(ctx context.Context, n int, node uint64, relay bool) error
}

func (p *peers) op(local func() error) Op {
	return Op{
		Local: func() error {
			p.mu.Lock()
			p.hops = append(p.hops, hop{Node: 1})
			p.mu.Unlock()
			if local == nil {
				return nil
			}
			return local()
		},
		Remote: func(ctx context.Context, node uint64, addr string, relay bool) error {
			if want := fmt.Sprintf("h%d:7070", node); addr != want {
				return fmt.Errorf("called node %d at %q, want %q", node, addr, want)
			}
			p.mu.Lock()
			p.hops = append(p.hops, hop{Node: node, Relay: relay})
			n := len(p.hops)
			p.mu.Unlock()
			return p.answer(ctx, n, node, relay)
		},
	}
}

func (p *peers) calls() []hop {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.hops)
}

// ok answers every call with success.
func ok(context.Context, int, uint64, bool) error { return nil }

// refusal is node's refusal naming leader: nothing stored.
func refusal(node, leader uint64) error {
	return fmt.Errorf("forward to node %d: %w", node, &NotLeaderError{Topic: "t", Partition: 0, Node: node, Leader: leader})
}

// blockUntilCancelled is a leader that never answers (paused, its
// connection open).
func blockUntilCancelled(ctx context.Context, _ int, _ uint64, _ bool) error {
	<-ctx.Done()
	return fmt.Errorf("%w: forward: %w", ErrUnavailable, ctx.Err())
}

const (
	forwardTimeout = 5 * time.Second
	newLeaderWait  = 500 * time.Millisecond
	noLeaderWait   = 3 * time.Second
)

// newRouter returns node 1's router in a cluster of n members.
func newRouter(n uint64) (*Router, *book) {
	bk := &book{n: n, down: map[uint64]bool{}}
	return New(Config{Self: 1, Book: bk, ForwardTimeout: forwardTimeout, NewLeaderWait: newLeaderWait, NoLeaderWait: noLeaderWait}), bk
}

// part is partition 0 of "t", replicas 2, 3, 1 (preferred leader 2), with
// local as this node's replica (nil: none here).
func part(local Leadership) Part {
	return Part{Topic: "t", Index: 0, Group: 7, Replicas: []uint64{2, 3, 1}, Local: local}
}

func checkHops(t *testing.T, p *peers, want ...hop) {
	t.Helper()
	if diff := cmp.Diff(want, p.calls()); diff != "" {
		t.Errorf("hops (-want +got):\n%s", diff)
	}
}

// A partition led here runs locally; one led elsewhere is forwarded once
// to its leader, not relayed.
func TestWriteLocalOrForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(3)
		p := &peers{answer: ok}
		if err := r.Write(t.Context(), part(newReplica(1)), p.op(nil)); err != nil {
			t.Fatal(err)
		}
		if err := r.Write(t.Context(), part(newReplica(2)), p.op(nil)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 1}, hop{Node: 2})
	})
}

// The leader moves while a forward is in flight: the old leader refuses
// (nothing stored), and the write follows this node's raft to the new one.
// Without a replica here, the refusal's hint is followed instead.
func TestWriteFollowsALeaderThatMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(3)
		rep := newReplica(2)
		p := &peers{answer: func(_ context.Context, n int, node uint64, _ bool) error {
			if node == 2 {
				rep.set(3) // raft elects 3 while 2 answers
				return refusal(2, 3)
			}
			return nil
		}}
		if err := r.Write(t.Context(), part(rep), p.op(nil)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 2}, hop{Node: 3})

		p = &peers{answer: func(_ context.Context, _ int, node uint64, _ bool) error {
			if node == 2 {
				return refusal(2, 3)
			}
			return nil
		}}
		if err := r.Write(t.Context(), part(nil), p.op(nil)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 2}, hop{Node: 3})
	})
}

// A local attempt that loses the leadership (partition.ErrNotLeader) is
// tried again where raft now points, and only that attempt's outcome
// stands.
func TestWriteLocalLeadershipLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(3)
		rep := newReplica(1)
		p := &peers{answer: ok}
		local := func() error {
			rep.set(2)
			return fmt.Errorf("publish: %w", partition.ErrNotLeader)
		}
		if err := r.Write(t.Context(), part(rep), p.op(local)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 1}, hop{Node: 2})
	})
}

// No leader known: the write is relayed once through a replica this node
// reaches (never the last leader, whose connection may be dead); when the
// relay finds no leader either, it waits for raft to elect one and
// forwards there.
func TestWriteNoLeaderKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(4)
		rep := newReplica(2)
		rep.set(0) // lost leader 2
		p := &peers{answer: func(_ context.Context, _ int, node uint64, relay bool) error {
			if relay {
				return refusal(node, 0)
			}
			return nil
		}}
		go func() {
			time.Sleep(time.Second) // an election timeout, in the bubble's time
			rep.set(3)
		}()
		start := time.Now()
		if err := r.Write(t.Context(), part(rep), p.op(nil)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 3, Relay: true}, hop{Node: 3})
		if d := time.Since(start); d != time.Second {
			t.Errorf("forwarded after %s, want at the election (1s): the wait follows raft, not a backoff", d)
		}
	})
}

// A partition without a reachable leader for NoLeaderWait fails at once,
// for every later request too, with a hint naming the last leader, until a
// leader is reachable again.
func TestWriteStuckPartitionFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, bk := newRouter(3)
		bk.down[2], bk.down[3] = true, true // cut off: no relay either
		rep := newReplica(2)
		p := &peers{answer: ok}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		err := r.Write(ctx, part(rep), p.op(nil))
		var lh *LeaderHintError
		if !errors.As(err, &lh) || lh.Leader != 2 || lh.Addr != "h2:7070" || !errors.Is(err, ErrNotStored) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("stuck: %v, want a not-stored hint to node 2", err)
		}
		if d := time.Since(start); d < noLeaderWait || d > noLeaderWait+200*time.Millisecond {
			t.Errorf("gave up after %s, want about %s", d, noLeaderWait)
		}
		start = time.Now()
		if err := r.Write(ctx, part(rep), p.op(nil)); !errors.As(err, &lh) {
			t.Fatalf("second request: %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("a later request waited %s, want none", d)
		}
		checkHops(t, p) // nobody reachable: no call at all
		bk.mu.Lock()
		bk.down[2] = false
		bk.mu.Unlock()
		if err := r.Write(ctx, part(rep), p.op(nil)); err != nil {
			t.Fatalf("leader reachable again: %v", err)
		}
		rep.set(0)
		bk.mu.Lock()
		bk.down[2] = true
		bk.mu.Unlock()
		start = time.Now()
		_ = r.Write(ctx, part(rep), p.op(nil))
		if d := time.Since(start); d < noLeaderWait {
			t.Errorf("after a reachable leader the wait starts over; it lasted %s", d)
		}
	})
}

// The leader is up but this node's link to it is cut: one relay through
// a replica it reaches, which forwards to the leader; the leader is never
// called directly.
func TestWriteRelaysAroundACutLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, bk := newRouter(3)
		bk.down[2] = true
		p := &peers{answer: ok}
		if err := r.Write(t.Context(), part(newReplica(2)), p.op(nil)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 3, Relay: true})
	})
}

// A relay whose outcome is unknown (it timed out, the connection broke)
// is not tried again anywhere: the client gets a hint to the leader and
// retries with its idempotency keys.
func TestWriteRelayOutcomeUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, bk := newRouter(3)
		bk.down[2] = true
		p := &peers{answer: blockUntilCancelled}
		err := r.Write(t.Context(), part(newReplica(2)), p.op(nil))
		var lh *LeaderHintError
		if !errors.As(err, &lh) || lh.Leader != 2 || errors.Is(err, ErrNotStored) || !errors.Is(err, partition.ErrOutcomeUnknown) {
			t.Fatalf("%v: want an outcome-unknown hint to node 2", err)
		}
		checkHops(t, p, hop{Node: 3, Relay: true})
	})
}

// On the member a write was relayed to: served or forwarded once, or
// refused at once; never waited on nor relayed again. One that lost its
// own leader mid-forward answers with what came of that forward.
func TestRelayedWriteTakesOneHop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, bk := newRouter(3)
		ctx := WithHop(t.Context(), Relayed)
		p := &peers{answer: ok}
		if err := r.Write(ctx, part(newReplica(2)), p.op(nil)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 2})

		// No leader known here either: refused at once, nothing stored.
		start := time.Now()
		err := r.Write(ctx, part(newReplica(0)), p.op(nil))
		var nl *NotLeaderError
		if !errors.As(err, &nl) || nl.Node != 1 || !errors.Is(err, ErrNotStored) || time.Since(start) != 0 {
			t.Fatalf("no leader: %v after %s", err, time.Since(start))
		}
		bk.down[2] = true // the relay cannot reach the leader either
		if err := r.Write(ctx, part(newReplica(2)), p.op(nil)); !errors.As(err, &nl) || nl.Leader != 2 {
			t.Fatalf("leader unreachable: %v", err)
		}
		bk.down[2] = false

		// The relay loses its leader while forwarding: one hop, whatever
		// came of it.
		rep := newReplica(2)
		p = &peers{answer: func(ctx context.Context, _ int, _ uint64, _ bool) error {
			rep.set(3)
			return blockUntilCancelled(ctx, 0, 0, false)
		}}
		err = r.Write(ctx, part(rep), p.op(nil))
		if !errors.Is(err, partition.ErrOutcomeUnknown) || errors.Is(err, ErrNotStored) {
			t.Fatalf("relay lost its leader: %v", err)
		}
		checkHops(t, p, hop{Node: 2})
	})
}

// A forwarded write (to this node as the leader) is served here or
// refused with this node's view of the leader; it never hops again.
func TestForwardedWriteIsNeverSentOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(3)
		p := &peers{answer: ok}
		err := r.Write(WithHop(t.Context(), Forwarded), part(newReplica(3)), p.op(nil))
		var nl *NotLeaderError
		if !errors.As(err, &nl) || nl.Leader != 3 || nl.Node != 1 {
			t.Fatalf("%v: want a refusal naming node 3", err)
		}
		checkHops(t, p)
	})
}

// Hints that lie: without a replica here, node 2 names 3 and 3 names 2.
// The write follows them, backing off, and gives up before its deadline
// with an error that says nothing was stored (safe to retry). A hint that
// points back at this node runs the write here.
func TestWriteHintsThatLie(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(3)
		p := &peers{answer: func(_ context.Context, _ int, node uint64, _ bool) error {
			return refusal(node, 5-node) // 2 -> 3, 3 -> 2
		}}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := r.Write(ctx, part(nil), p.op(nil))
		if !errors.Is(err, ErrNotStored) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%v: want unavailable, not stored", err)
		}
		if ctx.Err() != nil {
			t.Error("gave up only at the deadline, with nothing left to answer with")
		}
		calls := p.calls()
		if n := len(calls); n < 5 || n > 20 {
			t.Errorf("%d calls in a second: the backoff should allow about a dozen", n)
		}
		for i, c := range calls {
			if want := uint64(2 + i%2); c.Node != want || c.Relay {
				t.Fatalf("call %d: %+v, want node %d (hints followed in turn)", i, c, want)
			}
		}

		p = &peers{answer: func(_ context.Context, _ int, node uint64, _ bool) error { return refusal(node, 1) }}
		if err := r.Write(t.Context(), part(nil), p.op(nil)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 2}, hop{Node: 1})

		// A hint to this node, which keeps no replica yet (a replica
		// moving here): the local attempt refuses, and the write starts
		// over at the preferred leader instead of asking itself again.
		p = &peers{answer: func(_ context.Context, n int, node uint64, _ bool) error {
			if n == 1 {
				return refusal(node, 1)
			}
			return nil
		}}
		noReplica := func() error { return fmt.Errorf("%w: %w: no replica here", partition.ErrNotLeader, ErrNotStored) }
		if err := r.Write(t.Context(), part(nil), p.op(noReplica)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 2}, hop{Node: 1}, hop{Node: 2})
	})
}

// What a failed forward says about storage decides what happens next:
// a refusal that stored nothing is retried; any other failure is the
// answer at once (the client retries with its idempotency keys), with no
// hint when the leader itself answered.
func TestWriteNotStoredVersusUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(3)
		rep := newReplica(2)
		boom := fmt.Errorf("%w: forward to node 2: internal: boom", ErrUnavailable)
		p := &peers{answer: func(_ context.Context, n int, _ uint64, _ bool) error {
			if n == 1 {
				return refusal(2, 2) // a new leader not serving yet
			}
			return boom
		}}
		err := r.Write(t.Context(), part(rep), p.op(nil))
		if err != boom {
			t.Fatalf("%v, want the leader's answer as is", err)
		}
		checkHops(t, p, hop{Node: 2}, hop{Node: 2})

		refused := &RefusedError{Node: 2, Refusal: RefusedInvalid, Msg: "bad"}
		p = &peers{answer: func(context.Context, int, uint64, bool) error { return refused }}
		if err := r.Write(t.Context(), part(rep), p.op(nil)); err != refused {
			t.Fatalf("%v, want the refusal as is", err)
		}
	})
}

// A stuck leader (paused, its connection open): the forward ends as soon
// as raft on this node stops seeing it as the leader, not at the forward
// timeout, and the answer names the election's winner once known (up to
// NewLeaderWait). A leader that stays stuck while raft still trusts it
// ends at the forward timeout with a hint to that leader.
func TestWriteStuckLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(3)
		rep := newReplica(2)
		p := &peers{answer: blockUntilCancelled}
		go func() {
			time.Sleep(time.Second)
			rep.set(0) // raft stops hearing from 2: an election
			time.Sleep(100 * time.Millisecond)
			rep.set(3) // its winner
		}()
		start := time.Now()
		err := r.Write(t.Context(), part(rep), p.op(nil))
		var lh *LeaderHintError
		if !errors.As(err, &lh) || lh.Leader != 3 || !errors.Is(err, partition.ErrOutcomeUnknown) || errors.Is(err, ErrNotStored) {
			t.Fatalf("%v: want an outcome-unknown hint to node 3", err)
		}
		if d := time.Since(start); d != 1100*time.Millisecond {
			t.Errorf("answered after %s, want at the winner's election (1.1s)", d)
		}

		// No winner within NewLeaderWait: the old leader after all.
		rep = newReplica(2)
		go func() {
			time.Sleep(time.Second)
			rep.set(0)
		}()
		start = time.Now()
		err = r.Write(t.Context(), part(rep), p.op(nil))
		if !errors.As(err, &lh) || lh.Leader != 2 {
			t.Fatalf("%v: want a hint to node 2", err)
		}
		if d := time.Since(start); d != time.Second+newLeaderWait {
			t.Errorf("answered after %s, want %s", d, time.Second+newLeaderWait)
		}

		// Raft keeps trusting it: the forward timeout ends the wait.
		start = time.Now()
		err = r.Write(t.Context(), part(newReplica(2)), p.op(nil))
		if !errors.As(err, &lh) || lh.Leader != 2 || !errors.Is(err, partition.ErrOutcomeUnknown) {
			t.Fatalf("%v: want an outcome-unknown hint to node 2", err)
		}
		if d := time.Since(start); d != forwardTimeout {
			t.Errorf("answered after %s, want the forward timeout %s", d, forwardTimeout)
		}
	})
}

// A leader that died mid-forward (its connection broke: the transport
// counts it down) while raft here still follows it: the answer waits for
// the next leader (up to NewLeaderWait) and names it, instead of naming
// the dead one; no successor by then names the old leader after all.
func TestWriteDeadLeaderHintsItsSuccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, bk := newRouter(3)
		rep := newReplica(2)
		died := func(context.Context, int, uint64, bool) error {
			bk.mu.Lock()
			bk.down[2] = true
			bk.mu.Unlock()
			return fmt.Errorf("%w: forward to node 2: connection reset by peer", ErrUnavailable)
		}
		p := &peers{answer: died}
		go func() {
			time.Sleep(300 * time.Millisecond)
			rep.set(3) // the failure detector's election
		}()
		start := time.Now()
		err := r.Write(t.Context(), part(rep), p.op(nil))
		var lh *LeaderHintError
		if !errors.As(err, &lh) || lh.Leader != 3 || errors.Is(err, ErrNotStored) {
			t.Fatalf("%v: want an outcome-unknown hint to node 3", err)
		}
		if d := time.Since(start); d != 300*time.Millisecond {
			t.Errorf("answered after %s, want at the successor's election (300ms)", d)
		}

		// Node 2 reachable again, so the write forwards to it; it dies
		// mid-call once more, and raft keeps following it: no successor.
		bk.mu.Lock()
		bk.down[2] = false
		bk.mu.Unlock()
		start = time.Now()
		err = r.Write(t.Context(), part(newReplica(2)), p.op(nil))
		if !errors.As(err, &lh) || lh.Leader != 2 {
			t.Fatalf("%v: want a hint to node 2", err)
		}
		if d := time.Since(start); d != newLeaderWait {
			t.Errorf("answered after %s, want NewLeaderWait %s", d, newLeaderWait)
		}
	})
}

// A node alone never hops: a partition it does not lead (an election on a
// single replica) waits for itself.
func TestWriteAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Config{Self: 1})
		rep := newReplica(0)
		p := &peers{answer: ok}
		go func() {
			time.Sleep(50 * time.Millisecond)
			rep.set(1)
		}()
		if err := r.Write(t.Context(), part(rep), p.op(nil)); err != nil {
			t.Fatal(err)
		}
		checkHops(t, p, hop{Node: 1})
	})
}

// Reads: one call per Read, the caller retries. The link remembers what
// each failure taught: a hint is followed (also one that names the node
// asked: a new leader about to serve); a failure without one moves on,
// alternating this replica's view of the leader with the replicas in
// turn, so a replica whose raft view is stale cannot pin a stream on a
// dead node.
func TestReadFollowsHintsAndTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(3)
		var l Link
		rep := newReplica(2)
		down := fmt.Errorf("%w: read from node: connection refused", ErrUnavailable)
		answers := map[int]error{1: refusal(2, 3), 2: refusal(3, 0)}
		p := &peers{answer: func(_ context.Context, n int, _ uint64, _ bool) error {
			if err, ok := answers[n]; ok {
				return err
			}
			return down
		}}
		for range 7 {
			_ = r.Read(t.Context(), &l, part(rep), time.Second, p.op(nil))
		}
		// 2 names 3; 3 knows none; then odd turns take the replicas
		// (2, 3, 1) at the turn's index (3, 2, then this node itself,
		// locally) and even turns trust raft's view (2) again.
		checkHops(t, p, hop{Node: 2}, hop{Node: 3}, hop{Node: 3}, hop{Node: 2}, hop{Node: 2}, hop{Node: 2}, hop{Node: 1})
	})
}

// A read from this replica's leader is cut short when raft sees another
// one, not at its timeout; one from a hinted node ends at its timeout.
// Either way the failure is Unavailable, for the caller to retry.
func TestReadCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRouter(3)
		var l Link
		rep := newReplica(2)
		p := &peers{answer: blockUntilCancelled}
		go func() {
			time.Sleep(100 * time.Millisecond)
			rep.set(3)
		}()
		start := time.Now()
		err := r.Read(t.Context(), &l, part(rep), time.Minute, p.op(nil))
		if !errors.Is(err, ErrUnavailable) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("%v after %s", err, time.Since(start))
		}
		l = Link{hint: 3}
		start = time.Now()
		err = r.Read(t.Context(), &l, part(rep), 2*time.Second, p.op(nil))
		if !errors.Is(err, ErrUnavailable) || time.Since(start) != 2*time.Second {
			t.Fatalf("%v after %s", err, time.Since(start))
		}
		// No replica here and none recorded: nobody to ask.
		if err := r.Read(t.Context(), &Link{}, Part{Topic: "t"}, time.Second, p.op(nil)); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("no replicas: %v", err)
		}
	})
}

// A relay goes to a replica other than this node and the leader it
// cannot reach, preferring replicas to other members, and skipping any
// the transport finds down; when no leader is known, the last one is
// avoided like the leader (CI saw a publish relayed to the leader across
// a cut, whose dead connection the transport had not noticed yet, end
// with an unknown outcome).
func TestPickRelay(t *testing.T) {
	up := func(down ...uint64) func(uint64) bool {
		return func(n uint64) bool { return !slices.Contains(down, n) }
	}
	for _, tc := range []struct {
		name              string
		self, avoid       uint64
		replicas, members []uint64
		usable            func(uint64) bool
		want              uint64
	}{
		{"first other replica", 1, 2, []uint64{1, 2, 3}, []uint64{1, 2, 3, 4}, up(), 3},
		{"the leader is never picked", 1, 2, []uint64{2, 1}, []uint64{1, 2}, up(), 0},
		{"a down replica is skipped for a member", 1, 2, []uint64{1, 2, 3}, []uint64{1, 2, 3, 4}, up(3), 4},
		{"replicas first, in their order", 3, 1, []uint64{1, 2, 3}, []uint64{4, 5, 1, 2, 3}, up(), 2},
		{"none usable", 1, 2, []uint64{1, 2, 3}, []uint64{1, 2, 3}, up(3), 0},
	} {
		if got := pickRelay(tc.self, tc.avoid, tc.replicas, tc.members, tc.usable); got != tc.want {
			t.Errorf("%s: pickRelay(self %d, avoid %d, %v, %v) = %d, want %d", tc.name, tc.self, tc.avoid, tc.replicas, tc.members, got, tc.want)
		}
	}
}

// TestStuckSinceIsSharedByRequests: the first request to find a partition
// without a reachable leader starts the wait; later ones see how long it
// has lasted, until a leader is reachable again.
func TestStuckSinceIsSharedByRequests(t *testing.T) {
	var s stuckSince
	if s.over(7, 0) {
		t.Fatal("the first request must wait")
	}
	if !s.over(7, 0) || s.over(7, time.Hour) {
		t.Fatal("a later request must see the wait so far")
	}
	if s.over(8, 0) {
		t.Fatal("groups are independent")
	}
	s.clear(7)
	if s.over(7, 0) {
		t.Fatal("a cleared group starts over")
	}
}

// TestNotStoredNamesEachCauseOnce: a request given up before anything was
// stored is both Unavailable and not stored, and says "temporarily
// unavailable" once.
func TestNotStoredNamesEachCauseOnce(t *testing.T) {
	for _, last := range []error{
		errors.New("no leader known for partition 0"),
		&NotLeaderError{Topic: "t", Partition: 1, Node: 2, Leader: 3},
		fmt.Errorf("%w: forward to node 2: connection refused", ErrUnavailable),
	} {
		err := NotStored(last)
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrNotStored) {
			t.Errorf("%v: not both unavailable and not stored", err)
		}
	}
}

// BenchmarkWrite is the router's own cost per request, beside the call it
// makes: local (this node leads) and forwarded (another member leads, the
// call answers at once). A forwarded publish's round trip is about a
// millisecond on loopback (docs/benchmarks.md), so this should stay in
// the microseconds.
func BenchmarkWrite(b *testing.B) {
	r, _ := newRouter(3)
	op := Op{
		Local:  func() error { return nil },
		Remote: func(context.Context, uint64, string, bool) error { return nil },
	}
	for _, tc := range []struct {
		name   string
		leader uint64
	}{{"local", 1}, {"forwarded", 2}} {
		b.Run(tc.name, func(b *testing.B) {
			p := part(newReplica(tc.leader))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Write(ctx, p, op); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
