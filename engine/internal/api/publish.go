package api

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/record"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Publish implements rewindv1connect.PublishServiceHandler.
func (s *Server) Publish(ctx context.Context, req *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
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
	if ci, ok := connect.CallInfoForHandlerContext(ctx); ok && ci.RequestHeader().Get(ForwardedHeader) != "" {
		ctx = broker.WithForwarded(ctx)
	}
	topicID, res, err := s.b.Publish(ctx, req.GetTopic(), recs)
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	out := &rewindv1.PublishResponse{Results: make([]*rewindv1.PublishResult, len(res))}
	slab := make([]rewindv1.PublishResult, len(res))
	for i, r := range res {
		pr := &slab[i]
		pr.Partition = r.Partition
		pr.Offset = r.Offset
		pr.MessageId = msgid.ID{TopicID: topicID, Partition: r.Partition, Offset: r.Offset}.String()
		pr.AppendTimeUnixNanos = r.AppendTime
		pr.Duplicate = r.Duplicate
		out.Results[i] = pr
	}
	return out, nil
}

func unixDuration(ns int64) time.Duration { return time.Duration(ns) }
