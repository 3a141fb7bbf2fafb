package route

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/partition"
)

// Leadership is this node's raft view of one partition's group (its
// *partition.Partition).
type Leadership interface {
	// LeaderWatch returns the leader (0: none known) and a channel closed
	// once raft on this node sees another one, or none.
	LeaderWatch() (leader uint64, changed <-chan struct{})
	// LastLeader returns the last leader known, also while none is.
	LastLeader() uint64
}

// AddressBook is what this node knows of the other members.
type AddressBook interface {
	// Addr returns where node is reached ("" and false: unknown).
	Addr(node uint64) (string, bool)
	// Members lists the current members, this node included.
	Members() []uint64
	// Reachable reports whether this node's raft stream to node is up.
	Reachable(node uint64) bool
}

// Config configures a Router. Every duration's zero value is its default.
type Config struct {
	// Self is this node's id. Required.
	Self uint64
	// Book knows the members; nil: the node runs alone (no hop to
	// another member is ever tried).
	Book AddressBook
	// ForwardTimeout bounds one call to another member for a write (a
	// publish, a key binding). Default 5 s.
	ForwardTimeout time.Duration
	// NewLeaderWait bounds how long a forward cut short by an election
	// waits for its winner, to name it in the hint. Default 500 ms.
	NewLeaderWait time.Duration
	// NoLeaderWait is how long a partition may have no leader this node
	// reaches before its writes fail at once. Default 3 s.
	NoLeaderWait time.Duration
	Logger       hclog.Logger
}

// Router owns every hop from this node to another member: it is safe for
// concurrent use and owns no goroutine beyond the calls it makes.
type Router struct {
	cfg   Config
	stuck stuckSince
}

