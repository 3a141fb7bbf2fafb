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
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/raftlog"
)

// harness runs partitions on a real raft host over a real (in-memory)
// Pebble store, with a clock the test controls.
type harness struct {
	t     testing.TB
	fs    vfs.FS
	db    *pebble.DB
	host  *raftlog.Host
	cache *Cache
	clock atomic.Int64
	parts []*Partition
}

func newHarness(t testing.TB, fs vfs.FS, cacheBytes int64) *harness {
	t.Helper()
	h := &harness{t: t, fs: fs, cache: NewCache(cacheBytes)}
	h.clock.Store(1000)
	h.open()
	return h
}

func (h *harness) open() {
	h.t.Helper()
	db, err := store.Open(store.Config{Dir: "data", FS: h.fs})
	if err != nil {
		h.t.Fatal(err)
	}
	host, err := raftlog.Open(raftlog.Config{NodeID: 1, DB: db})
	if err != nil {
		h.t.Fatal(err)
	}
	host.Start()
	h.db, h.host = db, host
	h.t.Cleanup(h.close)
}

func (h *harness) close() {
	if h.host != nil {
		h.host.Close()
		h.db.Close()
		h.host, h.db = nil, nil
	}
}

// restart closes the host and store and opens them again; the partitions
// must be added again.
func (h *harness) restart() {
	h.close()
	h.open()
	h.parts = nil
}

