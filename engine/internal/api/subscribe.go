package api

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/resume"
	"github.com/rewind-io/rewind/engine/internal/stream"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// MinProgressInterval is the shortest progress interval a request may ask.
const MinProgressInterval = 50 * time.Millisecond

// Subscribe implements rewindv1connect.SubscribeServiceHandler.
func (s *Server) Subscribe(ctx context.Context, req *rewindv1.SubscribeRequest, out *connect.ServerStream[rewindv1.SubscribeResponse]) error {
	var start cursor.Start
	var err error
	parts := req.GetPartitions()
	key := req.GetKey()
	switch kv := req.GetStart().GetPosition().(type) {
	case *rewindv1.StartPosition_KeyVersion:
		if len(key) == 0 {
			return invalidf("a start at a key version needs a key")
		}
		// The offset of the version (or the partition's end when the key
		// has no such version yet), read from the leader.
		v := kv.KeyVersion
		spec := broker.ReadSpec{Key: key, FromVersion: &v, Limit: 1}
		if len(parts) == 1 {
			spec.Partition, spec.HasPartition = parts[0], true
		}
		res, err := s.b.Read(ctx, req.GetTopic(), spec)
		if err != nil {
			return toConnect(s.log, err)
		}
		parts = []uint32{res.Partition}
		switch {
		case len(res.Records) > 0:
			start = cursor.Start{Kind: cursor.AtOffset, Offset: res.Records[0].Offset}
		case res.HasPosition:
			start = cursor.Start{Kind: cursor.AtOffset, Offset: res.Position + 1}
		default:
			start = cursor.Start{Kind: cursor.Earliest}
		}
	default:
		if start, err = startOf(req.GetStart()); err != nil {
			return err
		}
	}
	if len(key) > 0 && req.GetGroup() != "" {
		return invalidf("a key subscription cannot join a group")
	}
	start.Clamp = req.GetClampStart()
	if req.GetGroup() != "" {
		start = s.memberStart(ctx, req.GetTopic(), start)
	}
	stop, err := stopOf(req.GetStop())
	if err != nil {
		return err
	}
	opts := stream.Options{MaxRecordsPerEvent: int(min(req.GetMaxRecordsPerEvent(), 1<<16))}
	if d := req.GetProgressInterval(); d != nil {
		if err := d.CheckValid(); err != nil {
			return invalidf("progress_interval: %v", err)
		}
		if d.AsDuration() < MinProgressInterval {
			return invalidf("progress_interval %s is below the minimum of %s", d.AsDuration(), MinProgressInterval)
		}
		opts.ProgressInterval = d.AsDuration()
	}
	if sub := req.GetContains(); len(sub) > 0 {
		if len(sub) > stream.MaxContains {
			return invalidf("contains is %d bytes, more than the %d allowed", len(sub), stream.MaxContains)
		}
		opts.Contains = sub
	}
	filter, err := filterOf(req.GetFilter())
	if err != nil {
		return err
	}
	release, err := s.openStream(ctx, &opts)
	if err != nil {
		return err
	}
	defer release()
	var from broker.ReadFrom
	switch req.GetReadFrom() {
	case rewindv1.ReadFrom_READ_FROM_UNSPECIFIED:
	case rewindv1.ReadFrom_READ_FROM_LEADER:
		from = broker.ReadLeader
	case rewindv1.ReadFrom_READ_FROM_LOCAL_REPLICA:
		from = broker.ReadLocalReplica
	default:
		return invalidf("unknown read_from %d", req.GetReadFrom())
	}
	sink, end := s.obs.startStream(ctx, req, s.signing(ctx, out))
	err = s.b.Subscribe(ctx, broker.SubscribeParams{
		Topic: req.GetTopic(), Partitions: parts, Key: key, Start: start, Stop: stop, Options: opts,
		Group: req.GetGroup(), ClientName: req.GetClientName(), Filter: filter, ReadFrom: from,
		RecordStart: s.guard != nil,
	}, sink)
	if err != nil && ctx.Err() != nil {
		// The client went away: nothing to tell it.
		err = connect.NewError(connect.CodeCanceled, ctx.Err())
		end(err)
		return err
	}
	err = toConnect(s.log, err)
	end(err)
	return err
}

func startOf(p *rewindv1.StartPosition) (cursor.Start, error) {
	switch v := p.GetPosition().(type) {
	case nil, *rewindv1.StartPosition_Earliest:
		return cursor.Start{Kind: cursor.Earliest}, nil
	case *rewindv1.StartPosition_Latest:
		return cursor.Start{Kind: cursor.Latest}, nil
	case *rewindv1.StartPosition_Offset:
		return cursor.Start{Kind: cursor.AtOffset, Offset: v.Offset}, nil
	case *rewindv1.StartPosition_Time:
		t, err := unixNanos(v.Time)
		if err != nil {
			return cursor.Start{}, invalidf("start time: %v", err)
		}
		return cursor.Start{Kind: cursor.AtTime, Time: t}, nil
	case *rewindv1.StartPosition_MessageId:
		id, err := msgid.Parse(v.MessageId)
		if err != nil {
			return cursor.Start{}, invalidf("start message ID %s: %v", echo.Quote(v.MessageId), err)
		}
		return cursor.Start{Kind: cursor.AtMessageID, ID: id}, nil
	case *rewindv1.StartPosition_RecordsBack:
		return cursor.Start{Kind: cursor.RecordsBack, N: v.RecordsBack}, nil
	case *rewindv1.StartPosition_TimeBack:
		if err := v.TimeBack.CheckValid(); err != nil || v.TimeBack.AsDuration() < 0 {
			return cursor.Start{}, invalidf("start time_back must be a positive duration")
		}
		return cursor.Start{Kind: cursor.TimeBack, Back: v.TimeBack.AsDuration()}, nil
	case *rewindv1.StartPosition_ResumeToken:
		t, err := resume.Parse(unsigned(v.ResumeToken))
		if err != nil {
			return cursor.Start{}, invalidf("resume token: %v", err)
		}
		return cursor.Start{Kind: cursor.FromToken, Token: t}, nil
	}
	return cursor.Start{}, invalidf("unknown start position")
}

func stopOf(p *rewindv1.StopPosition) (cursor.Stop, error) {
	switch v := p.GetPosition().(type) {
	case nil:
		return cursor.Stop{Kind: cursor.Follow}, nil
	case *rewindv1.StopPosition_Offset:
		return cursor.Stop{Kind: cursor.BeforeOffset, Offset: v.Offset}, nil
	case *rewindv1.StopPosition_Time:
		t, err := unixNanos(v.Time)
		if err != nil {
			return cursor.Stop{}, invalidf("stop time: %v", err)
		}
		return cursor.Stop{Kind: cursor.BeforeTime, Time: t}, nil
	case *rewindv1.StopPosition_MessageId:
		id, err := msgid.Parse(v.MessageId)
		if err != nil {
			return cursor.Stop{}, invalidf("stop message ID %s: %v", echo.Quote(v.MessageId), err)
		}
		return cursor.Stop{Kind: cursor.BeforeMessageID, ID: id}, nil
	case *rewindv1.StopPosition_End:
		return cursor.Stop{Kind: cursor.AtEnd}, nil
	}
	return cursor.Stop{}, invalidf("unknown stop position")
}