// New returns a router.
func New(cfg Config) *Router {
	if cfg.ForwardTimeout == 0 {
		cfg.ForwardTimeout = 5 * time.Second
	}
	if cfg.NewLeaderWait == 0 {
		cfg.NewLeaderWait = 500 * time.Millisecond
	}
	if cfg.NoLeaderWait == 0 {
		cfg.NoLeaderWait = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Router{cfg: cfg}
}

// Part names the partition a request is for.
type Part struct {
	Topic string
	Index uint32
	// Group is its raft group.
	Group uint64
	// Replicas are the members that keep it, the preferred leader first.
	Replicas []uint64
	// Local is this node's replica; nil: none here.
	Local Leadership
}

// Op is one request, run where the partition's leader is.
type Op struct {
	// Local runs it on this node's replica, which leads. An error that is
	// partition.ErrNotLeader (the leadership moved) is tried again.
	Local func() error
	// Remote sends it to node at addr; relay asks a node that does not
	// lead the partition to forward it once to the leader it reaches. An
	// error that is ErrNotStored is safe to retry (a *NotLeaderError says
	// who leads as far as node knows); any other leaves the outcome
	// unknown.
	Remote func(ctx context.Context, node uint64, addr string, relay bool) error
}

// Link is what one reader of a partition learned of its leader across
// calls (Read). The zero value is ready; it is safe for concurrent use.
type Link struct {
	mu   sync.Mutex
	hint uint64 // the leader the last node asked named
	turn int    // bumped by each failure no hint explains
}

// Write runs op on the leader of p: on this node if it leads, else on the
// leader (forwarded), else through another member (relayed once), and
// retries what stored nothing until ctx is almost over. See the package
// manual, "Writes".
func (r *Router) Write(ctx context.Context, p Part, op Op) error {
	w := write{r: r, ctx: ctx, p: p, op: op, hop: HopOf(ctx)}
	return w.run()
}

// write is one Write's state.
type write struct {
	r          *Router
	ctx        context.Context
	p          Part
	op         Op
	hop        Hop
	hint       uint64 // the leader the last node asked named (no local replica)
	relayTried bool
}

func (w *write) run() error {
	r, p, self := w.r, w.p, w.r.cfg.Self
	var last error
	backoff := 2 * time.Millisecond
	for {
		leader, changed := target(p, w.hint, 0, false)
		switch {
		case leader == self:
			r.stuck.clear(p.Group)
			err := w.op.Local()
			if err == nil || !errors.Is(err, partition.ErrNotLeader) {
				return err
			}
			w.hint = 0 // a hint to this node without a replica here: start over
			last = err
		case w.hop == Forwarded:
			return &NotLeaderError{Topic: p.Topic, Partition: p.Index, Node: self, Leader: leader}
		case leader != 0 && w.canHop() && !r.reachable(leader):
			last = fmt.Errorf("%w: %w: node %d cannot reach node %d, the leader of partition %d", ErrUnavailable, ErrNotStored, self, leader, p.Index)
			if done, err := w.stuck(leader); done {
				return err
			}
			if r.stuck.over(p.Group, r.cfg.NoLeaderWait) {
				return r.withHint(p.Index, leader, last)
			}
		case leader != 0 && w.canHop():
			r.stuck.clear(p.Group)
			addr, _ := r.addr(leader)
			err := r.attempt(w.ctx, leader, changed, r.cfg.ForwardTimeout, func(ctx context.Context) error {
				return w.op.Remote(ctx, leader, addr, false)
			})
			if w.hop == Relayed {
				return err // one hop, whatever came of it
			}
			if err == nil || !errors.Is(err, ErrNotStored) {
				return r.unknownOutcome(w.ctx, p, leader, err)
			}
			var nl *NotLeaderError
			if errors.As(err, &nl) && nl.Leader != leader {
				w.hint = nl.Leader
			} else {
				w.hint = 0
			}
			last = err
		default:
			last = fmt.Errorf("no leader known for partition %d", p.Index)
			// During an election the member relayed to knows no leader
			// either and refuses at once; cut off from a leader that
			// leads the others, this node is a pre-candidate whose peers
			// still follow it.
			if done, err := w.stuck(0); done {
				return err
			}
			if p.Local != nil && r.cfg.Book != nil && r.stuck.over(p.Group, r.cfg.NoLeaderWait) {
				return r.withHint(p.Index, p.Local.LastLeader(), NotStored(fmt.Errorf("node %d has known no leader of partition %d it can reach for %s: %w",
					self, p.Index, r.cfg.NoLeaderWait, last)))
			}
		}
		if dl, ok := w.ctx.Deadline(); ok && time.Until(dl) < 2*backoff {
			return NotStored(last)
		}
		select {
		case <-w.ctx.Done():
			return NotStored(last)
		case <-changed:
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// canHop reports whether the write may go to another member.
func (w *write) canHop() bool { return w.op.Remote != nil && w.r.cfg.Book != nil }

// stuck handles a partition whose leader this node does not reach
// (leader: the one it knows, 0 if none): a relayed request is refused,
// else it is relayed once; done says whether err is the outcome.
func (w *write) stuck(leader uint64) (done bool, err error) {
	r, p := w.r, w.p
	if w.hop == Relayed {
		return true, &NotLeaderError{Topic: p.Topic, Partition: p.Index, Node: r.cfg.Self, Leader: leader}
	}
	if w.relayTried || !w.canHop() {
		return false, nil
	}
	w.relayTried = true
	via := r.relayVia(p, leader)
	if via == 0 {
		return false, nil
	}
	addr, _ := r.addr(via)
	err = r.attempt(w.ctx, via, nil, r.cfg.ForwardTimeout, func(ctx context.Context) error { return w.op.Remote(ctx, via, addr, true) })
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, ErrNotStored) {
		if leader == 0 && p.Local != nil {
			leader = p.Local.LastLeader()
		}
		return true, r.withHint(p.Index, leader, err)
	}
	r.cfg.Logger.Debug("relay refused", "partition", p.Index, "via", via, "error", err)
	return false, nil
}

// unknownOutcome is the answer to a forward to leader that ended with err
// (nil: success) without saying that nothing was stored: the error, with
// a hint to whom a client should try (hintAfter). The outcome is unknown,
// so this node never resends on its own.
func (r *Router) unknownOutcome(ctx context.Context, p Part, leader uint64, err error) error {
	next := r.hintAfter(ctx, p.Local, leader, err)
	if next == r.cfg.Self {
		// Elected meanwhile: the client may resend here.
		if addr, ok := r.addr(next); ok {
			return &LeaderHintError{Partition: p.Index, Leader: next, Addr: addr, Err: err}
		}
		return err
	}
	if next != 0 {
		return r.withHint(p.Index, next, err)
	}
	return err
}

// Read makes one call of op on p's leader, as l knows it: the leader the
// last node asked named, else the leader this node's replica sees (every
// other try), else the replicas in turn. A call to this node's replica's
// leader ends when raft on this node sees another one; every call ends
// after timeout. The caller (a remote source) retries; l learns from each
// failure.
func (r *Router) Read(ctx context.Context, l *Link, p Part, timeout time.Duration, op Op) error {
	l.mu.Lock()
	hint, turn := l.hint, l.turn
	l.mu.Unlock()
	node, changed := target(p, hint, turn, true)
	if node == 0 {
		return fmt.Errorf("%w: no leader known for partition %d of %q", ErrUnavailable, p.Index, p.Topic)
	}
	var err error
	if node == r.cfg.Self {
		err = op.Local()
	} else if op.Remote == nil || r.cfg.Book == nil {
		err = fmt.Errorf("%w: partition %d of %q has no replica on node %d", ErrUnavailable, p.Index, p.Topic, r.cfg.Self)
	} else {
		addr, _ := r.addr(node)
		err = r.attempt(ctx, node, changed, timeout, func(ctx context.Context) error { return op.Remote(ctx, node, addr, false) })
	}
	l.learn(err)
	return err
}

// learn records what a failed call taught: who leads, or that the node
// asked is of no help.
func (l *Link) learn(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var nl *NotLeaderError
	if errors.As(err, &nl) && nl.Leader != 0 {
		// Maybe the node asked itself: a new leader that has not
		// applied an entry of its term yet, soon to serve.
		l.hint = nl.Leader
		return
	}
	l.hint, l.turn = 0, l.turn+1
}

// target returns the node to ask for p, and when that is this replica's
// raft leader, a channel closed once raft sees another one (or none).
//
// A write trusts this node's replica over hint (hint only steers writes
// for partitions without a replica here); a read (hintFirst) trusts the
// hint, and on odd turns skips the replica's view. Without a replica and
// a hint: the replicas in turn (a write starts at the preferred leader).
func target(p Part, hint uint64, turn int, hintFirst bool) (uint64, <-chan struct{}) {
	if hintFirst && hint != 0 {
		return hint, nil
	}
	if p.Local != nil {
		id, changed := p.Local.LeaderWatch()
		if !hintFirst {
			return id, changed
		}
		if id != 0 && turn%2 == 0 {
			return id, changed
		}
	} else if hint != 0 {
		return hint, nil
	}
	if len(p.Replicas) == 0 {
		return 0, nil
	}
	return p.Replicas[turn%len(p.Replicas)], nil
}

// attempt runs call (a request to node) with a context that also ends
// after timeout, and when changed (this replica's leader watch) fires. A
// call those cut short has an unknown outcome (unless it says nothing was
// stored): partition.ErrOutcomeUnknown.
func (r *Router) attempt(ctx context.Context, node uint64, changed <-chan struct{}, timeout time.Duration, call func(context.Context) error) error {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(timeout, func() { cancel(fmt.Errorf("%w: node %d did not answer within %s", errForwardTimeout, node, timeout)) })
	defer timer.Stop()
	if changed != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-changed:
				cancel(errLeaderMoved)
			case <-done:
			}
		}()
	}
	err := call(cctx)
	if err == nil || ctx.Err() != nil || cctx.Err() == nil || errors.Is(err, ErrNotStored) {
		return err
	}
	return fmt.Errorf("%w: call to node %d %w: %w: %w", ErrUnavailable, node, errCutShort, context.Cause(cctx), partition.ErrOutcomeUnknown)
}

