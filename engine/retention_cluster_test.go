package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// replicaRecord is what a replica holds at one offset.
type replicaRecord struct {
	Offset uint64
	Time   int64
	Value  string
}

// readLocalReplica reads node url's own replica of partition 0, whole: the
// offsets it holds and its records.
func readLocalReplica(ctx context.Context, url, topic string) (start, end uint64, recs []replicaRecord, err error) {
	sub, err := client.New(url).Subscribe(ctx, topic, client.Partitions(0), client.FollowerReads(),
		client.From(client.Earliest()), client.Until(client.End()))
	if err != nil {
		return 0, 0, nil, err
	}
	defer sub.Close()
	for sub.Next() {
		switch ev := sub.Event().(type) {
		case *client.Started:
			start, end = ev.Partitions[0].LogStartOffset, ev.Partitions[0].EndOffset
		case *client.Records:
			for _, r := range ev.Records {
				recs = append(recs, replicaRecord{r.Offset, r.AppendTime.UnixNano(), string(r.Value)})
			}
		}
	}
	if n := len(recs); n > 0 {
		// The Started event's bounds may be unset (the stream's stop is
		// the end itself): the records say where the replica's are.
		start, end = recs[0].Offset, max(end, recs[n-1].Offset+1)
	}
	return start, end, recs, sub.Err()
}

// TestExactRetentionKeepsReplicasIdentical: 1,000 records published in one
// request to a replicated topic that keeps 100 (issue 18: it used to keep
// 0). Retention trims the batch inside, through raft: every replica ends
// with the same log start 900, end 1000, and the same 100 records, append
// times included.
func TestExactRetentionKeepsReplicasIdentical(t *testing.T) {
	urls := enginetest.StartCluster(t, 3, func(id uint64, c *engine.Config) {
		c.Storage.HousekeepingInterval = 10 * time.Millisecond
	}).URLs()
	ctx := context.Background()
	topics := rewindv1connect.NewTopicServiceClient(http.DefaultClient, urls[0])
	deadline := time.Now().Add(60 * time.Second) // liveness only
	for {
		_, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "r", Config: &rewindv1.TopicConfig{
			Partitions: 1, ReplicationFactor: 3, Retention: &rewindv1.Retention{MaxRecords: 100}}})
		if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create topic: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll: the cluster elects its first leaders
	}
	req := &rewindv1.PublishRequest{Topic: "r"}
	for i := range 1000 {
		req.Records = append(req.Records, &rewindv1.PublishRecord{Value: []byte(fmt.Sprint(i))})
	}
	pub := rewindv1connect.NewPublishServiceClient(http.DefaultClient, urls[0])
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := pub.Publish(cctx, req)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll: the partition elects its leader
	}
	var want []replicaRecord
	for i := 900; i < 1000; i++ {
		want = append(want, replicaRecord{Offset: uint64(i), Value: fmt.Sprint(i)})
	}
	var ref []replicaRecord
	for n, u := range urls {
		for {
			start, end, recs, err := readLocalReplica(ctx, u, "r")
			if err == nil && start == 900 && end == 1000 {
				if len(recs) > 0 {
					for i := range want { // one batch: one append time
						want[i].Time = recs[0].Time
					}
				}
				if diff := cmp.Diff(want, recs); diff != "" {
					t.Fatalf("node %d's replica (-want +got):\n%s", n+1, diff)
				}
				if ref != nil {
					if diff := cmp.Diff(ref, recs); diff != "" {
						t.Fatalf("node %d's replica differs from node 1's (-node 1 +node %d):\n%s", n+1, n+1, diff)
					}
				}
				ref = recs
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d's replica: [%d, %d) with %d records, %v; want [900, 1000)", n+1, start, end, len(recs), err)
			}
			time.Sleep(50 * time.Millisecond) // poll: retention runs every 10 ms, followers apply it
		}
	}
}
