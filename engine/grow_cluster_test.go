package engine_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestGrowTopicCluster: three members, a one-replica topic grown from 1 to
// 3 partitions through another member than the one that took the first
// publish, so the new partitions live on other nodes. Every member then
// publishes to every partition (forwarded to its leader), and the retry of
// an idempotency key stored before the growth, sent through a third
// member, is answered as the duplicate it is although its home moved.
func TestGrowTopicCluster(t *testing.T) {
	urls := enginetest.StartCluster(t, 3, nil).URLs()
	ctx := context.Background()
	c := make([]*client.Client, len(urls))
	for i, u := range urls {
		c[i] = client.New(u)
	}
	if _, err := c[0].CreateTopic(ctx, "grow", client.WithPartitions(1), client.WithReplicationFactor(1), client.WithKeyIndex(false)); err != nil {
		t.Fatal(err)
	}
	key := movedKey(1, 3)
	msg := client.Message{Value: []byte("paid"), IdempotencyKey: key}
	var first []client.Result
	eventually(t, "first publish", func() (err error) {
		first, err = c[0].Publish(ctx, "grow", msg)
		return err
	})
	tp, err := c[1].GrowTopic(ctx, "grow", 3)
	if err != nil {
		t.Fatal(err)
	}
	if tp.Partitions != 3 {
		t.Fatalf("grown topic has %d partitions", tp.Partitions)
	}
	for i := range c {
		for p := range uint32(3) {
			eventually(t, fmt.Sprintf("publish to partition %d through node %d", p, i+1), func() error {
				res, err := c[i].Publish(ctx, "grow", client.Message{Value: []byte("x"), Partition: &p})
				if err == nil && res[0].Partition != p {
					return fmt.Errorf("stored in partition %d", res[0].Partition)
				}
				return err
			})
		}
	}
	var again []client.Result
	eventually(t, "retry", func() (err error) {
		again, err = c[2].Publish(ctx, "grow", msg)
		return err
	})
	if !again[0].Duplicate || again[0].Partition != first[0].Partition || again[0].Offset != first[0].Offset {
		t.Errorf("retry after the growth: %+v; want a duplicate of partition %d offset %d", again[0], first[0].Partition, first[0].Offset)
	}
}

// movedKey returns an idempotency key whose home partition (FNV-1a modulo
// the count) differs under from and to partitions.
func movedKey(from, to uint32) string {
	home := func(k string, n uint32) uint32 {
		h := fnv.New32a()
		h.Write([]byte(k))
		return h.Sum32() % n
	}
	for i := 0; ; i++ {
		if k := fmt.Sprintf("order-%d", i); home(k, from) != home(k, to) {
			return k
		}
	}
}
