package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/remote"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/gen/rewind/peer/v1/peerv1connect"
	"github.com/rewind-io/rewind/internal/peerauth"
)

// MaxFetchWait bounds the long poll a fetch may ask for.
const MaxFetchWait = 5 * time.Second

// MaxFetchBytes bounds the batch bytes one fetch returns.
const MaxFetchBytes = 16 << 20

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
		out.Batches[i] = &peerv1.Batch{Base: b.Base, AppendTimeUnixNanos: b.AppendTime, Span: b.Span, Records: b.Records.Bytes()}
	}
	return out, nil
}

// Locate implements peerv1connect.PartitionServiceHandler.
func (p *PeerReads) Locate(ctx context.Context, req *peerv1.LocateRequest) (*peerv1.LocateResponse, error) {
	ref := req.GetPartition()
	if err := p.check(ref); err != nil {
		return nil, err
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

// PeerReader reads partitions on the nodes that lead them over
// PartitionService. It implements broker.Fetcher.
type PeerReader struct {
	clusterID uint64
	self      uint64
	conns     *peerClients[peerv1connect.PartitionServiceClient]
}

// NewPeerReader returns a reader for member self of cluster clusterID
// calling through peer.
func NewPeerReader(clusterID, self uint64, peer PeerHTTP) *PeerReader {
	return &PeerReader{clusterID: clusterID, self: self, conns: newPeerClients(func(addr string) peerv1connect.PartitionServiceClient {
		return peerv1connect.NewPartitionServiceClient(peer.Client, peer.url(addr),
			PeerClientOptions(connect.WithReadMaxBytes(MaxFetchBytes+(4<<20)))...)
	})}
}

func (r *PeerReader) conn(addr string) peerv1connect.PartitionServiceClient { return r.conns.get(addr) }

// peerClients keeps one Connect client per peer address.
type peerClients[C any] struct {
	dial func(addr string) C
	mu   sync.Mutex
	m    map[string]C
}

func newPeerClients[C any](dial func(addr string) C) *peerClients[C] {
	return &peerClients[C]{dial: dial, m: make(map[string]C)}
}

func (p *peerClients[C]) get(addr string) C {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.m[addr]
	if !ok {
		c = p.dial(addr)
		p.m[addr] = c
	}
	return c
}

func (r *PeerReader) ref(topicID uint64, p uint32) *peerv1.PartitionRef {
	return &peerv1.PartitionRef{ClusterId: r.clusterID, TopicId: topicID, Partition: p}
}

// Fetch implements broker.Fetcher.
func (r *PeerReader) Fetch(ctx context.Context, node uint64, addr string, topicID uint64, p uint32, f remote.Fetch) (remote.Fetched, error) {
	if addr == "" {
		return remote.Fetched{}, fmt.Errorf("%w: no address for node %d", broker.ErrUnavailable, node)
	}
	resp, err := r.conn(addr).Fetch(peerauth.WithTarget(ctx, node), &peerv1.FetchRequest{
		Partition: r.ref(topicID, p), FromOffset: f.From, MaxBytes: uint32(min(f.MaxBytes, MaxFetchBytes)),
		MaxWaitMillis: uint32(f.Wait / time.Millisecond),
	})
	if err != nil {
		return remote.Fetched{}, peerReadError(ctx, node, p, err)
	}
	bd := resp.GetBounds()
	out := remote.Fetched{
		Bounds: partition.State{
			LogStart: bd.GetLogStart(), Next: bd.GetNext(), FirstTime: bd.GetFirstTimeUnixNanos(),
			LastTime: bd.GetLastTimeUnixNanos(), Bytes: bd.GetBytes(),
		},
		Watermark: bd.GetTimeWatermarkUnixNanos(),
		Batches:   make([]*partition.Batch, len(resp.GetBatches())),
	}
	if out.Bounds.LogStart > out.Bounds.Next {
		return remote.Fetched{}, fmt.Errorf("node %d partition %d: %w: log start %d after end %d", node, p, partition.ErrCorrupt, out.Bounds.LogStart, out.Bounds.Next)
	}
	for i, b := range resp.GetBatches() {
		// Parse checks the batch's checksum: what is delivered is what the
		// leader stored.
		rb, err := record.Parse(b.GetRecords())
		if err != nil {
			return remote.Fetched{}, fmt.Errorf("node %d partition %d offset %d: %w: %w", node, p, b.GetBase(), partition.ErrCorrupt, err)
		}
		if rb.Span() != b.GetSpan() || b.GetSpan() == 0 {
			return remote.Fetched{}, fmt.Errorf("node %d partition %d offset %d: %w: batch span %d, header says %d", node, p, b.GetBase(), partition.ErrCorrupt, rb.Span(), b.GetSpan())
		}
		out.Batches[i] = &partition.Batch{Base: b.GetBase(), AppendTime: b.GetAppendTimeUnixNanos(), Span: b.GetSpan(), Records: rb}
	}
	return out, nil
}

// Locate implements broker.Fetcher.
func (r *PeerReader) Locate(ctx context.Context, node uint64, addr string, topicID uint64, p uint32, at *int64, offset uint64) (uint64, int64, error) {
	if addr == "" {
		return 0, 0, fmt.Errorf("%w: no address for node %d", broker.ErrUnavailable, node)
	}
	req := &peerv1.LocateRequest{Partition: r.ref(topicID, p)}
	if at != nil {
		req.What = &peerv1.LocateRequest_TimeUnixNanos{TimeUnixNanos: *at}
	} else {
		req.What = &peerv1.LocateRequest_Offset{Offset: offset}
	}
	resp, err := r.conn(addr).Locate(peerauth.WithTarget(ctx, node), req)
	if err != nil {
		return 0, 0, peerReadError(ctx, node, p, err)
	}
	return resp.GetOffset(), resp.GetAppendTimeUnixNanos(), nil
}

// Bind implements broker.Binder.
func (r *PeerReader) Bind(ctx context.Context, node uint64, addr string, topicID uint64, home uint32, bs []partition.Binding, relay bool) ([]partition.Bound, error) {
	if addr == "" {
		return nil, fmt.Errorf("%w: %w: no address for node %d", broker.ErrUnavailable, broker.ErrNotStored, node)
	}
	req := &peerv1.BindRequest{Partition: r.ref(topicID, home), Bindings: make([]*peerv1.Binding, len(bs))}
	for i, b := range bs {
		req.Bindings[i] = &peerv1.Binding{IdempotencyKey: string(b.Key), Target: b.Target, Hash: b.Hash}
	}
	if relay {
		ctx = setHop(ctx, r.self, true)
	}
	resp, err := r.conn(addr).Bind(peerauth.WithTarget(ctx, node), req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// Nothing reached the node: nothing was bound.
			return nil, fmt.Errorf("%w: %w: bind on node %d: %w", broker.ErrUnavailable, broker.ErrNotStored, node, err)
		}
		return nil, peerReadError(ctx, node, home, err)
	}
	if len(resp.GetBound()) != len(bs) {
		return nil, fmt.Errorf("%w: node %d answered %d bindings for %d", broker.ErrUnavailable, node, len(resp.GetBound()), len(bs))
	}
	out := make([]partition.Bound, len(bs))
	for i, b := range resp.GetBound() {
		out[i] = partition.Bound{Partition: b.GetPartition(), Same: b.GetSame(), Stored: b.GetStored(), Offset: b.GetOffset(), AppendTime: b.GetAppendTimeUnixNanos()}
	}
	return out, nil
}

// peerReadError turns a leader's refusal back into the broker's errors.
// Only the caller's own context ends a read for good: a call the other end
// cancelled (it stopped or died mid-answer) is worth trying again.
func peerReadError(ctx context.Context, node uint64, p uint32, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("read from node %d: %w", node, cerr)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w: read from node %d: %w", broker.ErrUnavailable, node, err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%w: read from node %d: %s", broker.ErrUnavailable, node, ce.Message())
	}
	if ce.Meta().Get(NotStoredHeader) != "" {
		nl := &broker.NotLeaderError{Partition: p, Node: node}
		nl.Leader, _ = strconv.ParseUint(ce.Meta().Get(LeaderHeader), 10, 64)
		return fmt.Errorf("read from node %d: %w", node, nl)
	}
	switch ce.Code() {
	case connect.CodeNotFound:
		return fmt.Errorf("%w: %w: %s", broker.ErrNoTopic, broker.ErrTopicDeleted, ce.Message())
	case connect.CodeOutOfRange:
		return fmt.Errorf("%w: %s", partition.ErrBelowStart, ce.Message())
	case connect.CodeInvalidArgument:
		return fmt.Errorf("%w: %s", broker.ErrInvalid, ce.Message())
	case connect.CodeDataLoss:
		return fmt.Errorf("node %d: %w: %s", node, partition.ErrCorrupt, ce.Message())
	case connect.CodeFailedPrecondition:
		return fmt.Errorf("%w: node %d: %s", broker.ErrFailedPrecondition, node, ce.Message())
	}
	return fmt.Errorf("%w: read from node %d: %s: %s", broker.ErrUnavailable, node, ce.Code(), ce.Message())
}

var (
	_ broker.Fetcher                        = (*PeerReader)(nil)
	_ broker.Binder                         = (*PeerReader)(nil)
	_ peerv1connect.PartitionServiceHandler = (*PeerReads)(nil)
)
