package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

func partitionView(p uint32, leader, term uint64, leading bool) *rewindv1.PartitionStatus {
	ps := &rewindv1.PartitionStatus{Topic: "t", Partition: p, Replicas: []uint64{1, 2, 3}, Hosted: true, Leader: leader, Term: term}
	if leading {
		for _, r := range ps.Replicas {
			ps.Progress = append(ps.Progress, &rewindv1.ReplicaProgress{Node: r})
		}
	}
	return ps
}

// The incident of issue 14: node 3 led partition 1 at term 2, was stopped,
// and answered again (resumed) before it heard that node 1 leads at term
// 3. Its own view, with its replicas' progress, used to win because it
// was the leader's own answer; the newest term must win, and node 3's
// view is reported stale.
func TestClusterStatusPrefersTheNewestTerm(t *testing.T) {
	answers := map[uint64]*client.ClusterStatus{
		1: {NodeId: 1, Partitions: []*rewindv1.PartitionStatus{partitionView(0, 2, 1, false), partitionView(1, 1, 3, true)}},
		2: {NodeId: 2, Partitions: []*rewindv1.PartitionStatus{partitionView(0, 2, 1, true), partitionView(1, 1, 3, false)}},
		3: {NodeId: 3, Partitions: []*rewindv1.PartitionStatus{partitionView(0, 2, 1, false), partitionView(1, 3, 2, true)}},
	}
	// Every order of the answers gives the same view (a map's order used
	// to decide).
	for range 20 {
		parts, stale := mergePartitions(answers)
		type row struct {
			P            uint32
			Leader, Term uint64
			Progress     bool
			Stale        []staleView
		}
		var got []row
		for i, p := range parts {
			got = append(got, row{p.GetPartition(), p.GetLeader(), p.GetTerm(), len(p.GetProgress()) > 0, stale[i]})
		}
		want := []row{
			{P: 0, Leader: 2, Term: 1, Progress: true},
			{P: 1, Leader: 1, Term: 3, Progress: true, Stale: []staleView{{Node: 3, Leader: 3, Term: 2}}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("merged view (-want +got):\n%s", diff)
		}
	}
}

// At one term the leader's own answer wins over a follower's, and a view
// naming a leader over one that knows none; a member without a replica
// (no raft view, term 0) is never stale.
func TestClusterStatusPrefersTheLeadersOwnView(t *testing.T) {
	notHosted := &rewindv1.PartitionStatus{Topic: "t", Partition: 0, Replicas: []uint64{1, 2}}
	answers := map[uint64]*client.ClusterStatus{
		1: {Partitions: []*rewindv1.PartitionStatus{partitionView(0, 0, 4, false)}},
		2: {Partitions: []*rewindv1.PartitionStatus{partitionView(0, 2, 4, true)}},
		3: {Partitions: []*rewindv1.PartitionStatus{notHosted}},
		4: {Partitions: []*rewindv1.PartitionStatus{partitionView(0, 2, 4, false)}},
	}
	parts, stale := mergePartitions(answers)
	if len(parts) != 1 || parts[0].GetLeader() != 2 || len(parts[0].GetProgress()) == 0 || len(stale[0]) != 0 {
		t.Fatalf("merged %v, stale %v: want node 2's own view, none stale", parts, stale)
	}
	delete(answers, 2)
	parts, _ = mergePartitions(answers)
	if parts[0].GetLeader() != 2 {
		t.Fatalf("merged %v: want the view that names leader 2", parts)
	}
}
