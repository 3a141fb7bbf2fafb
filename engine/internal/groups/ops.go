package groups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/stream"
	"github.com/rewind-io/rewind/internal/failpoint"
)

// OffsetOutOfRangeError says a commit points past a partition's end.
type OffsetOutOfRangeError = cursor.OutOfRangeError

// Commit records offsets (the next offset to read, per partition) for a
// member of generation gen. A generation older than a partition's fence
// gets a *partition.FencedError; one never issued, ErrUnknownGeneration.
func (c *Coordinator) Commit(ctx context.Context, name string, t Topic, gen uint64, offsets map[uint32]uint64) error {
	g := c.group(name, t)
	g.mu.Lock()
	err := g.loadLocked()
	current := g.generation
	g.mu.Unlock()
	if err != nil {
		return err
	}
	if gen > current {
		return fmt.Errorf("%w: generation %d (the group is at %d)", ErrUnknownGeneration, gen, current)
	}
	for p, off := range offsets {
		if int(p) >= len(t.Parts) {
			return fmt.Errorf("%w: partition %d does not exist (topic %q has %d)", cursor.ErrInvalid, p, t.Name, len(t.Parts))
		}
		if b := catchUp(ctx, t.Parts[p], off, c.cfg.CommitCatchUp); off > b.Next {
			return &cursor.OutOfRangeError{Partition: p, Requested: off, LogStart: b.LogStart, End: b.Next}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 0, len(offsets))
	var mu sync.Mutex
	now := c.cfg.Now()
	for p, off := range offsets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.cfg.groupCommand(ctx, t.Parts[p], partition.GroupOp{Kind: partition.OpCommit, Group: name, Generation: gen, Offset: off, Time: now})
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// catchUp returns p's bounds once its end reaches off, or after wait (or
// when ctx ends) if it does not. The coordinator's replica may be a
// follower a little behind the leader that its member read from: a
// commit of a record the member was given is not out of range, only not
// here yet.
func catchUp(ctx context.Context, p *partition.Partition, off uint64, wait time.Duration) partition.State {
	b := p.Bounds()
	if off <= b.Next {
		return b
	}
	ch := make(chan struct{}, 1)
	defer p.Notify(ch)()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if b = p.Bounds(); off <= b.Next {
			return b
		}
		select {
		case <-ch:
		case <-timer.C:
			return b
		case <-ctx.Done():
			return b
		}
	}
}

// TargetKind selects a reset target.
type TargetKind int

// Reset targets.
const (
	ToEarliest TargetKind = iota
	ToLatest
	ToOffset
	ToTime
	ToMessageID
	ToTimeBack
	ToShift
)

// Target is where a reset moves a group's offsets.
type Target struct {
	Kind   TargetKind
	Offset uint64
	Time   int64 // ToTime; ToTimeBack: the duration, in nanoseconds
	ID     msgid.ID
	Shift  int64
}

// PlanRow is what a reset does to one partition.
type PlanRow struct {
	Partition  uint32
	HadCommit  bool
	Current    uint64
	New        uint64
	Reread     int64 // Current - New
	Lag        uint64
	Clamped    bool
	LogStart   uint64
	End        uint64
	CommitTime int64
}

// Plan is a reset's plan and, when executed, the group's new epoch and
// generation.
type Plan struct {
	Rows       []PlanRow
	Executed   bool
	Epoch      uint64
	Generation uint64
}

// ErrNoGroup is returned by Reset for a group with no committed offsets
// and no members on the topic, unless the caller asked to create it.
var ErrNoGroup = errors.New("no such group")

// Reset computes (and unless dryRun, executes) a reset of group name on
// topic t for the given partitions (all when empty). A group that has no
// committed offset on t and no member is ErrNoGroup, in the plan as in the
// execution, unless create: a mistyped name must not quietly start a new
// group.
func (c *Coordinator) Reset(ctx context.Context, name string, t Topic, target Target, parts []uint32, dryRun, create bool) (Plan, error) {
	if len(parts) == 0 {
		parts = allParts(t)
	}
	parts = slices.Clone(parts)
	slices.Sort(parts)
	parts = slices.Compact(parts)
	for _, p := range parts {
		if int(p) >= len(t.Parts) {
			return Plan{}, fmt.Errorf("%w: partition %d does not exist (topic %q has %d)", cursor.ErrInvalid, p, t.Name, len(t.Parts))
		}
	}
	g := c.group(name, t)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadLocked(); err != nil {
		return Plan{}, err
	}
	if !create {
		exists, err := g.existsLocked()
		if err != nil {
			return Plan{}, err
		}
		if !exists {
			return Plan{}, fmt.Errorf("%w: %q has no committed offsets and no members on topic %q (a reset creates it only when asked to: rewind group reset --create)", ErrNoGroup, name, t.Name)
		}
	}
	rows, err := c.plan(g, target, parts)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Rows: rows}
	if dryRun {
		return plan, nil
	}
	g.generation++
	g.epoch++
	gen, epoch := g.generation, g.epoch
	now := c.cfg.Now()
	for i, r := range rows {
		err := resetFailpoint(r.Partition)
		if err == nil {
			_, err = c.cfg.groupCommand(ctx, t.Parts[r.Partition], partition.GroupOp{
				Kind: partition.OpReset, Group: name, Generation: gen, Offset: r.New, Epoch: epoch, Time: now,
			})
		}
		if err != nil {
			// The partitions before this one are reset at gen: their
			// members must seek and learn gen now, or their commits
			// would be refused as fenced until the next rebalance while
			// they read on from before the reset. This partition's
			// outcome is unknown (a lost leader may still commit it):
			// its members keep reading where they are, at gen, and
			// their next commit wins; running the reset again settles
			// it.
			//
			// With no partition reset (i == 0), gen is stored in no
			// fence, and members are not told it: this node may have
			// lost the metadata leadership (the command failed because
			// it is cut off), and the next coordinator derives its
			// generations from the stored fences, so it could issue gen
			// again to other members, and a member told gen here could
			// then commit as one of them.
			if i > 0 {
				c.notifyReset(g, rows[:i], gen, epoch)
			}
			return Plan{}, fmt.Errorf("groups: reset partition %d failed, its outcome is unknown (partitions %v before it are reset, generation %d; run the reset again): %w",
				r.Partition, partitionsOf(rows[:i]), gen, err)
		}
	}
	c.notifyReset(g, rows, gen, epoch)
	plan.Executed, plan.Epoch, plan.Generation = true, epoch, gen
	return plan, nil
}

