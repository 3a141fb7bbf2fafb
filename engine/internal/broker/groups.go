package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/groups"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/stream"
)

// ErrNoGroup is returned for a group with no committed offsets and no
// members.
var ErrNoGroup = groups.ErrNoGroup

// ValidateGroupName reports why name cannot be a group name, or nil. Group
// names follow the rules of topic names.
func ValidateGroupName(name string) error {
	if !topicName.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("%w: group name %s: use 1 to %d characters of a-z, A-Z, 0-9, '.', '_' and '-'", ErrInvalid, echo.Quote(name), MaxTopicName)
	}
	return nil
}

func (lt *liveTopic) groupTopic() groups.Topic {
	return groups.Topic{ID: lt.meta.ID, Name: lt.meta.Name, Parts: lt.parts}
}

// subscribeGroup serves a group member's stream.
func (b *Broker) subscribeGroup(ctx context.Context, lt *liveTopic, sp SubscribeParams, sink stream.Sink) error {
	if err := ValidateGroupName(sp.Group); err != nil {
		return err
	}
	if len(sp.Partitions) > 0 || sp.Stop.Kind != cursor.Follow {
		return fmt.Errorf("%w: a group member reads the partitions it is assigned, with no stop: leave partitions and stop unset", ErrInvalid)
	}
	if err := b.coordinates(); err != nil {
		return err
	}
	m, err := b.groups.Join(ctx, sp.Group, lt.groupTopic(), groups.JoinSpec{ClientName: sp.ClientName, Start: sp.Start, RecordStart: sp.RecordStart})
	if err != nil {
		return err
	}
	defer b.groups.Leave(m)
	opts := sp.Options
	opts.Control = m.Control
	if opts.Now == nil {
		opts.Now = b.cfg.Clock
	}
	// Assigned partitions are read like any stream's (reads.go): from
	// their leaders, history from this node's replica when it holds one,
	// unless the request or the node asks otherwise.
	from := b.readFrom(sp.ReadFrom)
	opts.Route = func(p uint32, local stream.Source) (stream.Source, error) {
		lt := b.current(lt) // the topic may have grown since the join
		if int(p) < len(lt.parts) && b.readLocally(lt.parts[p], from) {
			return local, nil
		}
		return (&lazyLog{b: b, ctx: ctx, lt: lt, index: p, from: from, budget: len(lt.parts)}).source()
	}
	return b.streamError(stream.Run(ctx, lt.meta.ID, nil, nil, opts, sink))
}

// current returns this node's latest liveTopic of lt's topic (it is
// replaced when the topic grows or its replicas move), or lt once the
// topic is gone.
func (b *Broker) current(lt *liveTopic) *liveTopic {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.mu.topics[lt.meta.ID]; ok {
		return cur
	}
	return lt
}

// Commit records a group's progress on a topic (see groups.Coordinator.Commit).
func (b *Broker) Commit(ctx context.Context, group, topic string, generation uint64, offsets map[uint32]uint64) error {
	if err := ValidateGroupName(group); err != nil {
		return err
	}
	lt, err := b.topic(topic)
	if err != nil {
		return err
	}
	if len(offsets) == 0 {
		return fmt.Errorf("%w: a commit needs at least one offset", ErrInvalid)
	}
	if err := b.coordinates(); err != nil {
		return err
	}
	return UnavailableUnlessTyped(b.groups.Commit(ctx, group, lt.groupTopic(), generation, offsets))
}

// GroupSummary is a group on a topic.
type GroupSummary struct {
	Group      string
	Topic      string
	Members    int
	Generation uint64
}

// groupTopics returns, for every group, the live topics it has rows or
// members on.
func (b *Broker) groupTopics() (map[string][]*liveTopic, error) {
	b.mu.Lock()
	topics := make([]*liveTopic, 0, len(b.mu.topics))
	for _, lt := range b.mu.topics {
		if lt.hostsAll() {
			topics = append(topics, lt)
		}
	}
	b.mu.Unlock()
	slices.SortFunc(topics, func(a, c *liveTopic) int { return int(a.meta.ID) - int(c.meta.ID) })
	active := b.groups.Active()
	out := map[string][]*liveTopic{}
	for _, lt := range topics {
		names := map[string]bool{}
		for g, ids := range active {
			if slices.Contains(ids, lt.meta.ID) {
				names[g] = true
			}
		}
		for _, p := range lt.parts {
			ns, err := p.GroupNames()
			if err != nil {
				return nil, err
			}
			for _, n := range ns {
				names[n] = true
			}
		}
		for n := range names {
			out[n] = append(out[n], lt)
		}
	}
	return out, nil
}

