package offline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/engine/offline"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestReadMatchesWhatWasServed: a stopped node's partitions, read from its
// data directory, hold exactly what a replay served while it ran: offsets,
// keys, values, idempotency keys, append times and key versions (records
// with and without keys, one publish per batch).
func TestReadMatchesWhatWasServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := enginetest.StartNode(t, engine.Config{})
	c := client.New(n.URL)
	if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		p := uint32(i % 2)
		msg := client.Message{Key: []byte(fmt.Sprintf("k%d", i%3)), Value: []byte(fmt.Sprintf("v%d", i)), Partition: &p}
		if i%4 == 0 {
			msg.Key = nil // keyless: no key version
		} else {
			msg.IdempotencyKey = fmt.Sprintf("id-%d", i)
		}
		if _, err := c.Publish(ctx, "t", msg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Publish(ctx, "other", client.Message{Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	served := map[uint32][]offline.Record{}
	for p := range uint32(2) {
		sub, err := c.Subscribe(ctx, "t", client.Partitions(p), client.From(client.Earliest()), client.Until(client.End()))
		if err != nil {
			t.Fatal(err)
		}
		for r, err := range sub.Records() {
			if err != nil {
				t.Fatal(err)
			}
			served[p] = append(served[p], offline.Record{Offset: r.Offset, Key: r.Key, Value: r.Value,
				IdempotencyKey: r.IdempotencyKey, AppendTime: r.AppendTime.UnixNano(), KeyVersion: r.KeyVersion})
		}
		sub.Close()
	}
	if _, err := offline.Read(n.Config.Dir); err == nil {
		t.Fatal("read a running node's store")
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	parts, err := offline.Read(n.Config.Dir, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 {
		t.Fatalf("%d partitions, want 2: %+v", len(parts), parts)
	}
	for _, p := range parts {
		if p.Topic != "t" || p.Start != 0 || p.End != 15 {
			t.Errorf("partition %s/%d holds [%d, %d), want t [0, 15)", p.Topic, p.Partition, p.Start, p.End)
		}
		opt := cmp.Transformer("nil", func(b []byte) string { return string(b) })
		if d := cmp.Diff(served[p.Partition], p.Records, opt); d != "" {
			t.Errorf("partition %d: served (-) and stored (+) differ:\n%s", p.Partition, d)
		}
	}
	all, err := offline.Read(n.Config.Dir)
	if err != nil || len(all) != 3 || all[0].Topic != "other" {
		t.Fatalf("every topic: %d partitions (%v)", len(all), err)
	}
}
