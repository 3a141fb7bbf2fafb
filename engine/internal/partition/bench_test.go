package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/raftlog"
)

// BenchmarkAppend appends 100-byte records to one partition on the real
// filesystem (fsync per pass), from 4 concurrent appenders of 1000 records
// each, without the network: the cost of the raft and storage path alone.
func BenchmarkAppend(b *testing.B) { benchmarkAppend(b, false, false) }

// BenchmarkAppendRecordKeys is BenchmarkAppend with a record key on every
// record (10,000 keys in turn): the cost of the key index (a head lookup,
// a key row per record, a versions row per batch).
func BenchmarkAppendRecordKeys(b *testing.B) { benchmarkAppend(b, false, true) }

// benchPartition opens partition group 2 on a real raft host over a
// Pebble store on the real filesystem (fsync per pass), configured by
// mutate; the benchmark's end closes them.
func benchPartition(b *testing.B, mutate func(*Config)) (*Partition, *pebble.DB) {
	b.Helper()
	db, err := store.Open(store.Config{Dir: b.TempDir(), FS: vfs.Default})
	if err != nil {
		b.Fatal(err)
	}
	host, err := raftlog.Open(raftlog.Config{NodeID: 1, DB: db})
	if err != nil {
		b.Fatal(err)
	}
	host.Start()
	b.Cleanup(func() { host.Close(); db.Close() })
	cfg := Config{Group: 2, DB: db, Host: host, Cache: NewCache(64 << 20)}
	mutate(&cfg)
	p, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := host.AddGroup(raftlog.GroupConfig{ID: 2, Voters: []uint64{1}, SM: p}); err != nil {
		b.Fatal(err)
	}
	return p, db
}

func benchmarkAppend(b *testing.B, keyed, recordKeys bool) {
	p, db := benchPartition(b, func(c *Config) {
		c.KeyIndex = recordKeys
		if keyed {
			c.DedupeWindow = 24 * time.Hour
		}
	})
	value := make([]byte, 100)
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i].Value = value
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(recs) * len(value)))
	b.ResetTimer()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]record.Record, len(recs))
			copy(mine, recs)
			for n := range work {
				if keyed {
					for i := range mine {
						mine[i].IdempotencyKey = fmt.Appendf(mine[i].IdempotencyKey[:0], "key-%d-%d", n, i)
					}
				}
				if recordKeys {
					for i := range mine {
						mine[i].Key = fmt.Appendf(mine[i].Key[:0], "entity-%d", (n*len(mine)+i)%10_000)
					}
				}
				if _, err := p.Append(context.Background(), mine); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for n := range b.N {
		work <- n
	}
	close(work)
	wg.Wait()
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
	if recordKeys {
		// The index's logical size (keys and values of its rows, before
		// Pebble's compression) per record.
		var n int
		for _, prefix := range []byte{keys.KeyIndex, keys.Versions} {
			lo, hi := keys.GroupSpan(prefix, 2)
			it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
			if err != nil {
				b.Fatal(err)
			}
			for valid := it.First(); valid; valid = it.Next() {
				n += len(it.Key()) + len(it.Value())
			}
			it.Close()
		}
		b.ReportMetric(float64(n)/float64(b.N*len(recs)), "index-B/record")
	}
}

// BenchmarkAppendKeyed is BenchmarkAppend with an idempotency key on every
// record and a 24 h dedupe window: the cost of deduplication (an index
// lookup when proposing, another at apply, two rows written per record).
func BenchmarkAppendKeyed(b *testing.B) {
	benchmarkAppend(b, true, false)
}

