package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/remote"
	"github.com/rewind-io/rewind/engine/internal/route"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/gen/rewind/peer/v1/peerv1connect"
)

// MaxFetchWait bounds the long poll a fetch may ask for.
const MaxFetchWait = 5 * time.Second

// MaxFetchBytes bounds the batch bytes one fetch returns.
const MaxFetchBytes = route.MaxFetchBytes

// PeerReads serves PartitionService: the leader's side of a stream that
// another node relays (broker/reads.go).
type PeerReads struct {
	s         *Server
	clusterID uint64
}

// PeerReads returns the PartitionService handlers of a member of cluster
// clusterID.
func (s *Server) PeerReads(clusterID uint64) *PeerReads {
	return &PeerReads{s: s, clusterID: clusterID}
}

// Handler returns the service's path and handler.
func (p *PeerReads) Handler() (string, http.Handler) {
	const maxRequest = 1 << 20
	path, h := peerv1connect.NewPartitionServiceHandler(p,
		connect.WithReadMaxBytes(maxRequest), connect.WithSendMaxBytes(MaxFetchBytes+(4<<20)))
	return path, limitBody(h, maxRequest)
}

func (p *PeerReads) check(ref *peerv1.PartitionRef) error {
	if ref.GetClusterId() != p.clusterID {
		return connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("cluster %016x asked node %d of cluster %016x", ref.GetClusterId(), p.s.b.NodeID(), p.clusterID))
	}
	return nil
}

// Fetch implements peerv1connect.PartitionServiceHandler.
func (p *PeerReads) Fetch(ctx context.Context, req *peerv1.FetchRequest) (*peerv1.FetchResponse, error) {
	ref := req.GetPartition()
	if err := p.check(ref); err != nil {
		return nil, err
	}
	f := remote.Fetch{
		From:     req.GetFromOffset(),
		MaxBytes: int(min(req.GetMaxBytes(), MaxFetchBytes)),
		Wait:     min(time.Duration(req.GetMaxWaitMillis())*time.Millisecond, MaxFetchWait),
	}
	res, err := p.s.b.ServeFetch(ctx, ref.GetTopicId(), ref.GetPartition(), f)
	if err != nil {
		return nil, toConnect(p.s.log, err)
	}
	out := &peerv1.FetchResponse{
		Bounds: &peerv1.PartitionBounds{
			LogStart: res.Bounds.LogStart, Next: res.Bounds.Next,
			FirstTimeUnixNanos: res.Bounds.FirstTime, LastTimeUnixNanos: res.Bounds.LastTime,
			TimeWatermarkUnixNanos: res.Watermark, Bytes: res.Bounds.Bytes,
		},
		Batches: make([]*peerv1.Batch, len(res.Batches)),
	}
	for i, b := range res.Batches {
		out.Batches[i] = &peerv1.Batch{Base: b.Base, AppendTimeUnixNanos: b.AppendTime, Span: b.Span, Records: b.Records.Bytes(), KeyVersions: b.KeyVersions}
	}
	return out, nil
}

// Locate implements peerv1connect.PartitionServiceHandler.
func (p *PeerReads) Locate(ctx context.Context, req *peerv1.LocateRequest) (*peerv1.LocateResponse, error) {
	ref := req.GetPartition()
	if err := p.check(ref); err != nil {
		return nil, err
	}
	if k, ok := req.GetWhat().(*peerv1.LocateRequest_IdempotencyKey); ok {
		off, found, err := p.s.b.ServeStoredOffset(ref.GetTopicId(), ref.GetPartition(), []byte(k.IdempotencyKey))
		if err != nil {
			return nil, toConnect(p.s.log, err)
		}
		return &peerv1.LocateResponse{Offset: off, Found: found}, nil
	}
	var at *int64
	if t, ok := req.GetWhat().(*peerv1.LocateRequest_TimeUnixNanos); ok {
		at = &t.TimeUnixNanos
	}
	off, t, err := p.s.b.ServeLocate(ref.GetTopicId(), ref.GetPartition(), at, req.GetOffset())
	if err != nil {
		return nil, toConnect(p.s.log, err)
	}
	return &peerv1.LocateResponse{Offset: off, AppendTimeUnixNanos: t}, nil
}

// Bind implements peerv1connect.PartitionServiceHandler.
func (p *PeerReads) Bind(ctx context.Context, req *peerv1.BindRequest) (*peerv1.BindResponse, error) {
	ref := req.GetPartition()
	if err := p.check(ref); err != nil {
		return nil, err
	}
	in := req.GetBindings()
	if len(in) == 0 || len(in) > broker.MaxRecordsPerPublish {
		return nil, invalidf("%d bindings: bind 1 to %d per request", len(in), broker.MaxRecordsPerPublish)
	}
	bs := make([]partition.Binding, len(in))
	for i, b := range in {
		bs[i] = partition.Binding{Key: []byte(b.GetIdempotencyKey()), Target: b.GetTarget(), Hash: b.GetHash()}
	}
	out, err := p.s.b.ServeBind(hopContext(ctx), ref.GetTopicId(), ref.GetPartition(), bs)
	if err != nil {
		return nil, toConnect(p.s.log, err)
	}
	resp := &peerv1.BindResponse{Bound: make([]*peerv1.Bound, len(out))}
	for i, b := range out {
		resp.Bound[i] = &peerv1.Bound{Partition: b.Partition, Same: b.Same, Stored: b.Stored, Offset: b.Offset, AppendTimeUnixNanos: b.AppendTime}
	}
	return resp, nil
}

var _ peerv1connect.PartitionServiceHandler = (*PeerReads)(nil)
