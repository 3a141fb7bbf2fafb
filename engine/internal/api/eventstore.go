package api

import (
	"context"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/route"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Read implements rewindv1connect.EventStoreServiceHandler.
func (s *Server) Read(ctx context.Context, req *rewindv1.ReadRequest) (*rewindv1.ReadResponse, error) {
	spec := broker.ReadSpec{Backward: req.GetBackward(), Limit: int(req.GetLimit())}
	switch sel := req.GetSelect().(type) {
	case *rewindv1.ReadRequest_Key:
		if len(sel.Key) == 0 {
			return nil, invalidf("the key is empty")
		}
		spec.Key = sel.Key
	case *rewindv1.ReadRequest_Query:
		spec.Query = route.QueryFromProto(sel.Query)
		if len(spec.Query) == 0 {
			return nil, invalidf("the query has no item")
		}
	default:
		return nil, invalidf("name a key or a query")
	}
	if req.Partition != nil {
		spec.Partition, spec.HasPartition = req.GetPartition(), true
	}
	switch f := req.GetFrom().(type) {
	case *rewindv1.ReadRequest_FromVersion:
		v := f.FromVersion
		spec.FromVersion = &v
	case *rewindv1.ReadRequest_FromOffset:
		o := f.FromOffset
		spec.FromOffset = &o
	case *rewindv1.ReadRequest_FromTime:
		t, err := unixNanos(f.FromTime)
		if err != nil {
			return nil, err
		}
		spec.FromTime = &t
	case *rewindv1.ReadRequest_Last:
		if f.Last == 0 {
			return nil, invalidf("last must be at least 1")
		}
		spec.Last = f.Last
	}
	res, err := s.b.Read(hopContext(ctx), req.GetTopic(), spec)
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	out := &rewindv1.ReadResponse{Partition: res.Partition, More: res.More, Records: make([]*rewindv1.Record, len(res.Records))}
	if res.HasHead {
		out.HeadVersion = &res.Head
	}
	if res.HasEarliest {
		out.EarliestVersion = &res.Earliest
	}
	if res.HasPosition {
		out.Position = &res.Position
	}
	for i, r := range res.Records {
		pr := &rewindv1.Record{
			Partition: res.Partition, Offset: r.Offset, AppendTimeUnixNanos: r.AppendTime,
			MessageId: msgid.ID{TopicID: res.TopicID, Partition: res.Partition, Offset: r.Offset}.String(),
			Key:       r.Key, Value: r.Value, IdempotencyKey: string(r.IdempotencyKey), EventTimeUnixNanos: r.EventTime,
		}
		if r.HasVersion {
			v := r.Version
			pr.KeyVersion = &v
		}
		for _, h := range r.Headers {
			pr.Headers = append(pr.Headers, &rewindv1.Header{Key: string(h.Key), Value: h.Value})
		}
		out.Records[i] = pr
	}
	return out, nil
}
