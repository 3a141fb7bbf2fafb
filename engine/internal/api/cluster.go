package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/internal/peerauth"
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

// PeerHTTP is how a member calls the others: an HTTP/2 client and the URL
// scheme, "http" (h2c) or "https" (peer TLS).
type PeerHTTP struct {
	Client *http.Client
	Scheme string
}

// url is the base URL of the member at addr.
func (p PeerHTTP) url(addr string) string {
	scheme := p.Scheme
	if scheme == "" {
		scheme = "http"
	}
	return scheme + "://" + addr
}

// SetPeerClient gives the server the HTTP/2 client it asks other members
// with (membership changes go to the metadata leader).
func (s *Server) SetPeerClient(p PeerHTTP) { s.peer = p }

// clusterClient calls node's ClusterService at addr. The caller marks its
// context with the node (peerauth.WithTarget).
func (s *Server) clusterClient(addr string) rewindv1connect.ClusterServiceClient {
	c := s.peer.Client
	if c == nil {
		c = http.DefaultClient
	}
	return rewindv1connect.NewClusterServiceClient(c, s.peer.memberURL(addr), PeerClientOptions(connect.WithInterceptors(carrier{}))...)
}

// metaLeaderCtx marks ctx for the metadata leader named by err.
func metaLeaderCtx(ctx context.Context, err error) context.Context {
	var nl *broker.NotMetaLeaderError
	if errors.As(err, &nl) {
		ctx = peerauth.WithTarget(ctx, nl.Leader)
	}
	return ctx
}

// PeerClientOptions are the Connect options of every call between members:
// gRPC, and no compression. Connect clients accept gzip by default, and a
// server then compresses every answer: on a LAN that costs far more CPU
// than it saves (it was the top item of a profile of forwarded publishes,
// and halved relayed reads).
func PeerClientOptions(more ...connect.ClientOption) []connect.ClientOption {
	return append([]connect.ClientOption{connect.WithGRPC(), connect.WithAcceptCompression("gzip", nil, nil)}, more...)
}

// metaLeaderAddr returns the metadata leader's address when err says this
// node is not it.
func (s *Server) metaLeaderAddr(err error) (string, bool) {
	var nl *broker.NotMetaLeaderError
	if !errors.As(err, &nl) || nl.Leader == 0 || nl.Leader == s.b.NodeID() {
		return "", false
	}
	return s.b.Addr(nl.Leader)
}

// AddNode implements rewindv1connect.ClusterServiceHandler: served by the
// metadata leader (another member forwards it there).
func (s *Server) AddNode(ctx context.Context, req *rewindv1.AddNodeRequest) (*rewindv1.AddNodeResponse, error) {
	nodes, err := s.b.AddNode(ctx, req.GetNode(), req.GetAddress())
	if addr, ok := s.metaLeaderAddr(err); ok {
		return s.clusterClient(addr).AddNode(metaLeaderCtx(ctx, err), req)
	}
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	out := &rewindv1.AddNodeResponse{ClusterId: s.b.ClusterID()}
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, &rewindv1.NodeStatus{Id: n.ID, Address: n.Addr, Leaving: n.Leaving})
	}
	return out, nil
}

// RemoveNode implements rewindv1connect.ClusterServiceHandler: the
// metadata leader gives the node's partitions new replica sets, waits until
// their leaders have changed their configurations (asking every member's
// status), then removes the node from the metadata group.
func (s *Server) RemoveNode(ctx context.Context, req *rewindv1.RemoveNodeRequest) (*rewindv1.RemoveNodeResponse, error) {
	moves, err := s.b.StartRemoveNode(ctx, req.GetNode())
	if addr, ok := s.metaLeaderAddr(err); ok {
		return s.clusterClient(addr).RemoveNode(metaLeaderCtx(ctx, err), req)
	}
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	out := &rewindv1.RemoveNodeResponse{}
	for _, m := range moves {
		if m.Shrunk {
			out.Shrunk++
		} else {
			out.Moved++
		}
	}
	if err := s.waitMoves(ctx, moves); err != nil {
		return nil, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("%w (node %d is marked leaving; ask again to wait more)", err, req.GetNode()))
	}
	if err := s.b.FinishRemoveNode(ctx, req.GetNode()); err != nil {
		return nil, toConnect(s.log, err)
	}
	return out, nil
}

// Rebalance implements rewindv1connect.ClusterServiceHandler: served by
// the metadata leader.
func (s *Server) Rebalance(ctx context.Context, req *rewindv1.RebalanceRequest) (*rewindv1.RebalanceResponse, error) {
	moves, err := s.b.Rebalance(ctx, req.GetDryRun())
	if addr, ok := s.metaLeaderAddr(err); ok {
		return s.clusterClient(addr).Rebalance(metaLeaderCtx(ctx, err), req)
	}
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	out := &rewindv1.RebalanceResponse{}
	for _, m := range moves {
		out.Moves = append(out.Moves, &rewindv1.ReplicaMove{Topic: m.Topic, Partition: m.Partition, From: m.From, To: m.To})
	}
	if !req.GetDryRun() {
		if err := s.waitMoves(ctx, moves); err != nil {
			return nil, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("%w (the moves are recorded and go on)", err))
		}
	}
	return out, nil
}