// ListGroups lists every group with rows or members, by group then topic.
func (b *Broker) ListGroups() ([]GroupSummary, error) {
	if err := b.coordinates(); err != nil {
		return nil, err
	}
	gt, err := b.groupTopics()
	if err != nil {
		return nil, err
	}
	var out []GroupSummary
	for g, lts := range gt {
		for _, lt := range lts {
			li, err := b.groups.Live(g, lt.groupTopic())
			if err != nil {
				return nil, err
			}
			out = append(out, GroupSummary{Group: g, Topic: lt.meta.Name, Members: len(li.Members), Generation: li.Generation})
		}
	}
	slices.SortFunc(out, func(a, c GroupSummary) int {
		if a.Group != c.Group {
			return compare(a.Group, c.Group)
		}
		return compare(a.Topic, c.Topic)
	})
	return out, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// GroupPartitionInfo is a group's state in one partition.
type GroupPartitionInfo struct {
	Partition  uint32
	State      partition.GroupState
	Bounds     partition.State
	Lag        uint64
	LagNanos   int64 // age of the oldest record not committed; 0 without lag
	Member     string
	HasCommits bool
	// BelowLogStart: the committed offset was removed by retention.
	BelowLogStart bool
}

// GroupTopicInfo is a group on one topic.
type GroupTopicInfo struct {
	Topic      string
	Live       groups.LiveInfo
	Partitions []GroupPartitionInfo
}

// DescribeGroup returns a group's state on every topic it reads.
func (b *Broker) DescribeGroup(name string) ([]GroupTopicInfo, error) {
	if err := ValidateGroupName(name); err != nil {
		return nil, err
	}
	if err := b.coordinates(); err != nil {
		return nil, err
	}
	gt, err := b.groupTopics()
	if err != nil {
		return nil, err
	}
	lts := gt[name]
	if len(lts) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoGroup, echo.Quote(name))
	}
	now := b.Now()
	var out []GroupTopicInfo
	for _, lt := range lts {
		li, err := b.groups.Live(name, lt.groupTopic())
		if err != nil {
			return nil, err
		}
		owner := map[uint32]string{}
		for _, m := range li.Members {
			for _, p := range m.Partitions {
				owner[p] = m.ID
			}
		}
		ti := GroupTopicInfo{Topic: lt.meta.Name, Live: li}
		for i, p := range lt.parts {
			st, ok, err := p.GroupState(name)
			if err != nil {
				return nil, err
			}
			gp := partitionLag(p, st, ok && st.Committed, now)
			gp.Partition, gp.Member = uint32(i), owner[uint32(i)]
			ti.Partitions = append(ti.Partitions, gp)
		}
		out = append(out, ti)
	}
	return out, nil
}

// partitionLag is a group's state and lag in partition p, given its row
// st (committed: it committed an offset there) at time now.
func partitionLag(p *partition.Partition, st partition.GroupState, committed bool, now int64) GroupPartitionInfo {
	bd := p.Bounds()
	gp := GroupPartitionInfo{Partition: p.Index(), State: st, Bounds: bd, HasCommits: committed}
	gp.BelowLogStart = gp.HasCommits && st.Offset < bd.LogStart
	from := bd.LogStart
	if gp.HasCommits {
		from = min(max(st.Offset, bd.LogStart), bd.Next)
	}
	gp.Lag = bd.Next - from
	if gp.Lag > 0 {
		if t, err := p.TimeOf(from); err == nil {
			gp.LagNanos = max(0, now-t)
		}
	}
	return gp
}

// DeleteGroup deletes a group's rows on every topic. Refused while it has
// members, unless force (their streams then end).
func (b *Broker) DeleteGroup(ctx context.Context, name string, force bool) error {
	if err := ValidateGroupName(name); err != nil {
		return err
	}
	if err := b.coordinates(); err != nil {
		return err
	}
	gt, err := b.groupTopics()
	if err != nil {
		return err
	}
	lts := gt[name]
	if len(lts) == 0 {
		return fmt.Errorf("%w: %s", ErrNoGroup, echo.Quote(name))
	}
	if err := b.groups.Delete(name, force); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, lt := range lts {
		for _, p := range lt.parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.GroupCommand(ctx, partition.GroupOp{Kind: partition.OpDelete, Group: name}); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return UnavailableUnlessTyped(errors.Join(errs...))
}

// ResetGroup plans (and unless dryRun, executes) a group reset on a topic;
// a group not on the topic is ErrNoGroup unless create.
func (b *Broker) ResetGroup(ctx context.Context, name, topic string, target groups.Target, parts []uint32, dryRun, create bool) (groups.Plan, error) {
	if err := ValidateGroupName(name); err != nil {
		return groups.Plan{}, err
	}
	if err := b.coordinates(); err != nil {
		return groups.Plan{}, err
	}
	lt, err := b.topic(topic)
	if err != nil {
		return groups.Plan{}, err
	}
	plan, err := b.groups.Reset(ctx, name, lt.groupTopic(), target, parts, dryRun, create)
	return plan, UnavailableUnlessTyped(err)
}

// HoldGroup reserves group name for members of another protocol (the
// Kafka listener's consumer groups) while they are live: Rewind
// subscribers cannot join it meanwhile, and a name with Rewind
// subscribers cannot be held (see groups.Coordinator.Hold; both refusals
// wrap groups.ErrHasMembers). by names the other protocol in the error.
//
// members, if not nil, lists the holder's members of a topic for
// DescribeGroup and ListGroups; it must not call the broker.
func (b *Broker) HoldGroup(name, by string, members groups.Outside) (release func(), err error) {
	if err := ValidateGroupName(name); err != nil {
		return nil, err
	}
	if err := b.coordinates(); err != nil {
		return nil, err
	}
	return b.groups.Hold(name, by, members)
}

// GroupGeneration is the current generation of group name on topic (0 for
// a group never seen there): a commit at it is not fenced unless a reset
// or a rebalance issues a newer one.
func (b *Broker) GroupGeneration(name, topic string) (uint64, error) {
	if err := ValidateGroupName(name); err != nil {
		return 0, err
	}
	if err := b.coordinates(); err != nil {
		return 0, err
	}
	lt, err := b.topic(topic)
	if err != nil {
		return 0, err
	}
	gen, err := b.groups.Generation(name, lt.groupTopic())
	return gen, UnavailableUnlessTyped(err)
}
