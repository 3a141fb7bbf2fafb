package client

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// GroupSummary is a group on one topic.
type GroupSummary struct {
	Group      string
	Topic      string
	Members    uint32
	Generation uint64
}

// GroupMember is a live member of a group.
type GroupMember struct {
	ID         string
	ClientName string
	Partitions []uint32
	JoinTime   time.Time
}

// GroupPartition is a group's state in one partition.
type GroupPartition struct {
	Partition       uint32
	Committed       bool
	CommittedOffset uint64
	CommitTime      time.Time
	EndOffset       uint64
	LogStartOffset  uint64
	Lag             uint64
	LagTime         time.Duration
	MemberID        string
	// BelowLogStart: retention removed records the group never committed
	// past; it resumes at the log start.
	BelowLogStart bool
}

// GroupTopic is a group on one topic.
type GroupTopic struct {
	Topic      string
	Generation uint64
	Epoch      uint64
	Members    []GroupMember
	Partitions []GroupPartition
}

// Commit records a group's progress on topic: for each partition, the next
// offset to read. generation must be the one of the member's current
// assignment; an older one is rejected with FailedPrecondition. A commit
// sets offsets, so it is repeated when its node fails.
func (c *Client) Commit(ctx context.Context, group, topic string, generation uint64, offsets map[uint32]uint64) error {
	req := &rewindv1.CommitRequest{Group: group, Topic: topic, Generation: generation}
	for p, o := range offsets {
		req.Offsets = append(req.Offsets, &rewindv1.PartitionOffset{Partition: p, Offset: o})
	}
	_, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.CommitResponse, error) {
		return cl.groups.Commit(ctx, req)
	})
	return err
}

// ListGroups lists every group with committed offsets or live members.
func (c *Client) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	resp, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.ListGroupsResponse, error) {
		return cl.groups.ListGroups(ctx, &rewindv1.ListGroupsRequest{})
	})
	if err != nil {
		return nil, err
	}
	var out []GroupSummary
	for _, g := range resp.GetGroups() {
		out = append(out, GroupSummary{Group: g.GetGroup(), Topic: g.GetTopic(), Members: g.GetMembers(), Generation: g.GetGeneration()})
	}
	return out, nil
}

// DescribeGroup returns a group's state on every topic it reads.
func (c *Client) DescribeGroup(ctx context.Context, group string) ([]GroupTopic, error) {
	resp, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.DescribeGroupResponse, error) {
		return cl.groups.DescribeGroup(ctx, &rewindv1.DescribeGroupRequest{Group: group})
	})
	if err != nil {
		return nil, err
	}
	var out []GroupTopic
	for _, t := range resp.GetTopics() {
		gt := GroupTopic{Topic: t.GetTopic(), Generation: t.GetGeneration(), Epoch: t.GetEpoch()}
		for _, m := range t.GetMembers() {
			gt.Members = append(gt.Members, GroupMember{ID: m.GetMemberId(), ClientName: m.GetClientName(), Partitions: m.GetPartitions(), JoinTime: m.GetJoinTime().AsTime()})
		}
		for _, p := range t.GetPartitions() {
			gp := GroupPartition{
				Partition: p.GetPartition(), Committed: p.GetCommitted(), CommittedOffset: p.GetCommittedOffset(),
				EndOffset: p.GetEndOffset(), LogStartOffset: p.GetLogStartOffset(), Lag: p.GetLag(), MemberID: p.GetMemberId(),
				BelowLogStart: p.GetBelowLogStart(),
			}
			if p.GetCommitTime() != nil {
				gp.CommitTime = p.GetCommitTime().AsTime()
			}
			if p.GetLagTime() != nil {
				gp.LagTime = p.GetLagTime().AsDuration()
			}
			gt.Partitions = append(gt.Partitions, gp)
		}
		out = append(out, gt)
	}
	return out, nil
}

