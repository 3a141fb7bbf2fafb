package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// keyTo returns a record key routed to a partition for which ok holds.
func keyTo(t *testing.T, n uint32, ok func(uint32) bool) []byte {
	t.Helper()
	for i := range 10000 {
		if k := []byte(fmt.Sprint("key-", i)); ok(PartitionForKey(k, n)) {
			return k
		}
	}
	t.Fatal("no key found")
	return nil
}

// TestBindingWithoutItsAppendIsCompletedByTheRetry: a publisher whose key
// was bound, and that crashed before its record was appended, leaves a
// binding that survives the crash; its retry stores the record exactly
// once where the binding says, and other contents are refused meanwhile.
func TestBindingWithoutItsAppendIsCompletedByTheRetry(t *testing.T) {
	fs := vfs.NewCrashableMem()
	b := open(t, fs)
	ctx := context.Background()
	const n = 4
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: n, DedupeWindow: -1}); err != nil {
		t.Fatal(err)
	}
	ik := []byte("ik")
	home := PartitionForKey(ik, n)
	key := keyTo(t, n, func(p uint32) bool { return p != home })
	target := PartitionForKey(key, n)
	rec := record.Record{Key: key, Value: []byte("v"), IdempotencyKey: ik}
	lt, err := b.anyTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lt.parts[home].Bind(ctx, []partition.Binding{{Key: ik, Target: target, Hash: partition.PayloadHash(&rec)}}); err != nil {
		t.Fatal(err)
	}
	// The power goes out before the append.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	b.Close()
	b = open(t, crashed)
	defer b.Close()

	other := rec
	other.Key = keyTo(t, n, func(p uint32) bool { return p != home && p != target })
	_, _, err = b.Publish(ctx, "t", []PublishRecord{{Record: other}})
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Partition != target || !ce.OffsetUnknown {
		t.Fatalf("other contents before the retry: %v, want a conflict naming partition %d without an offset", err, target)
	}
	for i, want := range []bool{false, true} {
		_, res, err := b.Publish(ctx, "t", []PublishRecord{{Record: rec}})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Duplicate != want || res[0].Partition != target || res[0].Offset != 0 {
			t.Fatalf("attempt %d: %+v", i, res[0])
		}
	}
	_, _, err = b.Publish(ctx, "t", []PublishRecord{{Record: other}})
	if !errors.As(err, &ce) || ce.Partition != target || ce.OffsetUnknown || ce.Offset != 0 {
		t.Fatalf("other contents after the retry: %v", err)
	}
	if got := replayAll(t, b, "t"); len(got) != 1 {
		t.Fatalf("%d records stored, want 1", len(got))
	}
}

// TestConcurrentUsesOfOneKeyStoreOneRecord races publishes of one
// idempotency key routed to every partition: with other contents exactly
// one is stored and the others are conflicts naming it; with the same
// contents (explicit partitions) exactly one is stored and the others are
// duplicates of it.
func TestConcurrentUsesOfOneKeyStoreOneRecord(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	const n = 6
	for _, same := range []bool{false, true} {
		topic := fmt.Sprint("t-", same)
		if _, err := b.CreateTopic(ctx, TopicSpec{Name: topic, Partitions: n, DedupeWindow: -1}); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			res PublishResult
			err error
		}
		answers := make([]answer, 3*n)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := uint32(i % n)
				r := PublishRecord{Record: record.Record{Key: keyTo(t, n, func(q uint32) bool { return q == p }), Value: []byte("v"), IdempotencyKey: []byte("ik")}}
				if same {
					r.Key = []byte("k")
					r.Partition, r.HasPartition = p, true
				}
				_, res, err := b.Publish(ctx, topic, []PublishRecord{r})
				if err == nil {
					answers[i].res = res[0]
				}
				answers[i].err = err
			}()
		}
		wg.Wait()
		stored := 0
		var orig PublishResult
		for _, a := range answers {
			if a.err == nil && !a.res.Duplicate {
				stored++
				orig = a.res
			}
		}
		if stored != 1 {
			t.Fatalf("same contents %v: %d records stored: %+v", same, stored, answers)
		}
		for i, a := range answers {
			var ce *ConflictError
			switch {
			case a.err == nil && (a.res.Partition != orig.Partition || a.res.Offset != orig.Offset):
				t.Fatalf("same contents %v: answer %d %+v, original %+v", same, i, a.res, orig)
			case a.err != nil && (same || !errors.As(a.err, &ce) || ce.Partition != orig.Partition || ce.Offset != orig.Offset):
				t.Fatalf("same contents %v: answer %d: %v, original %+v", same, i, a.err, orig)
			}
		}
		if got := replayAll(t, b, topic); len(got) != 1 {
			t.Fatalf("same contents %v: %d records in the topic", same, len(got))
		}
	}
}