// hintAfter returns whom a client should try after a forward to leader
// failed with err (0: nobody, or err needs no hint). When attempt cut it
// short, raft moved on meanwhile, or the transport lost the leader: the
// leader raft knows now, or leader itself when this replica knows none
// (it lost contact). A failure the leader answered needs no hint.
//
// A forward cut short because raft stopped seeing leader as the leader
// mostly means an election is under way, and its winner is known a round
// trip later; a forward whose connection to the leader broke, raft still
// following it, mostly means the leader died or stopped, and the failure
// detector elects a successor soon. hintAfter waits for either up to
// NewLeaderWait, since hinting
// the old leader would send the client to a node that is likely dead or
// paused, for a whole attempt (BenchmarkClusterGrayLatency measured 3.2 s
// publishes before). No winner by then (this replica alone lost the
// leader, whom PreVote keeps leading the others): the old leader after all.
func (r *Router) hintAfter(ctx context.Context, local Leadership, leader uint64, err error) uint64 {
	if err == nil || !errors.Is(err, ErrUnavailable) {
		return 0
	}
	now := uint64(0)
	if local != nil {
		now, _ = local.LeaderWatch()
	}
	moved := local != nil && now != leader
	if !errors.Is(err, errCutShort) && !moved && r.reachable(leader) {
		return 0
	}
	if local == nil {
		return leader
	}
	// next is a leader worth naming: one raft knows, unless it is the
	// leader just lost and the transport still cannot reach it.
	next := func(now uint64) bool { return now != 0 && (now != leader || r.reachable(leader)) }
	if !errors.Is(err, errLeaderMoved) && next(now) {
		return now
	}
	// Raft moved (an election is under way), or the connection to the
	// leader raft still follows broke (it died or stopped: the failure
	// detector elects a successor within about half a second). Wait for
	// the next leader.
	wait := time.NewTimer(r.cfg.NewLeaderWait)
	defer wait.Stop()
	for {
		now, changed := local.LeaderWatch()
		if next(now) {
			return now
		}
		select {
		case <-changed:
		case <-wait.C:
			return leader
		case <-ctx.Done():
			return leader
		}
	}
}