// DeleteGroup deletes a group's committed offsets; force also ends the
// streams of its live members. It is not repeated after an attempt whose
// node failed (a repeat would answer NotFound): the error is then
// ErrOutcomeUnknown.
func (c *Client) DeleteGroup(ctx context.Context, group string, force bool) error {
	_, err := unary(ctx, c, once, func(ctx context.Context, cl *Client) (*rewindv1.DeleteGroupResponse, error) {
		return cl.groups.DeleteGroup(ctx, &rewindv1.DeleteGroupRequest{Group: group, Force: force})
	})
	return err
}

// ResetRow is what a reset does to one partition.
type ResetRow struct {
	Partition       uint32
	HadCommit       bool
	Current         uint64
	New             uint64
	RecordsToReread int64
	Lag             uint64
	Clamped         bool
}

// ResetResult is a reset's plan and whether it was executed.
type ResetResult struct {
	Rows       []ResetRow
	Executed   bool
	Epoch      uint64
	Generation uint64
}

// ResetOption changes a ResetGroup: CreateGroup. It is opaque, so the
// wire types are not part of the client's API; the zero ResetOption does
// nothing.
type ResetOption struct {
	apply func(*rewindv1.ResetGroupRequest)
}

// CreateGroup lets ResetGroup act on a group that has no committed offset
// and no member on the topic (creating it), for example to start a new
// group at Latest before its first member joins.
func CreateGroup() ResetOption {
	return ResetOption{apply: func(r *rewindv1.ResetGroupRequest) { r.Create = true }}
}

// ResetGroup moves a group's committed offsets on topic to target (a
// position: Earliest, Latest, Offset, Time, MessageID, TimeBack, or Shift).
// With dryRun it only returns the plan. Executed on a live group, members'
// streams seek in place and say ReplayStarted. A group with no committed
// offset and no member on topic is a NotFound error unless CreateGroup is
// given.
//
// A plan (dryRun) is asked again, of another node, when its node fails;
// an executed reset is not (ErrOutcomeUnknown): a relative target would
// move the offsets twice, and live members would seek twice, delivering
// again what they read in between.
func (c *Client) ResetGroup(ctx context.Context, group, topic string, target Position, partitions []uint32, dryRun bool, opts ...ResetOption) (*ResetResult, error) {
	rt := &rewindv1.ResetTarget{}
	switch target.kind {
	case posEarliest:
		rt.Target = &rewindv1.ResetTarget_Earliest{Earliest: true}
	case posLatest, posEnd:
		rt.Target = &rewindv1.ResetTarget_Latest{Latest: true}
	case posOffset:
		rt.Target = &rewindv1.ResetTarget_Offset{Offset: target.offset}
	case posTime:
		rt.Target = &rewindv1.ResetTarget_Time{Time: timestamppb.New(target.t)}
	case posMessageID:
		rt.Target = &rewindv1.ResetTarget_MessageId{MessageId: target.s}
	case posTimeBack:
		rt.Target = &rewindv1.ResetTarget_TimeBack{TimeBack: durationpb.New(target.d)}
	case posRecordsBack:
		rt.Target = &rewindv1.ResetTarget_Shift{Shift: -int64(target.offset)}
	case posShift:
		rt.Target = &rewindv1.ResetTarget_Shift{Shift: target.shift}
	default:
		return nil, errNotAResetTarget(target)
	}
	req := &rewindv1.ResetGroupRequest{Group: group, Topic: topic, Target: rt, Partitions: partitions, DryRun: dryRun}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(req)
		}
	}
	k := once
	if dryRun {
		k = c.repeatable(0)
	}
	resp, err := unary(ctx, c, k, func(ctx context.Context, cl *Client) (*rewindv1.ResetGroupResponse, error) {
		return cl.groups.ResetGroup(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &ResetResult{Executed: resp.GetExecuted(), Epoch: resp.GetEpoch(), Generation: resp.GetGeneration()}
	for _, r := range resp.GetPlan() {
		out.Rows = append(out.Rows, ResetRow{
			Partition: r.GetPartition(), HadCommit: r.GetHadCommit(), Current: r.GetCurrentOffset(), New: r.GetNewOffset(),
			RecordsToReread: r.GetRecordsToReread(), Lag: r.GetLag(), Clamped: r.GetClamped(),
		})
	}
	return out, nil
}