// BenchmarkRetention10M removes 10 M records (10,000 batches of 1,000) with
// one retention decision and reports how long the truncate command takes
// from proposal to applied: the foreground cost of retention (range
// deletions; the space is reclaimed by Pebble's compactions later).
// Run with -benchtime 1x: the setup writes 10 M records.
func BenchmarkRetention10M(b *testing.B) {
	p, _ := benchPartition(b, func(c *Config) { c.MaxBatchBytes = 200 << 10 })
	value := make([]byte, 100)
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i].Value = value
	}
	const total = 10_000_000
	for done := 0; done < total+100_000; done += len(recs) {
		if _, err := p.Append(context.Background(), recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var worst time.Duration
	for i := range b.N {
		x := uint64(total) + uint64(i)*1000
		if x > p.Bounds().Next-1000 {
			break
		}
		t0 := time.Now()
		if err := p.Truncate(context.Background(), x); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(t0))
	}
	b.ReportMetric(float64(worst)/float64(time.Millisecond), "ms/truncate")
	if p.Bounds().LogStart < total {
		b.Fatalf("log start %d", p.Bounds().LogStart)
	}
}

// BenchmarkPlanRetentionBytes plans a bytes limit over 20,000 batches of
// one 100-byte record, the limit keeping 90 % of them: the planner's cost
// per housekeeping pass. "forward" is a partition whose state counts its
// payload (it walks the 10 % that goes); "backward" one whose state
// predates that (it walks the 90 % that stays, back from the end).
func BenchmarkPlanRetentionBytes(b *testing.B) {
	h := newHarness(b, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.Policy = Policy{Delete: true, MaxBytes: 18_000 * 100} })
	rec := []record.Record{{Value: make([]byte, 100)}}
	ctx := context.Background()
	for range 20_000 {
		if _, err := p.Append(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
	plan := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if x, ok, err := p.PlanRetention(h.clock.Load()); err != nil || !ok || x != 2000 {
				b.Fatalf("plan: %d %v %v", x, ok, err)
			}
		}
	}
	b.Run("forward", plan)
	st := p.Bounds().encode()[:stateV2Size]
	st[0] = 2
	if err := h.db.Set(keys.PartitionStateKey(p.Group()), st, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("backward", plan)
}

// BenchmarkConditionalAppend runs load-decide-append loops: each of
// 16 writers picks one of `keys` keys, reads its head (KeyHead) and
// appends one record expecting that version. It reports appends per
// second and the share refused (another writer appended first). One
// partition on one node, durable (fsync per pass), no network: the
// engine's ceiling, not a client's figure.
func BenchmarkConditionalAppend(b *testing.B) {
	for _, keys := range []int{10_000, 10} {
		b.Run(fmt.Sprint("keys=", keys), func(b *testing.B) {
			p, _ := benchPartition(b, func(c *Config) { c.KeyIndex = true })
			var refused atomic.Int64
			work := make(chan int)
			var wg sync.WaitGroup
			b.ResetTimer()
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := range work {
						key := []byte(fmt.Sprint("entity-", n*7919%keys))
						c := &Conditions{Keys: []KeyCondition{{Key: key, Expect: ExpectNone}}}
						if h, ok, err := p.KeyHead(key); err != nil {
							b.Error(err)
						} else if ok {
							c.Keys[0] = KeyCondition{Key: key, Expect: ExpectVersion, Version: h.Version}
						}
						a, err := p.EnqueueIf(context.Background(), []record.Record{{Key: key, Value: []byte("event")}}, c)
						if err == nil {
							err = a.Wait(context.Background())
						}
						if errors.Is(err, ErrCondition) {
							refused.Add(1)
						} else if err != nil {
							b.Error(err)
						}
					}
				}()
			}
			for n := range b.N {
				work <- n
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			b.ReportMetric(100*float64(refused.Load())/float64(b.N), "%refused")
		})
	}
}

// BenchmarkAppendOne appends one 100-byte record at a time, each waiting
// for the last (fsync per append), without the network: the latency of
// the raft and storage path for an idle publisher (ns/op is one durable,
// applied append).
func BenchmarkAppendOne(b *testing.B) {
	p, _ := benchPartition(b, func(*Config) {})
	recs := []record.Record{{Value: make([]byte, 100)}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := p.Append(context.Background(), recs); err != nil {
			b.Fatal(err)
		}
	}
}
