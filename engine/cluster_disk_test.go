package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// TestLeaderLowOnDiskHandsItsPartitionsAway reproduces issue 14's fourth
// defect: node 3 is always below its --min-free-disk, so the partitions it
// leads refused every publish (ResourceExhausted) for as long as it kept
// leading, although nodes 1 and 2 could lead them. Now it hands them to
// another replica: every partition soon accepts publishes through every
// node. (Which node leads at a given moment is not asserted: the balancer
// may hand a partition back to node 3 once, which hands it on again.)
func TestLeaderLowOnDiskHandsItsPartitionsAway(t *testing.T) {
	urls := enginetest.StartCluster(t, 3, func(id uint64, c *engine.Config) {
		c.Storage.HousekeepingInterval = 10 * time.Millisecond
		c.Cluster.LeaderBalanceInterval = 200 * time.Millisecond
		if id == 3 {
			c.Storage.MinFreeBytes = 1 << 62
		}
	}).URLs()
	ctx := context.Background()
	topics := rewindv1connect.NewTopicServiceClient(http.DefaultClient, urls[0])
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 3, ReplicationFactor: 3}})
		if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create topic: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll: the cluster elects its first leaders
	}
	// Every partition accepts a publish through every node, soon (before,
	// the one node 3 led refused until the deadline).
	for p := range uint32(3) {
		for _, u := range urls {
			pub := rewindv1connect.NewPublishServiceClient(http.DefaultClient, u)
			req := &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: []byte(fmt.Sprint(p)), Partition: &p}}}
			var last error
			for {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, last = pub.Publish(cctx, req)
				cancel()
				if last == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("publish to partition %d through %s: %v", p, u, last)
				}
				time.Sleep(50 * time.Millisecond) // poll: leadership moves
			}
		}
	}
}
