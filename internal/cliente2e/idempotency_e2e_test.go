package cliente2e_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"testing"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// partitionOf is the server's routing hash (FNV-1a 32 of the key, modulo
// the partitions), repeated here so the test can pick keys that land in
// different partitions.
func partitionOf(key string, n uint32) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32() % n
}

// keyIn returns a key that routes to partition p and none of avoid's.
func keyIn(t *testing.T, n uint32, ok func(p uint32) bool) string {
	t.Helper()
	for i := range 10000 {
		if k := fmt.Sprint("key-", i); ok(partitionOf(k, n)) {
			return k
		}
	}
	t.Fatal("no key found")
	return ""
}

func conflictOf(t *testing.T, err error) *rewindv1.IdempotencyConflict {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		t.Fatalf("got %v, want FailedPrecondition", err)
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if c, ok := v.(*rewindv1.IdempotencyConflict); ok {
				return c
			}
		}
	}
	t.Fatalf("no IdempotencyConflict detail in %v", err)
	return nil
}

// TestIdempotencyKeysAreTopicWide is issue 13's scenario: an idempotency key
// used once in a topic may not store a second record in another partition
// (a different key routes it elsewhere), and a retry of the same record sent
// to another partition is answered with the original.
func TestIdempotencyKeysAreTopicWide(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	const n = 8
	if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(n)); err != nil {
		t.Fatal(err)
	}
	const ik = "ik-1"
	home := partitionOf(ik, n)
	// The first record's key routes it away from the key's home partition,
	// the second's to a third partition.
	k1 := keyIn(t, n, func(p uint32) bool { return p != home })
	first, err := c.Publish(ctx, "t", client.Message{Key: []byte(k1), Value: []byte("v"), IdempotencyKey: ik})
	if err != nil {
		t.Fatal(err)
	}
	orig := first[0]
	k2 := keyIn(t, n, func(p uint32) bool { return p != home && p != orig.Partition })

	// `rewind publish t x --idempotency-key ik-1 --key other`: refused,
	// naming where ik-1 was used.
	_, err = c.Publish(ctx, "t", client.Message{Key: []byte(k2), Value: []byte("v"), IdempotencyKey: ik})
	if d := conflictOf(t, err); d.GetPartition() != orig.Partition || d.GetOffset() != orig.Offset || d.GetMessageId() != orig.MessageID {
		t.Fatalf("conflict names partition %d offset %d (%s), want %d %d (%s)", d.GetPartition(), d.GetOffset(), d.GetMessageId(), orig.Partition, orig.Offset, orig.MessageID)
	}
	// Other contents in the original partition: refused as before.
	_, err = c.Publish(ctx, "t", client.Message{Key: []byte(k1), Value: []byte("changed"), IdempotencyKey: ik})
	if d := conflictOf(t, err); d.GetPartition() != orig.Partition || d.GetOffset() != orig.Offset {
		t.Fatalf("conflict in the original partition names %d/%d", d.GetPartition(), d.GetOffset())
	}
	// Other contents sent to the key's home partition: refused.
	hp := home
	_, err = c.Publish(ctx, "t", client.Message{Value: []byte("changed"), IdempotencyKey: ik, Partition: &hp})
	if d := conflictOf(t, err); d.GetPartition() != orig.Partition {
		t.Fatalf("conflict in the home partition names partition %d", d.GetPartition())
	}

	// The identical record sent to other partitions (the home one, a third
	// one, the original one) is a duplicate of the original.
	third := keyIn(t, n, func(p uint32) bool { return p != home && p != orig.Partition })
	for _, p := range []uint32{home, partitionOf(third, n), orig.Partition} {
		res, err := c.Publish(ctx, "t", client.Message{Key: []byte(k1), Value: []byte("v"), IdempotencyKey: ik, Partition: &p})
		if err != nil {
			t.Fatalf("retry to partition %d: %v", p, err)
		}
		if got := res[0]; !got.Duplicate || got.Partition != orig.Partition || got.Offset != orig.Offset || got.MessageID != orig.MessageID {
			t.Fatalf("retry to partition %d: %+v, want a duplicate of %+v", p, got, orig)
		}
	}

	// A keyless record lands in its key's home partition; the same key on
	// a keyed record is then refused, naming it.
	keyless, err := c.Publish(ctx, "t", client.Message{Value: []byte("w"), IdempotencyKey: "ik-2"})
	if err != nil {
		t.Fatal(err)
	}
	k3 := keyIn(t, n, func(p uint32) bool { return p != keyless[0].Partition })
	_, err = c.Publish(ctx, "t", client.Message{Key: []byte(k3), Value: []byte("w"), IdempotencyKey: "ik-2"})
	if d := conflictOf(t, err); d.GetMessageId() != keyless[0].MessageID {
		t.Fatalf("conflict names %s, want %s", d.GetMessageId(), keyless[0].MessageID)
	}

	if got := readAll(t, c, "t", client.Until(client.End())); len(got) != 2 {
		t.Fatalf("%d records stored, want 2: %v", len(got), values(got))
	}
}
