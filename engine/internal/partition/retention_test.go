package partition

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/raftlog"
)

// fill appends n batches of per records each, one clock step apart.
func fill(t *testing.T, h *harness, p *Partition, n, per int) {
	t.Helper()
	for i := range n {
		h.clock.Add(10)
		if _, err := p.Append(context.Background(), recs(fmt.Sprintf("b%d", i), per)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRetentionByRecordsAgeAndBytes(t *testing.T) {
	fs := vfs.NewMem()
	h := newHarness(t, fs, 64<<20)
	p := h.add(0, func(c *Config) { c.Policy = Policy{Delete: true, MaxRecords: 25} })
	ctx := context.Background()
	fill(t, h, p, 10, 5) // offsets [0, 50) in batches of 5
	x, ok, err := p.PlanRetention(h.clock.Load())
	if err != nil || !ok || x != 25 {
		t.Fatalf("plan by records: %d %v %v, want 25", x, ok, err)
	}
	before := p.Bounds()
	if err := p.Truncate(ctx, x); err != nil {
		t.Fatal(err)
	}
	b := p.Bounds()
	if b.LogStart != 25 || b.Next != 50 || b.Bytes >= before.Bytes || b.FirstTime <= before.FirstTime {
		t.Fatalf("after truncating at 25: %+v (before %+v)", b, before)
	}
	// The records below are gone from every index and from the raft log.
	r := p.NewReader()
	if _, _, err := r.Read(24); !errors.Is(err, ErrBelowStart) {
		t.Fatalf("read below the log start: %v", err)
	}
	r.Close()
	h.cache.Drop(p.Group())
	if tm, err := p.TimeOf(25); err != nil || tm != b.FirstTime {
		t.Fatalf("TimeOf(25) = %d, %v", tm, err)
	}
	if off, _ := p.SeekTime(0); off != 25 {
		t.Fatalf("a time seek before everything gives %d, want the log start", off)
	}
	if off, _ := p.SeekTime(b.FirstTime + 1); off != 30 {
		t.Fatalf("time seek after retention: %d, want 30 (exact)", off)
	}
	if _, err := raftlog.ReadEntryData(h.db, p.Group(), 2); err == nil {
		t.Fatal("the raft entry of a removed batch is still stored")
	}
	values, _ := readAll(t, p)
	if len(values) != 25 || values[0] != "b5-0" {
		t.Fatalf("kept %d records from %q", len(values), values[0])
	}
	// Age: keep what was appended in the last 25 clock units (batches 7..9,
	// from offset 35).
	p.SetPolicy(Policy{Delete: true, MaxAge: 25})
	x, ok, _ = p.PlanRetention(h.clock.Load())
	if !ok || x != 35 {
		t.Fatalf("plan by age: %d %v, want 35", x, ok)
	}
	// Bytes: at most two batches' worth.
	p.SetPolicy(Policy{Delete: true, MaxBytes: b.Bytes / 5 * 2})
	x, ok, _ = p.PlanRetention(h.clock.Load())
	if !ok || x != 40 {
		t.Fatalf("plan by bytes: %d %v, want 40", x, ok)
	}
	if err := p.Truncate(ctx, x); err != nil {
		t.Fatal(err)
	}
	// Stale or odd plans change nothing.
	if err := p.Truncate(ctx, 30); err != nil { // below the log start: a no-op
		t.Fatal(err)
	}
	if err := p.Truncate(ctx, 42); !errors.Is(err, ErrStalePlan) {
		t.Fatalf("truncate inside a batch: %v", err)
	}
	// Offsets continue and survive a restart, as does the log start.
	a, err := p.Append(ctx, recs("after", 1))
	if err != nil || a.Segments[0].Base != 50 {
		t.Fatalf("append after retention: %+v %v", a.Segments, err)
	}
	want := p.Bounds()
	h.restart()
	p = h.add(0, nil)
	if diff := cmp.Diff(want, p.Bounds()); diff != "" {
		t.Fatalf("bounds after restart (-want +got):\n%s", diff)
	}
	if v, _ := readAll(t, p); len(v) != 11 {
		t.Fatalf("%d records after restart, want 11", len(v))
	}
	// Everything can go: an empty partition that keeps its next offset.
	if err := p.Truncate(ctx, p.Bounds().Next); err != nil {
		t.Fatal(err)
	}
	if b := p.Bounds(); !b.Empty() || b.Next != 51 || b.Bytes != 0 {
		t.Fatalf("after removing everything: %+v", b)
	}
	h.restart()
	p = h.add(0, nil)
	if b := p.Bounds(); !b.Empty() || b.Next != 51 {
		t.Fatalf("empty partition after restart: %+v", b)
	}
}

func kv(key, value string) record.Record {
	r := record.Record{Value: []byte(value)}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

func TestCompactionKeepsTheLatestPerKey(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.Policy = Policy{Compact: true, DeleteRetention: 100} })
	ctx := context.Background()
	h.clock.Store(1000)
	for _, batch := range [][]record.Record{
		{kv("a", "a1"), kv("b", "b1"), kv("", "x1")},
		{kv("a", "a2"), kv("c", "c1")},
		{kv("b", ""), kv("a", "a3")}, // b deleted (tombstone)
		{kv("c", "c2")},
	} {
		if _, err := p.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	compact := func() {
		t.Helper()
		plan, err := p.PlanCompaction(h.clock.Load(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range plan.Cmds {
			if err := p.Compact(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	type rec struct {
		Off   uint64
		Value string
	}
	stored := func() []rec {
		t.Helper()
		var out []rec
		rd := p.NewReader()
		defer rd.Close()
		for off := p.Bounds().LogStart; off < p.Bounds().Next; {
			b, _, err := rd.Read(off)
			if err != nil {
				t.Fatal(err)
			}
			it := b.Records.Iter()
			var r record.Record
			for it.Next(&r) {
				out = append(out, rec{b.Base + uint64(r.OffsetDelta), string(r.Value)})
			}
			off = b.End()
		}
		return out
	}
	bytesBefore := p.Bounds().Bytes
	compact()
	// The tombstone of b is younger than its delete retention: it stays.
	want := []rec{{2, "x1"}, {5, ""}, {6, "a3"}, {7, "c2"}}
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Fatalf("after compaction (-want +got):\n%s", diff)
	}
	if p.Bounds().Bytes >= bytesBefore || p.Bounds().Next != 8 {
		t.Fatalf("bounds after compaction: %+v", p.Bounds())
	}
	// From disk, not the cache, the same.
	h.cache.Drop(p.Group())
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Fatalf("after compaction, from disk (-want +got):\n%s", diff)
	}
	// Past the delete retention the tombstone goes too; compacting again is
	// a no-op after that.
	h.clock.Store(1200)
	compact()
	want = []rec{{2, "x1"}, {6, "a3"}, {7, "c2"}}
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Fatalf("after the delete retention (-want +got):\n%s", diff)
	}
	if plan, _ := p.PlanCompaction(h.clock.Load(), 0); len(plan.Cmds) != 0 || plan.Kept != 3 {
		t.Fatalf("nothing left to compact, planned %+v", plan)
	}
	// A plan made stale by retention is refused without harm.
	cmd := CompactCmd{Base: 0, RaftIndex: 99, Drop: []uint32{0}}
	if err := p.Compact(ctx, cmd); !errors.Is(err, ErrStalePlan) {
		t.Fatalf("stale compaction: %v", err)
	}
	// Time seeks still land on batch starts; offsets continue.
	if off, _ := p.SeekTime(0); off != 0 {
		t.Fatalf("seek: %d", off)
	}
	a, err := p.Append(ctx, recs("z", 1))
	if err != nil || a.Segments[0].Base != 8 {
		t.Fatalf("append after compaction: %v %+v", err, a.Segments)
	}
	_ = time.Second
}
