package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// TestGrowTopic grows a topic and checks what the count allows: the new
// partitions take records (by number, by key, keyless), and shrinking, a
// count past the cap, the same count, and a topic with the key index get
// the answers GrowTopic documents.
func TestGrowTopic(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "g", Partitions: 2, NoKeyIndex: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, _, err := b.Publish(ctx, "g", seqLines(1000+i, 1001+i)); err != nil {
			t.Fatal(err)
		}
	}
	tp, err := b.GrowTopic(ctx, "g", 4)
	if err != nil {
		t.Fatal(err)
	}
	if tp.Partitions != 4 || len(tp.Groups) != 4 || len(tp.Epochs) != 1 || tp.Epochs[0].Partitions != 2 {
		t.Fatalf("grown topic: %d partitions, groups %v, epochs %v", tp.Partitions, tp.Groups, tp.Epochs)
	}
	if _, parts, err := b.DescribeTopic("g"); err != nil || len(parts) != 4 {
		t.Fatalf("describe after growth: %d partitions, %v", len(parts), err)
	}
	// By number: partition 3 exists.
	_, res, err := b.Publish(ctx, "g", []PublishRecord{{Record: record.Record{Value: []byte("x")}, Partition: 3, HasPartition: true}})
	if err != nil || res[0].Partition != 3 {
		t.Fatalf("publish to partition 3: %v %v", res, err)
	}
	// Keyless: the new partitions get their share from now on (they start
	// level with the old ones, not at zero).
	before := partitionCounts(t, b, "g")
	for i := range 400 {
		if _, _, err := b.Publish(ctx, "g", seqLines(i, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	after := partitionCounts(t, b, "g")
	for p := range after {
		after[p] -= before[p]
	}
	checkEven(t, "400 keyless publishes after growing to 4", after)
	// By key: keys hash over 4.
	for i := range 20 {
		key := fmt.Appendf(nil, "key-%d", i)
		_, res, err := b.Publish(ctx, "g", []PublishRecord{{Record: record.Record{Key: key, Value: []byte("v")}}})
		if err != nil || res[0].Partition != PartitionForKey(key, 4) {
			t.Fatalf("key %s went to %v (%v), want partition %d", key, res, err, PartitionForKey(key, 4))
		}
	}

	for _, c := range []struct {
		name       string
		topic      string
		partitions uint32
		is         error
		msg        string
	}{
		{"shrink", "g", 3, ErrInvalid, `topic "g" has 4 partitions; partitions can be added, never removed`},
		{"past the cap", "g", MaxPartitions + 1, ErrInvalid, "1025 partitions: use 1 to 1024"},
		{"zero", "g", 0, ErrInvalid, "0 partitions: use 1 to 1024"},
		{"no topic", "nope", 8, ErrNoTopic, "nope"},
		{"key index", "events", 2, ErrFailedPrecondition, "keeps the key index"},
	} {
		if c.topic == "events" {
			if _, err := b.CreateTopic(ctx, TopicSpec{Name: "events", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := b.GrowTopic(ctx, c.topic, c.partitions)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: GrowTopic(%q, %d) = %v; want %v containing %q", c.name, c.topic, c.partitions, err, c.is, c.msg)
		}
	}
	// The same count: nothing changes (a repeated request).
	if again, err := b.GrowTopic(ctx, "g", 4); err != nil || again.Partitions != 4 || len(again.Epochs) != 1 {
		t.Fatalf("growing to the same count: %v, %v", again, err)
	}
}

// keyHomedAway returns an idempotency key (with prefix) whose home under
// to partitions is not its home under from.
func keyHomedAway(prefix string, from, to uint32) []byte {
	for i := 0; ; i++ {
		k := fmt.Appendf(nil, "%s-%d", prefix, i)
		if PartitionForKey(k, from) != PartitionForKey(k, to) {
			return k
		}
	}
}

// TestGrowKeepsIdempotencyKeys publishes records with idempotency keys,
// grows the topic so that the keys' home partitions change, and retries
// them: each retry is a duplicate answered with the original's partition
// and offset (not stored a second time in the key's new home). Once the
// dedupe window and growGrace have passed since the growth, only the new
// homes are asked (a retry then is a new record, as after any window).
func TestGrowKeepsIdempotencyKeys(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC).UnixNano())
	b, err := Open(Config{Dir: "data", FS: vfs.NewMem(), Cluster: ClusterConfig{TickInterval: 10 * time.Millisecond},
		Clock: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "g", Partitions: 2, NoKeyIndex: true, DedupeWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// A keyless record (stored in its key's home), and a keyed record
	// whose key routes it away from its idempotency key's home (bound
	// there first), each with a key whose home moves when 2 become 5.
	keyless := PublishRecord{Record: record.Record{Value: []byte("a"), IdempotencyKey: keyHomedAway("keyless", 2, 5)}}
	keyed := PublishRecord{Record: record.Record{Key: keyHomedAway("customer", 2, 5), Value: []byte("b"), IdempotencyKey: keyHomedAway("keyed", 2, 5)}}
	recs := []PublishRecord{keyless, keyed}
	_, first, err := b.Publish(ctx, "g", recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.GrowTopic(ctx, "g", 3); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(time.Minute))
	if _, err := b.GrowTopic(ctx, "g", 5); err != nil { // two epochs behind
		t.Fatal(err)
	}
	now.Add(int64(time.Minute))
	for i, r := range recs {
		_, res, err := b.Publish(ctx, "g", []PublishRecord{r})
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Duplicate || res[0].Partition != first[i].Partition || res[0].Offset != first[i].Offset {
			t.Errorf("record %d retried after the growth: %+v; want a duplicate of partition %d offset %d", i, res[0], first[i].Partition, first[i].Offset)
		}
	}
	// Different contents under the same key are still a conflict.
	other := keyless
	other.Value = []byte("other")
	if _, _, err := b.Publish(ctx, "g", []PublishRecord{other}); !errors.Is(err, partition.ErrConflict) {
		t.Errorf("other contents under a key stored before the growth: %v; want a conflict", err)
	}
	// A key first published after the growth, then retried.
	fresh := PublishRecord{Record: record.Record{Value: []byte("c"), IdempotencyKey: keyHomedAway("fresh", 2, 5)}}
	_, f1, err := b.Publish(ctx, "g", []PublishRecord{fresh})
	if err != nil {
		t.Fatal(err)
	}
	_, f2, err := b.Publish(ctx, "g", []PublishRecord{fresh})
	if err != nil || !f2[0].Duplicate || f2[0].Offset != f1[0].Offset || f2[0].Partition != f1[0].Partition {
		t.Errorf("a key published after the growth, retried: %+v then %+v (%v)", f1[0], f2[0], err)
	}
	total := func() (n uint64) {
		for _, c := range partitionCounts(t, b, "g") {
			n += c
		}
		return n
	}
	if got := total(); got != 3 {
		t.Errorf("the topic holds %d records; want 3 (the retries stored nothing)", got)
	}
	// After the window and the grace, the old homes are no longer asked:
	// the record is stored again, in its key's new home.
	now.Add(int64(time.Hour + growGrace + time.Minute))
	_, res, err := b.Publish(ctx, "g", []PublishRecord{keyless})
	if err != nil || res[0].Duplicate || res[0].Partition != PartitionForKey(keyless.IdempotencyKey, 5) {
		t.Errorf("retry after the window: %+v (%v); want stored in partition %d", res, err, PartitionForKey(keyless.IdempotencyKey, 5))
	}
}

// TestGrowRebalancesGroups grows a topic under a live group member: the
// member is given the new partitions and reads what is published there.
func TestGrowRebalancesGroups(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "g", Partitions: 2, NoKeyIndex: true}); err != nil {
		t.Fatal(err)
	}
	m := join(t, b, "readers", "g")
	defer m.leave()
	if got := partsOf(m.next(t)); !slices.Equal(got, []uint32{0, 1}) {
		t.Fatalf("first assignment %v", got)
	}
	if _, err := b.GrowTopic(ctx, "g", 4); err != nil {
		t.Fatal(err)
	}
	var got []uint32
	for !slices.Contains(got, 3) {
		got = append(got, partsOf(m.next(t))...)
	}
	if _, _, err := b.Publish(ctx, "g", []PublishRecord{{Record: record.Record{Value: []byte("in-3")}, Partition: 3, HasPartition: true}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m.sink.mu.Lock()
		seen := false
		for _, e := range m.sink.events {
			for _, r := range e.GetRecords().GetRecords() {
				seen = seen || string(r.GetValue()) == "in-3"
			}
		}
		m.sink.mu.Unlock()
		if seen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the member did not receive the record published to the new partition 3")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
