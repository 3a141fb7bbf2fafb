package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// routedTo is the server's routing hash (FNV-1a 32 of the key modulo the
// partitions).
func routedTo(key string, n uint32) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32() % n
}

// TestClusterIdempotencyKeysAreTopicWide: a key's binding lives in its home
// partition's raft group, so it holds through every node (binding locally
// on the home partition's leader, over the peer Bind call elsewhere) and
// across leader changes of the home partition.
func TestClusterIdempotencyKeysAreTopicWide(t *testing.T) {
	c := startCluster(t, 3)
	const n = 3
	c.nodes[0].ok(t, nil, "topic", "create", "ik", "--partitions", fmt.Sprint(n), "--replication-factor", "3")
	ctx := context.Background()
	const ik = "ik-1"
	home := routedTo(ik, n)
	keyFor := func(ok func(p uint32) bool) string {
		for i := 0; ; i++ {
			if k := fmt.Sprint("key-", i); ok(routedTo(k, n)) {
				return k
			}
		}
	}
	k1 := keyFor(func(p uint32) bool { return p != home })
	third := 3 - home - routedTo(k1, n) // the partition neither home nor k1's
	k2 := keyFor(func(p uint32) bool { return p == third })
	first, err := client.New(c.Addrs[1]).Publish(ctx, "ik", client.Message{Key: []byte(k1), Value: []byte("v"), IdempotencyKey: ik})
	if err != nil {
		t.Fatal(err)
	}
	orig := first[0]
	check := func(round string) {
		t.Helper()
		// No waiting for replicas: a node whose replica of the original's
		// partition lags asks that partition's leader.
		for _, addr := range c.Addrs {
			cl := client.New(addr)
			_, err := cl.Publish(ctx, "ik", client.Message{Key: []byte(k2), Value: []byte("v"), IdempotencyKey: ik})
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
				t.Fatalf("%s, via %s: other key: %v, want FailedPrecondition", round, addr, err)
			}
			var d *rewindv1.IdempotencyConflict
			for _, det := range ce.Details() {
				if v, err := det.Value(); err == nil {
					d, _ = v.(*rewindv1.IdempotencyConflict)
				}
			}
			if d == nil || d.GetMessageId() != orig.MessageID {
				t.Fatalf("%s, via %s: conflict %v, want it to name %s", round, addr, d, orig.MessageID)
			}
			for _, p := range []uint32{home, third} {
				res, err := cl.Publish(ctx, "ik", client.Message{Key: []byte(k1), Value: []byte("v"), IdempotencyKey: ik, Partition: &p})
				if err != nil {
					t.Fatalf("%s, via %s: retry to partition %d: %v", round, addr, p, err)
				}
				if !res[0].Duplicate || res[0].MessageID != orig.MessageID {
					t.Fatalf("%s, via %s: retry to partition %d: %+v, want a duplicate of %s", round, addr, p, res[0], orig.MessageID)
				}
			}
		}
	}
	check("first leader")
	for target := uint64(1); target <= 3; target++ {
		for c.leaderOf(t, "ik", home) != target {
			c.nodes[0].cli(t, nil, "cluster", "transfer-leader", "ik", fmt.Sprint(home), fmt.Sprint(target))
			time.Sleep(100 * time.Millisecond) // poll interval
		}
		check(fmt.Sprintf("home partition led by node %d", target))
	}
	for _, addr := range c.Addrs {
		c.waitCaughtUp(t, addr)
		if got := replayDense(t, addr, "ik", client.FollowerReads()); len(got[orig.Partition]) != 1 || len(got) != 1 {
			t.Fatalf("replica on %s holds %v, want the one record", addr, got)
		}
	}
}
