package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/record"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// PeerStat is what the raft transport knows of a peer.
type PeerStat struct {
	Connected bool
	Dropped   uint64
}

// SetPeerStats gives the cluster status the transport's view of peers.
func (s *Server) SetPeerStats(fn func() map[uint64]PeerStat) { s.peerStats = fn }

// GetClusterStatus implements rewindv1connect.ClusterServiceHandler.
func (s *Server) GetClusterStatus(ctx context.Context, _ *rewindv1.GetClusterStatusRequest) (*rewindv1.GetClusterStatusResponse, error) {
	cs := s.b.Status()
	var peers map[uint64]PeerStat
	if s.peerStats != nil {
		peers = s.peerStats()
	}
	out := &rewindv1.GetClusterStatusResponse{ClusterId: s.b.ClusterID(), NodeId: s.b.NodeID(), MetadataLeader: cs.MetaLeader}
	for _, n := range cs.Nodes {
		ps := peers[n.ID]
		out.Nodes = append(out.Nodes, &rewindv1.NodeStatus{
			Id: n.ID, Address: n.Addr, Self: n.Self, Connected: n.Self || ps.Connected, DroppedMessages: ps.Dropped,
		})
	}
	for _, p := range cs.Partitions {
		ps := &rewindv1.PartitionStatus{
			Topic: p.Topic, Partition: p.Partition, Group: p.Group, Replicas: p.Replicas, Hosted: p.Hosted,
			Leader: p.Raft.Leader, Term: p.Raft.Term, CommitIndex: p.Raft.Commit, AppliedIndex: p.Raft.Applied,
			LastIndex: p.Raft.Last, LogStartOffset: p.Bounds.LogStart, NextOffset: p.Bounds.Next,
		}
		if p.Raft.Leading {
			for _, r := range p.Replicas {
				m := p.Raft.Match[r]
				ps.Progress = append(ps.Progress, &rewindv1.ReplicaProgress{Node: r, MatchIndex: m, Lag: p.Raft.Last - min(m, p.Raft.Last)})
			}
		}
		out.Partitions = append(out.Partitions, ps)
	}
	return out, nil
}

// TransferLeader implements rewindv1connect.ClusterServiceHandler.
func (s *Server) TransferLeader(ctx context.Context, req *rewindv1.TransferLeaderRequest) (*rewindv1.TransferLeaderResponse, error) {
	if err := s.b.TransferLeader(req.GetTopic(), req.GetPartition(), req.GetNode()); err != nil {
		return nil, toConnect(s.log, err)
	}
	return &rewindv1.TransferLeaderResponse{}, nil
}

// Forwarder publishes on other nodes over their public Publish API. It
// implements broker.Forwarder.
type Forwarder struct {
	self   uint64
	client *http.Client
	mu     sync.Mutex
	conns  map[string]rewindv1connect.PublishServiceClient
}

// NewForwarder returns a forwarder for node self using client (HTTP/2).
func NewForwarder(self uint64, client *http.Client) *Forwarder {
	return &Forwarder{self: self, client: client, conns: make(map[string]rewindv1connect.PublishServiceClient)}
}

func (f *Forwarder) conn(addr string) rewindv1connect.PublishServiceClient {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.conns[addr]
	if !ok {
		c = rewindv1connect.NewPublishServiceClient(f.client, "http://"+addr,
			connect.WithGRPC(), connect.WithReadMaxBytes(MaxResponseBytes), connect.WithSendMaxBytes(MaxRequestBytes))
		f.conns[addr] = c
	}
	return c
}

// Publish implements broker.Forwarder.
func (f *Forwarder) Publish(ctx context.Context, node uint64, addr, topic string, p uint32, recs []record.Record) ([]broker.PublishResult, error) {
	if addr == "" {
		return nil, fmt.Errorf("%w: %w: no address for node %d", broker.ErrUnavailable, broker.ErrNotStored, node)
	}
	req := &rewindv1.PublishRequest{Topic: topic, Records: make([]*rewindv1.PublishRecord, len(recs))}
	for i := range recs {
		r := &recs[i]
		pr := &rewindv1.PublishRecord{
			Key: r.Key, Value: r.Value, IdempotencyKey: string(r.IdempotencyKey), EventTimeUnixNanos: r.EventTime, Partition: &p,
		}
		for _, h := range r.Headers {
			pr.Headers = append(pr.Headers, &rewindv1.Header{Key: string(h.Key), Value: h.Value})
		}
		req.Records[i] = pr
	}
	ctx, ci := connect.NewClientContext(ctx)
	ci.RequestHeader().Set(ForwardedHeader, strconv.FormatUint(f.self, 10))
	resp, err := f.conn(addr).Publish(ctx, req)
	if err != nil {
		return nil, forwardError(node, err)
	}
	out := make([]broker.PublishResult, len(resp.GetResults()))
	for i, r := range resp.GetResults() {
		out[i] = broker.PublishResult{Partition: r.GetPartition(), Offset: r.GetOffset(), AppendTime: r.GetAppendTimeUnixNanos(), Duplicate: r.GetDuplicate()}
	}
	if len(out) != len(recs) {
		return nil, fmt.Errorf("%w: node %d answered %d results for %d records", broker.ErrUnavailable, node, len(out), len(recs))
	}
	return out, nil
}

// forwardError turns the leader's answer back into the broker's errors.
func forwardError(node uint64, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w: forward to node %d: %w", broker.ErrUnavailable, node, err)
	}
	var op *net.OpError
	if (errors.As(err, &op) && op.Op == "dial") || ce.Meta().Get(NotStoredHeader) != "" {
		nl := &broker.NotLeaderError{Node: node}
		nl.Leader, _ = strconv.ParseUint(ce.Meta().Get(LeaderHeader), 10, 64)
		return fmt.Errorf("forward to node %d: %w: %v", node, nl, ce.Message())
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if c, ok := v.(*rewindv1.IdempotencyConflict); ok {
				return &broker.ConflictError{Index: int(c.GetIndex()), Key: c.GetIdempotencyKey(), Partition: c.GetPartition(), Offset: c.GetOffset()}
			}
		}
	}
	switch ce.Code() {
	case connect.CodeInvalidArgument:
		return fmt.Errorf("%w: %s", broker.ErrInvalid, ce.Message())
	case connect.CodeNotFound:
		return fmt.Errorf("%w: %s", broker.ErrNoTopic, ce.Message())
	case connect.CodeDeadlineExceeded:
		return fmt.Errorf("forward to node %d: %w", node, context.DeadlineExceeded)
	}
	return fmt.Errorf("%w: forward to node %d: %s: %s", broker.ErrUnavailable, node, ce.Code(), ce.Message())
}

var (
	_ broker.Forwarder                      = (*Forwarder)(nil)
	_ rewindv1connect.ClusterServiceHandler = (*Server)(nil)
)