// waitMoves waits until every move's partition leader reports the new
// configuration.
func (s *Server) waitMoves(ctx context.Context, moves []broker.Reassignment) error {
	for len(moves) > 0 {
		moves = s.pendingMoves(ctx, moves)
		if len(moves) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d partition(s) still moving", len(moves))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// pendingMoves returns the moves no partition leader reports done yet.
func (s *Server) pendingMoves(ctx context.Context, moves []broker.Reassignment) []broker.Reassignment {
	done := map[uint64]bool{}
	for _, n := range s.b.Members() {
		var st *rewindv1.GetClusterStatusResponse
		var err error
		if n.ID == s.b.NodeID() {
			st, err = s.GetClusterStatus(ctx, nil)
		} else {
			st, err = s.clusterClient(n.Addr).GetClusterStatus(peerauth.WithTarget(ctx, n.ID), &rewindv1.GetClusterStatusRequest{})
		}
		if err != nil {
			continue
		}
		for _, p := range st.GetPartitions() {
			for _, m := range moves {
				if p.GetGroup() == m.Group && len(p.GetProgress()) > 0 && len(p.GetVotersOutgoing()) == 0 && sameSet(p.GetVoters(), m.Replicas) {
					done[m.Group] = true
				}
			}
		}
	}
	return slices.DeleteFunc(moves, func(m broker.Reassignment) bool { return done[m.Group] })
}

func sameSet(a, b []uint64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

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
			Id: n.ID, Address: n.Addr, Self: n.Self, Connected: n.Self || ps.Connected, DroppedMessages: ps.Dropped, Leaving: n.Leaving,
		})
	}
	all := s.may(ctx, auth.Admin, auth.ClusterResource)
	for _, p := range cs.Partitions {
		if !all && !s.may(ctx, auth.Describe, topicRes(p.Topic)) {
			continue
		}
		ps := &rewindv1.PartitionStatus{
			Topic: p.Topic, Partition: p.Partition, Group: p.Group, Replicas: p.Replicas, Hosted: p.Hosted,
			Leader: p.Raft.Leader, Term: p.Raft.Term, CommitIndex: p.Raft.Commit, AppliedIndex: p.Raft.Applied,
			LastIndex: p.Raft.Last, LogStartOffset: p.Bounds.LogStart, NextOffset: p.Bounds.Next,
			Voters: p.Raft.Voters, VotersOutgoing: p.Raft.VotersOutgoing,
		}
		if p.Raft.Leading {
			for _, r := range p.Replicas {
				m := p.Raft.Match[r]
				rp := &rewindv1.ReplicaProgress{Node: r, MatchIndex: m, Lag: p.Raft.Last - min(m, p.Raft.Last)}
				if m == 0 {
					// Every replica that answered holds index 1 (the
					// bootstrap configuration or the snapshot after it):
					// raft resets what a new leader knows to 0.
					rp.Lag, rp.LagUnknown = 0, true
				}
				ps.Progress = append(ps.Progress, rp)
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
	self  uint64
	conns *peerClients[rewindv1connect.PublishServiceClient]
}

// NewForwarder returns a forwarder for node self calling through peer.
func NewForwarder(self uint64, peer PeerHTTP) *Forwarder {
	f := &Forwarder{self: self}
	f.conns = newPeerClients(func(addr string) rewindv1connect.PublishServiceClient {
		return rewindv1connect.NewPublishServiceClient(peer.Client, peer.memberURL(addr),
			PeerClientOptions(connect.WithReadMaxBytes(MaxResponseBytes), connect.WithSendMaxBytes(MaxRequestBytes),
				connect.WithInterceptors(carrier{}))...)
	})
	return f
}

func (f *Forwarder) conn(addr string) rewindv1connect.PublishServiceClient { return f.conns.get(addr) }

// Publish implements broker.Forwarder.
func (f *Forwarder) Publish(ctx context.Context, node uint64, addr, topic string, p uint32, recs []record.Record, relay bool) ([]broker.PublishResult, error) {
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
	resp, err := f.conn(addr).Publish(setHop(peerauth.WithTarget(ctx, node), f.self, relay), req)
	if err != nil {
		return nil, forwardError(node, topic, p, err)
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
func forwardError(node uint64, topic string, p uint32, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w: forward to node %d: %w", broker.ErrUnavailable, node, err)
	}
	var op *net.OpError
	if (errors.As(err, &op) && op.Op == "dial") || ce.Meta().Get(NotStoredHeader) != "" {
		nl := &broker.NotLeaderError{Topic: topic, Partition: p, Node: node}
		nl.Leader, _ = strconv.ParseUint(ce.Meta().Get(LeaderHeader), 10, 64)
		return fmt.Errorf("forward to node %d: %w: %v", node, nl, ce.Message())
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if c, ok := v.(*rewindv1.IdempotencyConflict); ok {
				return &broker.ConflictError{Index: int(c.GetIndex()), Key: c.GetIdempotencyKey(), Partition: c.GetPartition(), Offset: c.GetOffset(),
					OffsetUnknown: c.GetMessageId() == ""}
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
	case connect.CodeResourceExhausted:
		// The leader refused for lack of disk space or because too much is
		// pending: the client gets the same code as from the leader itself
		// (back off, not fail over as from Unavailable).
		cause := partition.ErrBusy
		if strings.Contains(ce.Message(), partition.ErrDiskFull.Error()) {
			cause = partition.ErrDiskFull
		}
		return fmt.Errorf("forward to node %d: %w (%s)", node, cause, ce.Message())
	}
	return fmt.Errorf("%w: forward to node %d: %s: %s", broker.ErrUnavailable, node, ce.Code(), ce.Message())
}

var (
	_ broker.Forwarder                      = (*Forwarder)(nil)
	_ rewindv1connect.ClusterServiceHandler = (*Server)(nil)
)
