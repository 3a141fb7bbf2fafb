package api

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/groups"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Commit implements rewindv1connect.GroupServiceHandler.
func (s *Server) Commit(ctx context.Context, req *rewindv1.CommitRequest) (*rewindv1.CommitResponse, error) {
	offsets := make(map[uint32]uint64, len(req.GetOffsets()))
	for _, o := range req.GetOffsets() {
		if _, dup := offsets[o.GetPartition()]; dup {
			return nil, invalidf("partition %d appears twice in the commit", o.GetPartition())
		}
		offsets[o.GetPartition()] = o.GetOffset()
	}
	if err := s.checkCommit(ctx, req); err != nil {
		return nil, err
	}
	if err := s.b.Commit(ctx, req.GetGroup(), req.GetTopic(), req.GetGeneration(), offsets); err != nil {
		return nil, toConnect(s.log, err)
	}
	return &rewindv1.CommitResponse{}, nil
}

// ListGroups implements rewindv1connect.GroupServiceHandler.
func (s *Server) ListGroups(ctx context.Context, req *rewindv1.ListGroupsRequest) (*rewindv1.ListGroupsResponse, error) {
	gs, err := s.b.ListGroups()
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	resp := &rewindv1.ListGroupsResponse{}
	for _, g := range gs {
		if !s.may(ctx, auth.Describe, groupRes(g.Group)) {
			continue
		}
		resp.Groups = append(resp.Groups, &rewindv1.GroupSummary{Group: g.Group, Topic: g.Topic, Members: uint32(g.Members), Generation: g.Generation})
	}
	return resp, nil
}

// DescribeGroup implements rewindv1connect.GroupServiceHandler.
func (s *Server) DescribeGroup(ctx context.Context, req *rewindv1.DescribeGroupRequest) (*rewindv1.DescribeGroupResponse, error) {
	infos, err := s.b.DescribeGroup(req.GetGroup())
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	resp := &rewindv1.DescribeGroupResponse{Group: req.GetGroup()}
	for _, ti := range infos {
		gt := &rewindv1.GroupTopic{Topic: ti.Topic, Generation: ti.Live.Generation, Epoch: ti.Live.Epoch}
		for _, m := range ti.Live.Members {
			gt.Members = append(gt.Members, &rewindv1.GroupMember{
				MemberId: m.ID, ClientName: m.ClientName, Partitions: m.Partitions, JoinTime: timestamppb.New(unixNano(m.JoinTime)),
			})
		}
		for _, p := range ti.Partitions {
			gp := &rewindv1.GroupPartition{
				Partition: p.Partition, Committed: p.HasCommits, EndOffset: p.Bounds.Next, LogStartOffset: p.Bounds.LogStart,
				Lag: p.Lag, MemberId: p.Member, BelowLogStart: p.BelowLogStart,
			}
			if p.HasCommits {
				gp.CommittedOffset = p.State.Offset
				gp.CommitTime = timestamppb.New(unixNano(p.State.CommitTime))
			}
			if p.LagNanos > 0 {
				gp.LagTime = durationpb.New(time.Duration(p.LagNanos))
			}
			gt.Partitions = append(gt.Partitions, gp)
		}
		resp.Topics = append(resp.Topics, gt)
	}
	return resp, nil
}

// DeleteGroup implements rewindv1connect.GroupServiceHandler.
func (s *Server) DeleteGroup(ctx context.Context, req *rewindv1.DeleteGroupRequest) (*rewindv1.DeleteGroupResponse, error) {
	if err := s.b.DeleteGroup(ctx, req.GetGroup(), req.GetForce()); err != nil {
		return nil, toConnect(s.log, err)
	}
	return &rewindv1.DeleteGroupResponse{}, nil
}

// ResetGroup implements rewindv1connect.GroupServiceHandler.
func (s *Server) ResetGroup(ctx context.Context, req *rewindv1.ResetGroupRequest) (*rewindv1.ResetGroupResponse, error) {
	var t groups.Target
	switch v := req.GetTarget().GetTarget().(type) {
	case *rewindv1.ResetTarget_Earliest:
		t = groups.Target{Kind: groups.ToEarliest}
	case *rewindv1.ResetTarget_Latest:
		t = groups.Target{Kind: groups.ToLatest}
	case *rewindv1.ResetTarget_Offset:
		t = groups.Target{Kind: groups.ToOffset, Offset: v.Offset}
	case *rewindv1.ResetTarget_Time:
		ns, err := unixNanos(v.Time)
		if err != nil {
			return nil, invalidf("reset time: %v", err)
		}
		t = groups.Target{Kind: groups.ToTime, Time: ns}
	case *rewindv1.ResetTarget_MessageId:
		id, err := msgid.Parse(v.MessageId)
		if err != nil {
			return nil, invalidf("reset message ID %s: %v", echo.Quote(v.MessageId), err)
		}
		t = groups.Target{Kind: groups.ToMessageID, ID: id}
	case *rewindv1.ResetTarget_TimeBack:
		if err := v.TimeBack.CheckValid(); err != nil || v.TimeBack.AsDuration() < 0 {
			return nil, invalidf("reset time_back must be a positive duration")
		}
		t = groups.Target{Kind: groups.ToTimeBack, Time: int64(v.TimeBack.AsDuration())}
	case *rewindv1.ResetTarget_Shift:
		t = groups.Target{Kind: groups.ToShift, Shift: v.Shift}
	default:
		return nil, invalidf("a reset needs a target")
	}
	plan, err := s.b.ResetGroup(ctx, req.GetGroup(), req.GetTopic(), t, req.GetPartitions(), req.GetDryRun(), req.GetCreate())
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	resp := &rewindv1.ResetGroupResponse{Executed: plan.Executed, Epoch: plan.Epoch, Generation: plan.Generation}
	for _, r := range plan.Rows {
		resp.Plan = append(resp.Plan, &rewindv1.ResetPlanRow{
			Partition: r.Partition, HadCommit: r.HadCommit, CurrentOffset: r.Current, NewOffset: r.New,
			RecordsToReread: r.Reread, Lag: r.Lag, Clamped: r.Clamped,
		})
	}
	return resp, nil
}
