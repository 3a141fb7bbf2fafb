package api

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/route"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Publish implements rewindv1connect.PublishServiceHandler.
func (s *Server) Publish(ctx context.Context, req *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
	start := time.Now()
	in := req.GetRecords()
	recs := make([]broker.PublishRecord, len(in))
	var headers []record.Header
	for i, r := range in {
		pr := &recs[i]
		pr.Key = r.GetKey()
		pr.Value = r.GetValue()
		pr.IdempotencyKey = []byte(r.GetIdempotencyKey())
		pr.EventTime = r.GetEventTimeUnixNanos()
		if hs := r.GetHeaders(); len(hs) > 0 {
			start := len(headers)
			for _, h := range hs {
				headers = append(headers, record.Header{Key: []byte(h.GetKey()), Value: h.GetValue()})
			}
			pr.Headers = headers[start:len(headers):len(headers)]
		}
		if r.Partition != nil {
			pr.Partition, pr.HasPartition = r.GetPartition(), true
		}
	}
	added, err := s.obs.stampTrace(ctx, recs)
	if err == nil {
		// What the trace stamp added counts as the publisher's own bytes.
		err = s.chargePublish(ctx, in, added)
	}
	if err != nil {
		s.countPublishFailure(ctx, err)
		return nil, err
	}
	ctx = hopContext(ctx)
	publish := s.b.Publish
	if req.GetPartial() {
		publish = s.b.PublishPartial
	}
	if conds := route.ConditionsFromProto(req.GetExpectations(), req.GetConditions()); conds != nil {
		if req.GetPartial() {
			err := invalidf("a conditional append is all or nothing: it cannot be partial")
			s.countPublishFailure(ctx, err)
			return nil, err
		}
		publish = func(ctx context.Context, topic string, recs []broker.PublishRecord) (uint64, []broker.PublishResult, error) {
			return s.b.PublishIf(ctx, topic, recs, conds)
		}
	}
	cctx, end := s.obs.startCommit(ctx, req.GetTopic(), len(recs))
	topicID, res, err := publish(cctx, req.GetTopic(), recs)
	end(err)
	if err != nil {
		err = toConnect(s.log, err)
		s.countPublishFailure(ctx, err)
		return nil, err
	}
	if !isHop(ctx) {
		s.publishDurations.add(time.Since(start))
	}
	out := &rewindv1.PublishResponse{Results: make([]*rewindv1.PublishResult, len(res))}
	slab := make([]rewindv1.PublishResult, len(res))
	for i, r := range res {
		pr := &slab[i]
		pr.Partition = r.Partition
		if r.Err != nil {
			pr.Error = publishErrorOf(s.log, r.Err)
			out.Results[i] = pr
			continue
		}
		pr.Offset = r.Offset
		pr.MessageId = msgid.ID{TopicID: topicID, Partition: r.Partition, Offset: r.Offset}.String()
		pr.AppendTimeUnixNanos = r.AppendTime
		pr.Duplicate = r.Duplicate
		if r.HasKeyVersion {
			v := r.KeyVersion
			pr.KeyVersion = &v
		}
		out.Results[i] = pr
	}
	return out, nil
}

func unixDuration(ns int64) time.Duration { return time.Duration(ns) }

// publishErrorOf is the per-record error of a partial publish: the code
// and message the whole call would have failed with.
func publishErrorOf(log hclog.Logger, err error) *rewindv1.PublishError {
	pe := &rewindv1.PublishError{Code: uint32(connect.CodeUnknown), Message: err.Error(), NotStored: errors.Is(err, broker.ErrNotStored)}
	var ce *connect.Error
	if errors.As(toConnect(log, err), &ce) {
		pe.Code, pe.Message = uint32(ce.Code()), ce.Message()
	}
	return pe
}