func (h *harness) add(index uint32, mutate func(*Config)) *Partition {
	h.t.Helper()
	cfg := Config{
		Group: uint64(index) + 2, TopicID: 1, Index: index, DB: h.db, Host: h.host, Cache: h.cache,
		Now: h.clock.Load, KeyIndex: true,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := Open(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.host.AddGroup(raftlog.GroupConfig{ID: cfg.Group, Voters: []uint64{1}, SM: p}); err != nil {
		h.t.Fatal(err)
	}
	h.parts = append(h.parts, p)
	return p
}

func recs(prefix string, n int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		out[i] = record.Record{Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return out
}

// readAll reads every visible record of p through a fresh reader.
func readAll(t *testing.T, p *Partition) (values []string, times []int64) {
	t.Helper()
	r := p.NewReader()
	defer r.Close()
	b := p.Bounds()
	for off := b.LogStart; off < b.Next; {
		batch, _, err := r.Read(off)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		it := batch.Records.Iter()
		var rec record.Record
		for it.Next(&rec) {
			o := batch.Base + uint64(rec.OffsetDelta)
			if o < off {
				continue
			}
			if o != off {
				t.Fatalf("offset %d follows %d", o, off-1)
			}
			values = append(values, string(rec.Value))
			times = append(times, batch.AppendTime)
			off++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return values, times
}

func TestAppendAssignsDenseOffsetsInOrder(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	ctx := context.Background()
	var mu sync.Mutex
	got := map[string]uint64{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				rs := recs(fmt.Sprintf("w%d-%d", w, j), 5)
				a, err := p.Append(ctx, rs)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, seg := range a.Segments {
					for k := range seg.Count {
						got[string(rs[seg.First+k].Value)] = seg.Base + uint64(k)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	const total = 8 * 20 * 5
	if b := p.Bounds(); b.Next != total || b.LogStart != 0 {
		t.Fatalf("bounds %+v, want end %d", b, total)
	}
	values, times := readAll(t, p)
	if len(values) != total {
		t.Fatalf("read %d records, want %d", len(values), total)
	}
	for off, v := range values {
		if got[v] != uint64(off) {
			t.Fatalf("record %q read at offset %d, acknowledged at %d", v, off, got[v])
		}
	}
	// An append's records are contiguous and in request order.
	for w := range 8 {
		for j := range 20 {
			first := got[fmt.Sprintf("w%d-%d-0", w, j)]
			for k := 1; k < 5; k++ {
				if got[fmt.Sprintf("w%d-%d-%d", w, j, k)] != first+uint64(k) {
					t.Fatalf("append w%d-%d is not contiguous", w, j)
				}
			}
		}
	}
	for i := 1; i < len(times); i++ {
		if times[i] < times[i-1] {
			t.Fatalf("append time went backwards at offset %d", i)
		}
	}
}

func TestAppendSplitsLargeAppendsAcrossBatches(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.MaxBatchBytes = 300 })
	rs := recs("big", 100)
	a, err := p.Append(context.Background(), rs)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Segments) < 5 {
		t.Fatalf("%d segments: the append was not split", len(a.Segments))
	}
	next := uint64(0)
	first := 0
	for _, s := range a.Segments {
		if s.Base != next || s.First != first {
			t.Fatalf("segment %+v does not continue at offset %d record %d", s, next, first)
		}
		next += uint64(s.Count)
		first += s.Count
	}
	if first != 100 {
		t.Fatalf("segments cover %d records", first)
	}
	values, _ := readAll(t, p)
	for i, v := range values {
		if v != fmt.Sprintf("big-%d", i) {
			t.Fatalf("offset %d holds %q", i, v)
		}
	}
}

// TestCacheAndDiskReadsAgree reads the same history from the tail cache and,
// with the cache emptied, from Pebble: the batches must be identical.
func TestCacheAndDiskReadsAgree(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	for i := range 30 {
		h.clock.Add(int64(i % 3)) // some batches share a time
		if _, err := p.Append(context.Background(), recs(fmt.Sprint(i), 1+i%4)); err != nil {
			t.Fatal(err)
		}
	}
	type view struct {
		Base, Span uint64
		Time       int64
		Values     []string
	}
	collect := func(wantCache bool) []view {
		r := p.NewReader()
		defer r.Close()
		var out []view
		for off := uint64(0); off < p.Bounds().Next; {
			b, cached, err := r.Read(off)
			if err != nil {
				t.Fatal(err)
			}
			if cached != wantCache {
				t.Fatalf("read at %d: from cache %v, want %v", off, cached, wantCache)
			}
			v := view{Base: b.Base, Span: uint64(b.Span), Time: b.AppendTime}
			it := b.Records.Iter()
			var rec record.Record
			for it.Next(&rec) {
				v.Values = append(v.Values, string(rec.Value))
			}
			out = append(out, v)
			off = b.End()
		}
		return out
	}
	fromCache := collect(true)
	h.cache.Drop(p.Group())
	fromDisk := collect(false)
	if diff := cmp.Diff(fromCache, fromDisk); diff != "" {
		t.Fatalf("cache and disk disagree (-cache +disk):\n%s", diff)
	}
	// A read in the middle of a batch returns the batch containing it.
	r := p.NewReader()
	defer r.Close()
	mid := fromDisk[5]
	if mid.Span > 1 {
		b, _, err := r.Read(mid.Base + 1)
		if err != nil || b.Base != mid.Base {
			t.Fatalf("read inside batch at %d: base %d, %v", mid.Base+1, b.Base, err)
		}
	}
}

func TestSeekTimeIsAnExactLowerBound(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	ctx := context.Background()
	// Batches at 1000 (3 records), 1000 (2), 1500 (1), then the clock goes
	// back to 1200: the batch keeps 1500.
	for _, step := range []struct {
		at int64
		n  int
	}{{1000, 3}, {1000, 2}, {1500, 1}, {1200, 2}, {2000, 1}} {
		h.clock.Store(step.at)
		if _, err := p.Append(ctx, recs("x", step.n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		t    int64
		want uint64
	}{{0, 0}, {1000, 0}, {1001, 5}, {1500, 5}, {1501, 8}, {2000, 8}, {2001, 9}} {
		got, err := p.SeekTime(c.t)
		if err != nil || got != c.want {
			t.Errorf("SeekTime(%d) = %d, %v; want %d", c.t, got, err, c.want)
		}
	}
	h.cache.Drop(p.Group())
	if tm, err := p.TimeOf(7); err != nil || tm != 1500 {
		t.Fatalf("TimeOf(7) = %d, %v; want 1500 (clamped, never backwards)", tm, err)
	}
}

func TestRestartKeepsHistoryAndContinuesOffsets(t *testing.T) {
	fs := vfs.NewMem()
	h := newHarness(t, fs, 64<<20)
	p := h.add(0, nil)
	ctx := context.Background()
	for i := range 5 {
		if _, err := p.Append(ctx, recs(fmt.Sprint("a", i), 3)); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := readAll(t, p)
	bounds := p.Bounds()
	h.restart()
	p = h.add(0, nil)
	if diff := cmp.Diff(bounds, p.Bounds()); diff != "" {
		t.Fatalf("bounds after restart (-before +after):\n%s", diff)
	}
	after, _ := readAll(t, p)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("history after restart (-before +after):\n%s", diff)
	}
	a, err := p.Append(ctx, recs("b", 2))
	if err != nil {
		t.Fatal(err)
	}
	if a.Segments[0].Base != bounds.Next {
		t.Fatalf("first offset after restart %d, want %d", a.Segments[0].Base, bounds.Next)
	}
}

func TestEnqueueWaitsForRoomThenGivesUp(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	// A partition the host does not run: nothing drains its queue.
	p, err := Open(Config{Group: 9, Index: 0, DB: h.db, Host: h.host, Cache: h.cache, Now: h.clock.Load, MaxPendingBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(context.Background(), recs("first", 1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	big := []record.Record{{Value: make([]byte, 200)}}
	if _, err := p.Enqueue(ctx, big); !errors.Is(err, ErrBusy) {
		t.Fatalf("Enqueue over the limit: %v, want ErrBusy", err)
	}
}

func TestStopFailsPendingAppendsAndReaders(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p, err := Open(Config{Group: 9, Index: 0, DB: h.db, Host: h.host, Cache: h.cache, Now: h.clock.Load})
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Enqueue(context.Background(), recs("x", 1))
	if err != nil {
		t.Fatal(err)
	}
	p.Stopped(raftlog.ErrStopped)
	if err := a.Wait(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("pending append after stop: %v", err)
	}
	if _, err := p.Enqueue(context.Background(), recs("y", 1)); !errors.Is(err, ErrStopped) {
		t.Fatalf("append after stop: %v", err)
	}
	if !errors.Is(p.Err(), ErrStopped) {
		t.Fatalf("Err() = %v", p.Err())
	}
}

func TestTimeWatermark(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	h.clock.Store(5000)
	if w := p.TimeWatermark(); w != 5000 {
		t.Fatalf("idle watermark %d, want the clock", w)
	}
	if _, err := p.Append(context.Background(), recs("x", 1)); err != nil {
		t.Fatal(err)
	}
	h.clock.Store(4000) // clocks go backwards; the watermark follows the clock
	if w := p.TimeWatermark(); w != 4000 {
		t.Fatalf("watermark %d, want 4000", w)
	}
}

func TestCacheEvictsOldestFirstWithinBudget(t *testing.T) {
	c := NewCache(1000)
	mk := func(base uint64) *Batch {
		var b record.Builder
		b.Reset(1, 1)
		b.Add(&record.Record{Value: make([]byte, 200)})
		rb, _ := record.Parse(b.Finish())
		return &Batch{Base: base, Span: 1, Records: rb}
	}
	for i := range 10 {
		c.Put(1, mk(uint64(i)))
		c.Put(2, mk(uint64(i)))
	}
	if c.Bytes() > 1000 {
		t.Fatalf("cache holds %d bytes over its budget", c.Bytes())
	}
	if c.Get(1, 0) != nil || c.Get(1, 9) == nil || c.Get(2, 9) == nil {
		t.Fatal("cache kept old batches or lost new ones")
	}
	c.Drop(1)
	if c.Get(1, 9) != nil || c.Get(2, 9) == nil {
		t.Fatal("Drop removed the wrong group")
	}
	_ = time.Second
}

// TestLeaderAppliedWaitsForAnEntryOfTheLeadersTerm: a leader reports that
// it may serve reads only once an entry of its own term is visible.
func TestLeaderAppliedWaitsForAnEntryOfTheLeadersTerm(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	if _, err := p.Append(context.Background(), recs("a", 3)); err != nil {
		t.Fatal(err)
	}
	if p.Leader() != 1 || !p.LeaderApplied() {
		t.Fatalf("sole voter after an append: leader %d, applied its term %v", p.Leader(), p.LeaderApplied())
	}
	st, _ := h.host.Status(p.Group())
	// As a newer term's leadership would look before its first entry
	// is applied.
	p.LeaderChanged(1, st.Term+1)
	if p.LeaderApplied() {
		t.Fatal("a leader of a term with nothing applied yet says it may serve reads")
	}
}