// notifyReset tells every live member of g the generation a reset
// created, and makes each seek in place on the partitions of rows it owns.
// g.mu is held.
func (c *Coordinator) notifyReset(g *group, rows []PlanRow, gen, epoch uint64) {
	for _, m := range g.members {
		ctl := stream.Control{Assignment: &stream.Assignment{MemberID: m.ID, Generation: gen, Epoch: epoch}}
		for _, r := range rows {
			if slices.Contains(m.parts, r.Partition) {
				ctl.Seeks = append(ctl.Seeks, stream.Seek{Partition: r.Partition, Offset: r.New, Epoch: epoch, Generation: gen})
			}
		}
		m.send(ctl)
	}
}

func partitionsOf(rows []PlanRow) []uint32 {
	out := make([]uint32, len(rows))
	for i, r := range rows {
		out[i] = r.Partition
	}
	return out
}

// resetFailpoint fails the reset of partition p when the failpoint
// ResetFail names it (a tagged build only; otherwise nil, folded away).
func resetFailpoint(p uint32) error {
	if v, ok := failpoint.Value(failpoint.ResetFail); ok && v == strconv.FormatUint(uint64(p), 10) {
		return fmt.Errorf("failpoint %s=%s", failpoint.ResetFail, v)
	}
	return nil
}

func (c *Coordinator) plan(g *group, target Target, parts []uint32) ([]PlanRow, error) {
	t := g.topic
	rows := make([]PlanRow, len(parts))
	for i, p := range parts {
		part := t.Parts[p]
		st, ok, err := part.GroupState(g.name)
		if err != nil {
			return nil, err
		}
		b := part.Bounds()
		rows[i] = PlanRow{Partition: p, HadCommit: ok && st.Committed, Current: st.Offset, LogStart: b.LogStart, End: b.Next, CommitTime: st.CommitTime}
		if !rows[i].HadCommit {
			rows[i].Current = b.LogStart
		}
	}
	clamp := func(r *PlanRow, off int64) {
		switch {
		case off < int64(r.LogStart):
			r.New, r.Clamped = r.LogStart, true
		case off > int64(r.End):
			r.New, r.Clamped = r.End, true
		default:
			r.New = uint64(off)
		}
	}
	switch target.Kind {
	case ToEarliest:
		for i := range rows {
			rows[i].New = rows[i].LogStart
		}
	case ToLatest:
		for i := range rows {
			rows[i].New = rows[i].End
		}
	case ToOffset:
		for i := range rows {
			clamp(&rows[i], int64(min(target.Offset, 1<<62)))
		}
	case ToShift:
		for i := range rows {
			clamp(&rows[i], int64(rows[i].Current)+target.Shift)
		}
	case ToTime, ToTimeBack, ToMessageID:
		start := cursor.Start{Kind: cursor.AtTime, Time: target.Time}
		switch target.Kind {
		case ToTimeBack:
			start = cursor.Start{Kind: cursor.AtTime, Time: c.cfg.Now() - target.Time}
		case ToMessageID:
			start = cursor.Start{Kind: cursor.AtMessageID, ID: target.ID}
		}
		cs, err := c.resolve(t, parts, start)
		if err != nil {
			return nil, err
		}
		for i := range rows {
			rows[i].New = cs[i].Next
		}
	default:
		return nil, fmt.Errorf("%w: reset target kind %d", cursor.ErrInvalid, target.Kind)
	}
	for i := range rows {
		r := &rows[i]
		r.Reread = int64(r.Current) - int64(r.New)
		r.Lag = r.End - r.New
	}
	return rows, nil
}

