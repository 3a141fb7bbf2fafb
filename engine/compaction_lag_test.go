package engine_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// TestLaggingReplicaAppliesABatchCompactionEmptied: compaction keeps a
// batch whose records were all superseded (its offsets stay taken) and
// rewrites its raft entry in place. A replica cut off while that happened
// catches up and must end at the same offset as the leader, or every later
// offset on it would be off by the batch's span.
//
// Here the leader sends the entries it still holds in raft's entry cache
// (the originals), which the replica applies before the compaction
// command. An entry old enough to be read back from the store comes
// rewritten, with no record left but its span; the partition package's
// TestReplicaGivenACompactionEmptiedBatchKeepsOffsets covers that path
// (it used to be skipped as invalid and shifted the offsets).
func TestLaggingReplicaAppliesABatchCompactionEmptied(t *testing.T) {
	c := startFaultCluster(t, func(cfg *engine.Config) { cfg.Storage.CompactionInterval = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topics := rewindv1connect.NewTopicServiceClient(http.DefaultClient, "http://"+c.addrs[1], connect.WithGRPC())
	for {
		_, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "kv", Config: &rewindv1.TopicConfig{
			Partitions: 1, ReplicationFactor: 3, Retention: &rewindv1.Retention{Cleanup: rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT}}})
		if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the first election
	}
	p := uint32(0)
	publish := func(via uint64, kvs ...string) {
		t.Helper()
		req := &rewindv1.PublishRequest{Topic: "kv"}
		for i := 0; i < len(kvs); i += 2 {
			req.Records = append(req.Records, &rewindv1.PublishRecord{Key: []byte(kvs[i]), Value: []byte(kvs[i+1]), Partition: &p})
		}
		for {
			_, err := c.publisher(via).Publish(ctx, req)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("publish: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	status := func(id uint64) *rewindv1.PartitionStatus {
		cl := rewindv1connect.NewClusterServiceClient(http.DefaultClient, "http://"+c.addrs[id], connect.WithGRPC())
		st, err := cl.GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
		if err != nil {
			return nil
		}
		for _, ps := range st.GetPartitions() {
			if ps.GetTopic() == "kv" && ps.GetHosted() {
				return ps
			}
		}
		return nil
	}
	publish(1, "warm", "0")
	var leader uint64
	for leader == 0 {
		if ps := status(1); ps != nil {
			leader = ps.GetLeader()
		}
		time.Sleep(20 * time.Millisecond)
	}
	lag, other := others(leader)
	c.net.setCut(lag, leader, true)
	c.net.setCut(lag, other, true)
	// A batch all of whose keys the next batch supersedes: compaction
	// empties it.
	publish(leader, "a", "1", "b", "1", "c", "1")
	publish(leader, "a", "2", "b", "2", "c", "2")
	publish(leader, "d", "1")
	// Wait until the leader compacted (a replay from the start no longer
	// returns a=1).
	sub := rewindv1connect.NewSubscribeServiceClient(http.DefaultClient, "http://"+c.addrs[leader], connect.WithGRPC())
	for compacted := false; !compacted; {
		if ctx.Err() != nil {
			t.Fatal("the leader never compacted")
		}
		compacted = true
		stream, err := sub.Subscribe(ctx, &rewindv1.SubscribeRequest{Topic: "kv", Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_Earliest{Earliest: true}},
			Stop: &rewindv1.StopPosition{Position: &rewindv1.StopPosition_End{End: true}}})
		if err != nil {
			t.Fatal(err)
		}
		for stream.Receive() {
			for _, r := range stream.Msg().GetRecords().GetRecords() {
				if string(r.GetKey()) == "a" && string(r.GetValue()) == "1" {
					compacted = false
				}
			}
		}
		stream.Close()
		if !compacted {
			time.Sleep(50 * time.Millisecond) // the next compaction pass
		}
	}
	c.net.setCut(lag, leader, false)
	c.net.setCut(lag, other, false)
	publish(leader, "e", "1")
	// Every replica ends at the same offset.
	for {
		l, g := status(leader), status(lag)
		if l != nil && g != nil && l.GetNextOffset() == g.GetNextOffset() && g.GetAppliedIndex() >= l.GetCommitIndex() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the lagging replica ends at %v, the leader at %v", g.GetNextOffset(), l.GetNextOffset())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
