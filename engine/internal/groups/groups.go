package groups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/assign"
	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/stream"
)

var (
	// ErrUnknownGeneration is returned for a commit with a generation the
	// coordinator never issued.
	ErrUnknownGeneration = errors.New("groups: generation not issued")
	// ErrDeleted ends the streams of a group deleted while they ran.
	ErrDeleted = errors.New("groups: group deleted")
	// ErrHasMembers refuses to delete a group with live members.
	ErrHasMembers = errors.New("groups: group has live members")
)

// Topic is the topic a group reads: its id and partitions, by number.
type Topic struct {
	ID    uint64
	Name  string
	Parts []*partition.Partition
}

// Config configures a Coordinator.
type Config struct {
	// Now is the broker clock, Unix nanoseconds. Default time.Now.
	Now func() int64
	// RevokeTimeout bounds how long a rebalance waits for a member to stop
	// reading a partition it loses before giving it to another (a member
	// blocked on a slow client may take longer; the fence still protects
	// commits). Default 2 s.
	RevokeTimeout time.Duration
	// CommitCatchUp bounds how long a commit past the end of this node's
	// replica of a partition waits for the replica to reach it before it
	// is refused as out of range: a follower replica trails the leader
	// its members read from. Default 2 s.
	CommitCatchUp time.Duration
	Logger        hclog.Logger

	// groupCommand proposes op in p's raft log and waits until it is
	// applied. Default (*partition.Partition).GroupCommand; the package's
	// tests put a fake in front of it to fail chosen commands.
	groupCommand func(ctx context.Context, p *partition.Partition, op partition.GroupOp) (partition.GroupState, error)
}

// Coordinator runs every group of a node. Safe for concurrent use.
type Coordinator struct {
	cfg Config
	mu  struct {
		sync.Mutex
		groups map[key]*group
		nextID uint64
		// native counts the members joined (or joining) through Join, by
		// group name; held counts the Hold calls not yet released. A name
		// is in one of them at most: see Hold.
		native  map[string]int
		held    map[string]int
		outside map[string]Outside // of held names whose holder listed its members
	}
}

type key struct {
	name  string
	topic uint64
}

// group is one group on one topic.
type group struct {
	name string
	mu   sync.Mutex
	// Under mu.
	topic      Topic // replaced by a larger one when the topic grows
	loaded     bool
	generation uint64
	epoch      uint64
	members    []*Member // in join order
}

// Member is one live member: the stream that joined reads Control.
type Member struct {
	ID         string
	ClientName string
	JoinTime   int64
	// Control steers the member's stream (stream.Options.Control).
	Control chan stream.Control
	g       *group
	start   cursor.Start
	record  bool
	parts   []uint32 // under g.mu
}

// JoinSpec is how a member reads the partitions it is given.
type JoinSpec struct {
	ClientName string
	// Start is where a partition without a committed offset starts.
	Start cursor.Start
	// RecordStart: when the member starts a partition without a committed
	// offset at the partition's end, that end is committed for the group
	// (a raft command in the partition's log) before the member reads, so
	// the member's own commits move the group forward from where it
	// started. With authorization on, a member that may not replay the
	// topic needs this: a first commit below a partition's end needs the
	// replay right, and records arrive between a start and its commit.
	RecordStart bool
}

// New returns a coordinator.
func New(cfg Config) *Coordinator {
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.RevokeTimeout == 0 {
		cfg.RevokeTimeout = 2 * time.Second
	}
	if cfg.CommitCatchUp == 0 {
		cfg.CommitCatchUp = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.groupCommand == nil {
		cfg.groupCommand = func(ctx context.Context, p *partition.Partition, op partition.GroupOp) (partition.GroupState, error) {
			return p.GroupCommand(ctx, op)
		}
	}
	c := &Coordinator{cfg: cfg}
	c.mu.groups = make(map[key]*group)
	c.mu.native = make(map[string]int)
	c.mu.held = make(map[string]int)
	c.mu.outside = make(map[string]Outside)
	return c
}

// ErrHeld refuses a Join of a group name held by another protocol's
// members (Hold), and a Hold of a name with members joined through Join.
// It wraps ErrHasMembers, so edges answer it like a group in use.
var ErrHeld = fmt.Errorf("%w: in use by members of another protocol", ErrHasMembers)

// Outside lists the members of a held group on a topic (by name) that
// this coordinator does not run, for Live. It is called without the
// coordinator's locks and must not call back into the coordinator.
type Outside func(topic string) []MemberInfo

// Hold reserves group name for members this coordinator does not run
// (the Kafka listener's consumer groups): while held, Join of the name is
// refused with ErrHeld. A name with members joined through Join cannot be
// held (ErrHeld). Holds nest; call release once per successful Hold.
// outside, if not nil, lists the holder's members in Live until the last
// hold of the name is released. Commits, resets, deletes and descriptions
// are not affected: the fences of the partitions still order commits of
// both kinds.
func (c *Coordinator) Hold(name, by string, outside Outside) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.mu.native[name]; n > 0 {
		return nil, fmt.Errorf("%w: group %s has %d Rewind subscriber(s); %s members cannot join it until they leave", ErrHeld, echo.Quote(name), n, by)
	}
	c.mu.held[name]++
	if outside != nil {
		c.mu.outside[name] = outside
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.mu.held[name]--; c.mu.held[name] <= 0 {
				delete(c.mu.held, name)
				delete(c.mu.outside, name)
			}
		})
	}, nil
}