// MemberInfo describes a live member.
type MemberInfo struct {
	ID         string
	ClientName string
	JoinTime   int64
	Partitions []uint32
}

// LiveInfo is what the coordinator knows of a group on a topic.
type LiveInfo struct {
	Generation uint64
	Epoch      uint64
	Members    []MemberInfo
}

// Live returns the coordinator's view of group name on topic t (loading its
// generation from the partitions if needed): its members, those of a
// holder's (Hold) after its own.
func (c *Coordinator) Live(name string, t Topic) (LiveInfo, error) {
	g := c.group(name, t)
	g.mu.Lock()
	if err := g.loadLocked(); err != nil {
		g.mu.Unlock()
		return LiveInfo{}, err
	}
	li := LiveInfo{Generation: g.generation, Epoch: g.epoch}
	for _, m := range g.members {
		li.Members = append(li.Members, MemberInfo{ID: m.ID, ClientName: m.ClientName, JoinTime: m.JoinTime, Partitions: slices.Clone(m.parts)})
	}
	g.mu.Unlock()
	c.mu.Lock()
	outside := c.mu.outside[name]
	c.mu.Unlock()
	if outside != nil {
		li.Members = append(li.Members, outside(t.Name)...)
	}
	return li, nil
}

// Generation is the current generation of group name on topic t (loading
// it from the partitions if needed). Unlike Live it never calls a
// holder's Outside, so a holder may call it under its own locks.
func (c *Coordinator) Generation(name string, t Topic) (uint64, error) {
	g := c.group(name, t)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadLocked(); err != nil {
		return 0, err
	}
	return g.generation, nil
}

// Active returns the (group, topic id) pairs with live members.
func (c *Coordinator) Active() map[string][]uint64 {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	out := map[string][]uint64{}
	for _, g := range gs {
		g.mu.Lock()
		if len(g.members) > 0 {
			out[g.name] = append(out[g.name], g.topic.ID)
		}
		g.mu.Unlock()
	}
	return out
}

// Delete ends the streams of group name's members on every topic (if force;
// otherwise it refuses while there are members) and forgets the group. The
// caller deletes the partitions' rows.
func (c *Coordinator) Delete(name string, force bool) error {
	c.mu.Lock()
	var gs []*group
	for k, g := range c.mu.groups {
		if k.name == name {
			gs = append(gs, g)
		}
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		n := len(g.members)
		g.mu.Unlock()
		if n > 0 && !force {
			return fmt.Errorf("%w: %s has %d members on topic %q (delete with force to remove it anyway: rewind group delete --force)", ErrHasMembers, echo.Quote(name), n, g.topic.Name)
		}
	}
	for _, g := range gs {
		g.mu.Lock()
		for _, m := range g.members {
			m.send(stream.Control{Close: fmt.Errorf("%w: %s", ErrDeleted, echo.Quote(name))})
		}
		c.left(g.name, len(g.members))
		g.members = nil
		g.mu.Unlock()
	}
	c.mu.Lock()
	for k := range c.mu.groups {
		if k.name == name {
			delete(c.mu.groups, k)
		}
	}
	c.mu.Unlock()
	return nil
}

// Forget drops the coordinator's state of every group on topic id (the
// topic was deleted).
func (c *Coordinator) Forget(topicID uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.mu.groups {
		if k.topic == topicID {
			delete(c.mu.groups, k)
		}
	}
}

// CloseAll ends every member's stream with err and forgets every group's
// live state (this node stopped coordinating: its members reconnect to the
// new coordinator, which rebuilds the groups from their committed state
// with a newer generation, so commits of the old members are fenced).
func (c *Coordinator) CloseAll(err error) {
	c.mu.Lock()
	gs := c.mu.groups
	c.mu.groups = make(map[key]*group)
	c.mu.native = make(map[string]int)
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		for _, m := range g.members {
			m.send(stream.Control{Close: err})
		}
		g.members = nil
		g.mu.Unlock()
	}
}
