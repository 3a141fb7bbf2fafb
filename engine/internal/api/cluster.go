package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/broker"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// PeerStat is what the raft transport knows of a peer.
type PeerStat struct {
	Connected bool
	Dropped   uint64
}

// metaLeader returns the metadata leader and its address when err says
// this node is not it (and another member is).
func (s *Server) metaLeader(err error) (uint64, string, bool) {
	var nl *broker.NotMetaLeaderError
	if s.peers == nil || !errors.As(err, &nl) || nl.Leader == 0 || nl.Leader == s.b.NodeID() {
		return 0, "", false
	}
	addr, ok := s.b.Addr(nl.Leader)
	return nl.Leader, addr, ok
}

// AddNode implements rewindv1connect.ClusterServiceHandler: served by the
// metadata leader (another member forwards it there).
func (s *Server) AddNode(ctx context.Context, req *rewindv1.AddNodeRequest) (*rewindv1.AddNodeResponse, error) {
	nodes, err := s.b.AddNode(ctx, req.GetNode(), req.GetAddress())
	if node, addr, ok := s.metaLeader(err); ok {
		return s.peers.Cluster(node, addr).AddNode(ctx, req)
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
	if node, addr, ok := s.metaLeader(err); ok {
		return s.peers.Cluster(node, addr).RemoveNode(ctx, req)
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
	if node, addr, ok := s.metaLeader(err); ok {
		return s.peers.Cluster(node, addr).Rebalance(ctx, req)
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
			if s.peers == nil {
				continue
			}
			st, err = s.peers.Cluster(n.ID, n.Addr).GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
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
	out := &rewindv1.GetClusterStatusResponse{ClusterId: s.b.ClusterID(), NodeId: s.b.NodeID(), MetadataLeader: cs.MetaLeader, Ready: true}
	if err := s.b.Ready(); err != nil {
		out.Ready, out.NotReady = false, err.Error()
	}
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

// TransferLeader implements rewindv1connect.ClusterServiceHandler. A
// manual transfer is also a preference: the metadata leader first makes
// the node the partition's preferred leader (broker.PreferLeader), so that
// leader balancing keeps it there instead of undoing it; then the
// partition's leader hands over. A member may ask either node in turn: a
// request from a client goes on to whichever of the two is elsewhere, one
// from a member (on the member path) does only what this node can, and
// never hops again.
func (s *Server) TransferLeader(ctx context.Context, req *rewindv1.TransferLeaderRequest) (*rewindv1.TransferLeaderResponse, error) {
	topic, p, node := req.GetTopic(), req.GetPartition(), req.GetNode()
	_, fromMember := memberOf(ctx)
	err := s.b.PreferLeader(ctx, topic, p, node)
	if m, addr, ok := s.metaLeader(err); ok {
		err = nil
		if !fromMember {
			_, err = s.peers.Cluster(m, addr).TransferLeader(ctx, req)
		}
	}
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	err = s.b.TransferLeader(topic, p, node)
	var nl *broker.NotLeaderError
	if errors.As(err, &nl) && nl.Leader != 0 && s.peers != nil {
		if fromMember {
			// The preference is recorded: leader balancing hands the
			// partition over if the leader this node saw moved on.
			err = nil
		} else if addr, ok := s.b.Addr(nl.Leader); ok {
			_, err = s.peers.Cluster(nl.Leader, addr).TransferLeader(ctx, req)
		}
	}
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	return &rewindv1.TransferLeaderResponse{}, nil
}

var _ rewindv1connect.ClusterServiceHandler = (*Server)(nil)