// joining counts a native member of name, unless the name is held.
func (c *Coordinator) joining(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.held[name] > 0 {
		return fmt.Errorf("%w: group %s has Kafka consumer group members; Rewind subscribers cannot join it until they leave (use another group name)", ErrHeld, echo.Quote(name))
	}
	c.mu.native[name]++
	return nil
}

// left uncounts n native members of name.
func (c *Coordinator) left(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.native[name] -= n; c.mu.native[name] <= 0 {
		delete(c.mu.native, name)
	}
}

func (c *Coordinator) group(name string, t Topic) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key{name, t.ID}
	g, ok := c.mu.groups[k]
	if !ok {
		g = &group{name: name, topic: t}
		c.mu.groups[k] = g
	}
	return g
}

// loadLocked recovers the generation and epoch from the partitions' rows.
func (g *group) loadLocked() error {
	if g.loaded {
		return nil
	}
	for _, p := range g.topic.Parts {
		st, ok, err := p.GroupState(g.name)
		if err != nil {
			return err
		}
		if ok {
			g.generation = max(g.generation, st.Fence)
			g.epoch = max(g.epoch, st.Epoch)
		}
	}
	g.loaded = true
	return nil
}

// existsLocked reports whether the group has a member or a row (a commit
// or a reset) on any partition of its topic.
func (g *group) existsLocked() (bool, error) {
	if len(g.members) > 0 {
		return true, nil
	}
	for _, p := range g.topic.Parts {
		if _, ok, err := p.GroupState(g.name); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// Join adds a member to group name on topic t and assigns it partitions.
// The member's first assignment is waiting in its Control channel when
// Join returns; call Leave when its stream ends.
func (c *Coordinator) Join(ctx context.Context, name string, t Topic, spec JoinSpec) (*Member, error) {
	start := spec.Start
	if start.Kind == cursor.FromToken {
		return nil, fmt.Errorf("%w: a group member starts from the group's commits, not a resume token", cursor.ErrInvalid)
	}
	// Check the start policy once, on every partition, so a bad one fails
	// the join rather than a later rebalance.
	if _, err := c.resolve(t, allParts(t), start); err != nil {
		return nil, err
	}
	if err := c.joining(name); err != nil {
		return nil, err
	}
	joined := false
	defer func() {
		if !joined {
			c.left(name, 1)
		}
	}()
	g := c.group(name, t)
	c.mu.Lock()
	c.mu.nextID++
	id := fmt.Sprintf("%s-%d-%d", name, c.cfg.Now()/int64(time.Millisecond), c.mu.nextID)
	c.mu.Unlock()
	m := &Member{
		ID: id, ClientName: spec.ClientName, JoinTime: c.cfg.Now(), g: g, start: start, record: spec.RecordStart,
		Control: make(chan stream.Control, 64),
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(t.Parts) > len(g.topic.Parts) {
		g.topic = t // the topic grew, and Grow has not run yet
	}
	if err := g.loadLocked(); err != nil {
		return nil, err
	}
	g.members = append(g.members, m)
	if err := c.rebalanceLocked(ctx, g); err != nil {
		g.members = g.members[:len(g.members)-1]
		return nil, err
	}
	joined = true
	return m, nil
}

// Leave removes a member (its stream ended) and gives its partitions to
// the others.
func (c *Coordinator) Leave(m *Member) {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.members, m)
	if i < 0 {
		return
	}
	g.members = slices.Delete(g.members, i, i+1)
	c.left(g.name, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.rebalanceLocked(ctx, g); err != nil {
		c.cfg.Logger.Warn("rebalance after a member left", "group", g.name, "error", err)
	}
}

// Grow gives the groups on topic t.ID the partitions of t, more than they
// had (the topic grew), and rebalances those with members: the new
// partitions are assigned like the others, starting where each member's
// start policy says (the group has no commit in them). It waits for the
// rebalances (revokes, fences).
func (c *Coordinator) Grow(t Topic) {
	c.mu.Lock()
	var gs []*group
	for k, g := range c.mu.groups {
		if k.topic == t.ID {
			gs = append(gs, g)
		}
	}
	c.mu.Unlock()
	for _, g := range gs {
		c.grow(g, t)
	}
}

func (c *Coordinator) grow(g *group, t Topic) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(t.Parts) <= len(g.topic.Parts) {
		return
	}
	g.topic = t
	if len(g.members) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.rebalanceLocked(ctx, g); err != nil {
		c.cfg.Logger.Warn("rebalance after the topic grew", "group", g.name, "error", err)
	}
}

func allParts(t Topic) []uint32 {
	out := make([]uint32, len(t.Parts))
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

func (c *Coordinator) resolve(t Topic, parts []uint32, start cursor.Start) ([]cursor.Cursor, error) {
	logs := make([]cursor.Log, len(t.Parts))
	for i, p := range t.Parts {
		logs[i] = p
	}
	return cursor.Resolve(t.ID, logs, parts, start, cursor.Stop{}, c.cfg.Now())
}

// startCursor is where a member of generation gen starts reading a
// partition it was given: the group's committed offset, else the member's
// start policy (recorded as the group's commit when the member asked and
// it is at the partition's end).
func (c *Coordinator) startCursor(ctx context.Context, g *group, m *Member, p uint32, gen uint64) (cursor.Cursor, error) {
	part := g.topic.Parts[p]
	st, ok, err := part.GroupState(g.name)
	if err != nil {
		return cursor.Cursor{}, err
	}
	if ok && st.Committed {
		b := part.Bounds()
		// A commit below the log start (retention passed it) resumes at the
		// log start; one past the end cannot happen (commits are checked).
		next := min(max(st.Offset, b.LogStart), b.Next)
		return cursor.Cursor{Partition: p, Next: next, MinTime: minTime, StopOffset: cursor.NoOffset, StopTime: cursor.NoTime,
			Clamped: st.Offset < b.LogStart}, nil
	}
	start := m.start
	start.Clamp = true
	end := part.Bounds().Next
	cs, err := c.resolve(g.topic, []uint32{p}, start)
	if err != nil {
		return cursor.Cursor{}, err
	}
	// The end only grows: a start at or past the end read before resolving
	// is at the end (a start at latest always is).
	if m.record && cs[0].Next >= end {
		if _, err := c.cfg.groupCommand(ctx, part, partition.GroupOp{
			Kind: partition.OpCommit, Group: g.name, Generation: gen, Offset: cs[0].Next, Time: c.cfg.Now(),
		}); err != nil {
			return cursor.Cursor{}, fmt.Errorf("groups: record the start of partition %d: %w", p, err)
		}
	}
	return cs[0], nil
}

const minTime = -1 << 63

// rebalanceLocked recomputes the assignment, bumps the generation and
// steers every member's stream: revoke, fence, then add.
func (c *Coordinator) rebalanceLocked(ctx context.Context, g *group) error {
	ids := make([]string, len(g.members))
	current := make(map[string][]uint32, len(g.members))
	byID := make(map[string]*Member, len(g.members))
	for i, m := range g.members {
		ids[i] = m.ID
		current[m.ID] = m.parts
		byID[m.ID] = m
	}
	next := assign.Assign(ids, uint32(len(g.topic.Parts)), current)
	moves := assign.Moves(current, next)
	g.generation++
	gen := g.generation
	// 1. Members losing partitions stop reading them first.
	var waits []chan struct{}
	for _, m := range g.members {
		lost := without(m.parts, next[m.ID])
		if len(lost) == 0 {
			continue
		}
		done := make(chan struct{})
		if m.send(stream.Control{Assignment: &stream.Assignment{MemberID: m.ID, Generation: gen, Epoch: g.epoch, Revoke: lost}, Done: done}) {
			waits = append(waits, done)
		}
		m.parts = without(m.parts, lost)
	}
	timeout := time.NewTimer(c.cfg.RevokeTimeout)
	defer timeout.Stop()
	for _, w := range waits {
		select {
		case <-w:
		case <-timeout.C:
			c.cfg.Logger.Warn("member slow to release partitions; moving them anyway", "group", g.name)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// 2. Fence every partition that changes owner: late commits of the
	// previous owner are rejected from here on.
	for _, mv := range moves {
		if mv.To == "" {
			continue
		}
		if _, err := c.cfg.groupCommand(ctx, g.topic.Parts[mv.Partition], partition.GroupOp{
			Kind: partition.OpFence, Group: g.name, Generation: gen, Time: c.cfg.Now(),
		}); err != nil {
			return fmt.Errorf("groups: fence partition %d: %w", mv.Partition, err)
		}
	}
	// 3. Every member learns the new generation; gainers start reading.
	for _, m := range g.members {
		gained := without(next[m.ID], m.parts)
		a := &stream.Assignment{MemberID: m.ID, Generation: gen, Epoch: g.epoch}
		for _, p := range gained {
			cur, err := c.startCursor(ctx, g, m, p, gen)
			if err != nil {
				return err
			}
			a.Add = append(a.Add, stream.Assigned{Source: stream.Local(g.topic.Parts[p]), Cursor: cur})
		}
		m.parts = slices.Clone(next[m.ID])
		m.send(stream.Control{Assignment: a})
	}
	_ = byID
	return nil
}

// send queues a control message without blocking; a member whose queue is
// full is not reading its control (its stream is ending) and is skipped.
func (m *Member) send(ctl stream.Control) bool {
	select {
	case m.Control <- ctl:
		return true
	default:
		return false
	}
}

// without returns the elements of a not in b.
func without(a, b []uint32) []uint32 {
	var out []uint32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
