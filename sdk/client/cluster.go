package client

import (
	"context"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// ClusterStatus is the cluster as the answering node sees it: members,
// and for every partition its replicas, leader and raft indexes, with each
// replica's lag on the partition's leader.
type ClusterStatus = rewindv1.GetClusterStatusResponse

// ClusterStatus asks the node in use for its view of the cluster. Ask
// every member (a client each) to see every leader's view (rewind cluster
// status does).
func (c *Client) ClusterStatus(ctx context.Context) (*ClusterStatus, error) {
	return unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*ClusterStatus, error) {
		return cl.cluster.GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
	})
}

// TransferLeader makes node (one of the partition's replicas) its
// preferred leader, which leader balancing keeps, and asks the partition's
// leader to hand leadership to it. It returns once asked; the transfer
// completes within about an election timeout. Any member may be asked (it
// goes on to the members that can do it); the call goes to the client's
// first address only and is not repeated.
func (c *Client) TransferLeader(ctx context.Context, topic string, partition uint32, node uint64) error {
	_, err := c.cluster.TransferLeader(ctx, &rewindv1.TransferLeaderRequest{Topic: topic, Partition: partition, Node: node})
	return err
}

// RemoveNode moves every replica off node (to members without one, or the
// partition keeps one replica fewer) and removes it from the cluster. It
// returns once nothing depends on the node, with how many partitions moved
// and how many shrank; the node may then be stopped. Its id is never
// reused. It is not repeated after an attempt whose node failed
// (ErrOutcomeUnknown).
func (c *Client) RemoveNode(ctx context.Context, node uint64) (moved, shrunk uint32, err error) {
	resp, err := unary(ctx, c, once, func(ctx context.Context, cl *Client) (*rewindv1.RemoveNodeResponse, error) {
		return cl.cluster.RemoveNode(ctx, &rewindv1.RemoveNodeRequest{Node: node})
	})
	if err != nil {
		return 0, 0, err
	}
	return resp.GetMoved(), resp.GetShrunk(), nil
}

// ReplicaMove is one replica Rebalance moves.
type ReplicaMove = rewindv1.ReplicaMove

// Rebalance evens out the replicas per member (after nodes joined) and
// returns the moves, once every moved partition's leader has its new
// configuration; with dryRun it only plans. Only the plan is repeated after
// an attempt whose node failed: a repeated rebalance would find nothing
// to move and say so (ErrOutcomeUnknown instead).
func (c *Client) Rebalance(ctx context.Context, dryRun bool) ([]*ReplicaMove, error) {
	k := once
	if dryRun {
		k = c.repeatable(0)
	}
	resp, err := unary(ctx, c, k, func(ctx context.Context, cl *Client) (*rewindv1.RebalanceResponse, error) {
		return cl.cluster.Rebalance(ctx, &rewindv1.RebalanceRequest{DryRun: dryRun})
	})
	return resp.GetMoves(), err
}
