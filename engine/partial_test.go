package engine_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// TestPublishAcknowledgesHealthyPartitionsWhenOneIsDown publishes one
// request, through node 1, to a partition node 1 keeps and to one kept by
// node 2 alone, which is down: the Go client gets the first partition's
// results and a *PartialError naming the other's messages (Unavailable),
// where before the whole call failed although half of it was stored.
func TestPublishAcknowledgesHealthyPartitionsWhenOneIsDown(t *testing.T) {
	cl := enginetest.StartCluster(t, 3, nil)
	urls := cl.URLs()
	ctx := context.Background()
	topics := rewindv1connect.NewTopicServiceClient(http.DefaultClient, urls[0])
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "p", Config: &rewindv1.TopicConfig{Partitions: 3, ReplicationFactor: 1}})
		if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create topic: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll: the cluster elects its first leaders
	}
	// Which partition lives where (one replica each).
	on := map[uint64]uint32{}
	for len(on) < 2 {
		st, err := rewindv1connect.NewClusterServiceClient(http.DefaultClient, urls[0]).GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ps := range st.GetPartitions() {
			if ps.GetTopic() == "p" && len(ps.GetReplicas()) == 1 {
				if n := ps.GetReplicas()[0]; n == 1 || n == 2 {
					on[n] = ps.GetPartition()
				}
			}
		}
		if len(on) < 2 && time.Now().After(deadline) {
			t.Fatalf("partitions on nodes 1 and 2: %v", on)
		} else if len(on) < 2 {
			time.Sleep(50 * time.Millisecond) // poll: placement recorded
		}
	}
	local, remote := on[1], on[2]
	c := client.New(strings.TrimPrefix(urls[0], "http://"))
	msgs := []client.Message{{Value: []byte("a"), Partition: &local}, {Value: []byte("b"), Partition: &remote}, {Value: []byte("c"), Partition: &local}}
	for {
		if _, err := c.Publish(ctx, "p", msgs...); err == nil {
			break // every partition has a leader
		} else if time.Now().After(deadline) {
			t.Fatalf("publish while every node runs: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll: leaders elected
	}
	cl.Stop(2)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := c.Publish(pctx, "p", msgs...)
	var pe *client.PartialError
	if !errors.As(err, &pe) {
		t.Fatalf("publish with node 2 down: %v, want a *client.PartialError", err)
	}
	if len(pe.Failed) != 1 || pe.Failed[0].Index != 1 || pe.Failed[0].Partition != remote {
		t.Fatalf("failed messages: %+v, want message 1 (partition %d)", pe.Failed, remote)
	}
	if code := connect.CodeOf(pe.Failed[0].Err); !slices.Contains([]connect.Code{connect.CodeUnavailable, connect.CodeDeadlineExceeded}, code) {
		t.Errorf("failed message's error: %v (%v), want Unavailable or DeadlineExceeded", pe.Failed[0].Err, code)
	}
	if res[0].Partition != local || res[2].Partition != local || res[2].Offset != res[0].Offset+1 || res[0].MessageID == "" {
		t.Errorf("acknowledged results: %+v", res)
	}
	if !strings.Contains(err.Error(), "partly failed") {
		t.Errorf("error text: %v", err)
	}
}