// withHint adds a hint to leader to err, when clients can go there.
func (r *Router) withHint(p uint32, leader uint64, err error) error {
	if leader == 0 || leader == r.cfg.Self {
		return err
	}
	addr, ok := r.addr(leader)
	if !ok {
		return err
	}
	return &LeaderHintError{Partition: p, Leader: leader, Addr: addr, Err: err}
}

func (r *Router) addr(node uint64) (string, bool) {
	if r.cfg.Book == nil {
		return "", false
	}
	return r.cfg.Book.Addr(node)
}

func (r *Router) reachable(node uint64) bool {
	return r.cfg.Book == nil || r.cfg.Book.Reachable(node)
}

// relayVia picks the member to relay a request for p through when this
// node does not reach its leader (0 if unknown), or 0 if none will do
// (pickRelay).
func (r *Router) relayVia(p Part, leader uint64) uint64 {
	avoid := leader
	if avoid == 0 && p.Local != nil {
		// A node that lost its leader lost it first to the last one: the
		// transport may still count its stream up (a dead connection is
		// noticed by pings, after raft's election timeout has already
		// cleared the leader), and a relay sent there waits out that
		// connection and ends with an unknown outcome.
		avoid = p.Local.LastLeader()
	}
	return pickRelay(r.cfg.Self, avoid, p.Replicas, r.cfg.Book.Members(), func(n uint64) bool {
		_, known := r.addr(n)
		return known && r.reachable(n)
	})
}

// pickRelay returns the first of replicas, else of members, that is
// neither self nor avoid and that usable accepts (its address known, its
// raft stream up: it hears from the leader, if anyone does); 0 if none.
func pickRelay(self, avoid uint64, replicas, members []uint64, usable func(uint64) bool) uint64 {
	for _, list := range [][]uint64{replicas, members} {
		for _, n := range list {
			if n != self && n != avoid && usable(n) {
				return n
			}
		}
	}
	return 0
}

// stuckSince remembers, by raft group, since when writes found no leader
// this node can reach, across requests: once a partition has been stuck
// for NoLeaderWait, writes fail at once instead of each waiting.
type stuckSince struct {
	// n is len(since), read without the lock so that clear costs the
	// publish path nothing while no partition is stuck.
	n     atomic.Int32
	mu    sync.Mutex
	since map[uint64]time.Time
}

// over records group as stuck and reports whether it has been for d.
func (s *stuckSince) over(group uint64, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since == nil {
		s.since = make(map[uint64]time.Time)
	}
	t, ok := s.since[group]
	if !ok {
		s.since[group] = time.Now()
		s.n.Store(int32(len(s.since)))
		return false
	}
	return time.Since(t) >= d
}

// clear forgets group: a leader is reachable again.
func (s *stuckSince) clear(group uint64) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	delete(s.since, group)
	s.n.Store(int32(len(s.since)))
	s.mu.Unlock()
}
