package partition

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/rewind-io/rewind/engine/internal/keys"
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
	// Bytes: every record's payload (key "kN" + value "bI-J") is 6 bytes;
	// 73 bytes keep the newest 12 records, from inside batch 7.
	p.SetPolicy(Policy{Delete: true, MaxBytes: 73})
	x, ok, _ = p.PlanRetention(h.clock.Load())
	if !ok || x != 38 {
		t.Fatalf("plan by bytes: %d %v, want 38", x, ok)
	}
	if err := p.Truncate(ctx, x); err != nil {
		t.Fatal(err)
	}
	if v, _ := readAll(t, p); len(v) != 12 || v[0] != "b7-3" {
		t.Fatalf("bytes limit kept %d records from %q", len(v), v[0])
	}
	// Stale or odd plans change nothing.
	if err := p.Truncate(ctx, 30); err != nil { // below the log start: a no-op
		t.Fatal(err)
	}
	if err := p.Truncate(ctx, 51); !errors.Is(err, ErrStalePlan) {
		t.Fatalf("truncate past the end: %v", err)
	}
	// Any offset is a valid truncation point: inside a batch its head goes.
	if err := p.Truncate(ctx, 42); err != nil {
		t.Fatal(err)
	}
	if b := p.Bounds(); b.LogStart != 42 {
		t.Fatalf("truncate inside a batch: %+v", b)
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
	if v, _ := readAll(t, p); len(v) != 9 || v[0] != "b8-2" {
		t.Fatalf("%d records after restart from %q, want 9 from b8-2", len(v), v[0])
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

// TestRetentionKeepsExactlyTheNewestRecords is issue 18's first step: 1,000
// records published in one request (one batch) with a limit of 100 used to
// leave 0 records, because retention removed whole batches. The limit now
// holds exactly: the batch's head is trimmed, offsets 900..999 stay.
func TestRetentionKeepsExactlyTheNewestRecords(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.Policy = Policy{Delete: true, MaxRecords: 100} })
	ctx := context.Background()
	a, err := p.Append(ctx, recs("v", 1000))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Segments) != 1 {
		t.Fatalf("setup: the records landed in %d batches, want one", len(a.Segments))
	}
	before := p.Bounds()
	x, ok, err := p.PlanRetention(h.clock.Load())
	if err != nil || !ok || x != 900 {
		t.Fatalf("plan: %d %v %v, want 900", x, ok, err)
	}
	if err := p.Truncate(ctx, x); err != nil {
		t.Fatal(err)
	}
	b := p.Bounds()
	if b.LogStart != 900 || b.Next != 1000 || b.FirstTime != before.FirstTime || b.Bytes == 0 || b.Bytes >= before.Bytes {
		t.Fatalf("after retention: %+v (before %+v)", b, before)
	}
	check := func(what string) {
		t.Helper()
		v, _ := readAll(t, p)
		if len(v) != 100 || v[0] != "v-900" || v[99] != "v-999" {
			t.Fatalf("%s: %d records, from %q", what, len(v), v[0])
		}
		if _, _, err := p.NewReader().Read(899); !errors.Is(err, ErrBelowStart) {
			t.Fatalf("%s: read below the log start: %v", what, err)
		}
		if _, err := p.TimeOf(899); !errors.Is(err, ErrBelowStart) {
			t.Fatalf("%s: TimeOf below the log start: %v", what, err)
		}
		// Time seeks stay exact: the batch's time is the first time kept.
		for _, c := range []struct {
			t    int64
			want uint64
		}{{0, 900}, {b.FirstTime, 900}, {b.FirstTime + 1, 1000}} {
			if off, err := p.SeekTime(c.t); err != nil || off != c.want {
				t.Fatalf("%s: SeekTime(%d) = %d, %v; want %d", what, c.t, off, err, c.want)
			}
		}
		if tm, err := p.TimeOf(900); err != nil || tm != b.FirstTime {
			t.Fatalf("%s: TimeOf(900) = %d, %v", what, tm, err)
		}
	}
	check("from the cache")
	checkPayload(t, p)
	h.cache.Drop(p.Group())
	check("from disk")
	if _, ok, _ := p.PlanRetention(h.clock.Load()); ok {
		t.Fatal("a second pass plans more retention")
	}
	// The state and the trimmed batch survive a restart (the store is
	// checked at open with the log start inside the first batch).
	h.restart()
	p = h.add(0, func(c *Config) { c.Policy = Policy{Delete: true, MaxRecords: 100} })
	if diff := cmp.Diff(b, p.Bounds()); diff != "" {
		t.Fatalf("bounds after restart (-want +got):\n%s", diff)
	}
	check("after a restart")
	// Trimming the same batch again, after one more record.
	h.clock.Add(10)
	if a, err := p.Append(ctx, recs("w", 1)); err != nil || a.Segments[0].Base != 1000 {
		t.Fatalf("append: %v", err)
	}
	if x, ok, _ := p.PlanRetention(h.clock.Load()); !ok || x != 901 {
		t.Fatalf("plan after one more record: %d %v, want 901", x, ok)
	}
	if err := p.Truncate(ctx, 901); err != nil {
		t.Fatal(err)
	}
	if v, _ := readAll(t, p); len(v) != 100 || v[0] != "v-901" || v[99] != "w-0" {
		t.Fatalf("after the second trim: %d records from %q", len(v), v[0])
	}
}

// TestRetentionBytesAndAgeAtRecordGranularity: the bytes limit keeps the
// longest suffix of records within it, counted as the record size limit
// counts (key, value, headers, idempotency key), inside a single batch; the
// age limit removes exactly the records appended before now - max age.
func TestRetentionBytesAndAgeAtRecordGranularity(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.Policy = Policy{Delete: true, MaxBytes: 35} })
	ctx := context.Background()
	h.clock.Store(1000)
	var batch []record.Record
	for i := range 10 {
		batch = append(batch, kv("k", fmt.Sprintf("%09d", i))) // 10 bytes each
	}
	if a, err := p.Append(ctx, batch); err != nil || len(a.Segments) != 1 {
		t.Fatalf("append: %v", err)
	}
	// 3 records (30 bytes) fit in 35, 4 do not.
	x, ok, err := p.PlanRetention(h.clock.Load())
	if err != nil || !ok || x != 7 {
		t.Fatalf("plan by bytes: %d %v %v, want 7", x, ok, err)
	}
	if err := p.Truncate(ctx, x); err != nil {
		t.Fatal(err)
	}
	if v, _ := readAll(t, p); len(v) != 3 || v[0] != "000000007" {
		t.Fatalf("bytes limit kept %v", v)
	}
	if _, ok, _ := p.PlanRetention(h.clock.Load()); ok {
		t.Fatal("a second pass plans more retention")
	}
	// Exactly at the limit: all of the suffix stays.
	p.SetPolicy(Policy{Delete: true, MaxBytes: 30})
	if _, ok, _ := p.PlanRetention(h.clock.Load()); ok {
		t.Fatal("30 bytes of records within a 30-byte limit: planned a removal")
	}
	// Headers and idempotency keys count too.
	h.clock.Store(2000)
	r := kv("k", "v")
	r.Headers = []record.Header{{Key: []byte("hh"), Value: []byte("hhh")}}
	r.IdempotencyKey = []byte("iiii")
	if _, err := p.Append(ctx, []record.Record{r}); err != nil { // offset 10, 11 bytes
		t.Fatal(err)
	}
	p.SetPolicy(Policy{Delete: true, MaxBytes: 31})
	if x, ok, _ := p.PlanRetention(h.clock.Load()); !ok || x != 8 {
		t.Fatalf("plan with headers: %d %v, want 8 (11 + 2*10 = 31 bytes)", x, ok)
	}
	// Age: the records of time 1000 are not older than now - 1000...
	p.SetPolicy(Policy{Delete: true, MaxAge: 1000})
	if _, ok, _ := p.PlanRetention(2000); ok {
		t.Fatal("age: planned to remove records appended exactly at now - max age")
	}
	// ...and every one of them is older than now - 999, the rest of the
	// trimmed batch with them; the time seek lands on the next batch.
	p.SetPolicy(Policy{Delete: true, MaxAge: 999})
	x, ok, _ = p.PlanRetention(2000)
	if !ok || x != 10 {
		t.Fatalf("plan by age: %d %v, want 10", x, ok)
	}
	if err := p.Truncate(ctx, x); err != nil {
		t.Fatal(err)
	}
	if b := p.Bounds(); b.LogStart != 10 || b.Next != 11 || b.FirstTime != 2000 {
		t.Fatalf("after age retention: %+v", b)
	}
	checkPayload(t, p)
	if off, _ := p.SeekTime(1500); off != 10 {
		t.Fatalf("time seek: %d, want 10", off)
	}
}

// TestRetentionTrimsCompactedBatches: a batch compaction thinned is trimmed
// the same way; a trim that would leave it with no record removes it whole
// (the offsets it still spans hold nothing), and compaction still applies
// to a trimmed batch.
func TestRetentionTrimsCompactedBatches(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.Policy = Policy{Compact: true, Delete: true, DeleteRetention: 1 << 40} })
	ctx := context.Background()
	for _, batch := range [][]record.Record{
		{kv("a", "a1"), kv("b", "b1"), kv("a", "a2"), kv("c", "c1"), kv("d", "d1")}, // [0, 5)
		{kv("b", "b2"), kv("c", "c2")},                                              // [5, 7)
	} {
		if _, err := p.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() []string {
		t.Helper()
		var out []string
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
				if o := b.Base + uint64(r.OffsetDelta); o >= off {
					out = append(out, fmt.Sprintf("%d:%s", o, r.Value))
				}
			}
			off = b.End()
		}
		return out
	}
	plan, err := p.PlanCompaction(h.clock.Load(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plan.Cmds {
		if err := p.Compact(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"2:a2", "4:d1", "5:b2", "6:c2"}, stored()); diff != "" {
		t.Fatalf("after compaction (-want +got):\n%s", diff)
	}
	if err := p.Truncate(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"4:d1", "5:b2", "6:c2"}, stored()); diff != "" {
		t.Fatalf("after truncating at 3 (-want +got):\n%s", diff)
	}
	checkPayload(t, p)
	// Compaction of the trimmed batch (d superseded).
	if _, err := p.Append(ctx, []record.Record{kv("d", "d2")}); err != nil { // 7
		t.Fatal(err)
	}
	plan, err = p.PlanCompaction(h.clock.Load(), 0)
	if err != nil || len(plan.Cmds) != 1 || plan.Cmds[0].Base != 0 {
		t.Fatalf("compaction plan of the trimmed batch: %+v %v", plan, err)
	}
	if err := p.Compact(ctx, plan.Cmds...); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"5:b2", "6:c2", "7:d2"}, stored()); diff != "" {
		t.Fatalf("after compacting the trimmed batch (-want +got):\n%s", diff)
	}
	checkPayload(t, p)
	// The batch [0, 5) now holds nothing at or above 3: a trim at 4 removes
	// it whole, and the log start is its end.
	bytesBefore := p.Bounds().Bytes
	if err := p.Truncate(ctx, 4); err != nil {
		t.Fatal(err)
	}
	b := p.Bounds()
	if b.LogStart != 5 || b.Bytes >= bytesBefore {
		t.Fatalf("after trimming an emptied batch: %+v", b)
	}
	if diff := cmp.Diff([]string{"5:b2", "6:c2", "7:d2"}, stored()); diff != "" {
		t.Fatalf("after trimming an emptied batch (-want +got):\n%s", diff)
	}
	h.restart()
	p = h.add(0, nil)
	if diff := cmp.Diff(b, p.Bounds()); diff != "" {
		t.Fatalf("bounds after restart (-want +got):\n%s", diff)
	}
	if off, _ := p.SeekTime(0); off != 5 {
		t.Fatalf("time seek after restart: %d", off)
	}
}

// TestRetentionBytesWithRowsFromBeforePayloadSizes: offset index rows and
// a state row written before they carried payload sizes (24-byte rows, a
// version 2 state) are still read, and the bytes limit stays exact for
// them: it walks the rows back and reads the batches.
func TestRetentionBytesWithRowsFromBeforePayloadSizes(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	pol := Policy{Delete: true, MaxBytes: 35}
	p := h.add(0, func(c *Config) { c.Policy = pol })
	var batch []record.Record
	for i := range 10 {
		batch = append(batch, kv("k", fmt.Sprintf("%09d", i))) // 10 bytes each
	}
	for range 2 {
		if _, err := p.Append(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	if b := p.Bounds(); !b.PayloadKnown || b.Payload != 200 {
		t.Fatalf("payload counted at apply: %+v", b)
	}
	// Rewrite the rows as the previous version wrote them.
	for _, base := range []uint64{0, 10} {
		row, ok, err := p.readRow(base)
		if err != nil || !ok {
			t.Fatalf("row %d: %v", base, err)
		}
		if err := h.db.Set(keys.OffsetKey(p.Group(), base), row.encode()[:legacyIndexRowSize], pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if x, ok, err := p.PlanRetention(h.clock.Load()); err != nil || !ok || x != 17 {
		t.Fatalf("plan by bytes over old rows: %d %v %v, want 17", x, ok, err)
	}
	st := p.Bounds().encode()[:stateV2Size]
	st[0] = 2
	if err := h.db.Set(keys.PartitionStateKey(p.Group()), st, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	h.restart()
	p = h.add(0, func(c *Config) { c.Policy = pol })
	if b := p.Bounds(); b.PayloadKnown || b.Next != 20 {
		t.Fatalf("a version 2 state read: %+v", b)
	}
	x, ok, err := p.PlanRetention(h.clock.Load())
	if err != nil || !ok || x != 17 {
		t.Fatalf("plan by bytes with an old state: %d %v %v, want 17", x, ok, err)
	}
	if err := p.Truncate(context.Background(), x); err != nil {
		t.Fatal(err)
	}
	if v, _ := readAll(t, p); len(v) != 3 || v[0] != "000000007" {
		t.Fatalf("kept %v", v)
	}
	// Once empty, the partition knows its payload again.
	if err := p.Truncate(context.Background(), p.Bounds().Next); err != nil {
		t.Fatal(err)
	}
	if b := p.Bounds(); !b.PayloadKnown || b.Payload != 0 {
		t.Fatalf("emptied: %+v", b)
	}
}

// checkPayload checks the state's payload against the stored records.
func checkPayload(t *testing.T, p *Partition) {
	t.Helper()
	b := p.Bounds()
	rd := p.NewReader()
	defer rd.Close()
	var sum uint64
	for off := b.LogStart; off < b.Next; {
		batch, _, err := rd.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		it := batch.Records.Iter()
		var r record.Record
		for it.Next(&r) {
			if batch.Base+uint64(r.OffsetDelta) >= off {
				sum += uint64(r.PayloadSize())
			}
		}
		off = batch.End()
	}
	if !b.PayloadKnown || b.Payload != sum {
		t.Fatalf("state payload %d (known %v), the stored records hold %d", b.Payload, b.PayloadKnown, sum)
	}
}

// TestReplicaGivenACompactionEmptiedBatchKeepsOffsets: key compaction keeps
// a batch whose records were all superseded as an empty batch (its span
// stays, so its offsets stay taken) and rewrites its raft entry in place. A
// replica that lagged behind gets that rewritten entry from the leader's
// store, not the original. It must give the empty batch the same offsets the
// leader did; skipping it as invalid shifted every later offset by its span.
func TestReplicaGivenACompactionEmptiedBatchKeepsOffsets(t *testing.T) {
	policy := Policy{Compact: true}
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.Policy = policy })
	ctx := context.Background()
	for _, batch := range [][]record.Record{
		{kv("a", "a1"), kv("b", "b1")}, // both superseded below: emptied
		{kv("a", "a2"), kv("b", "b2")},
		{kv("c", "c1")},
	} {
		if _, err := p.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := p.PlanCompaction(h.clock.Load(), 0)
	if err != nil || len(plan.Cmds) == 0 {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	if err := p.Compact(ctx, plan.Cmds...); err != nil {
		t.Fatal(err)
	}
	row, ok, err := p.rowAt(0)
	if err != nil || !ok || row.span != 2 {
		t.Fatalf("the emptied batch's row: %+v %v %v", row, ok, err)
	}
	data, err := raftlog.ReadEntryData(h.db, p.Group(), row.raftIndex)
	if err != nil {
		t.Fatal(err)
	}
	be, err := parseBatchEntry(data)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := record.Parse(be.batch); err != nil || b.Count() != 0 || b.Span() != 2 {
		t.Fatalf("the stored entry should now be an empty batch of span 2: count %d span %d, %v", b.Count(), b.Span(), err)
	}

	// The lagging replica: the same group on another store, applying the
	// leader's stored entries (batches and the compaction command) in one
	// catch-up pass, as raft hands them to it.
	var ents []*pb.Entry
	for i := uint64(1); i <= row.raftIndex+10; i++ {
		d, err := raftlog.ReadEntryData(h.db, p.Group(), i)
		if err != nil {
			continue // raft's own entries (bootstrap) are not stored here
		}
		if len(d) > 0 {
			ents = append(ents, &pb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(2), Data: d})
		}
	}
	h2 := newHarness(t, vfs.NewMem(), 64<<20)
	r, err := Open(Config{Group: p.Group(), TopicID: 1, Index: 0, DB: h2.db, Host: h2.host, Cache: h2.cache, Now: h2.clock.Load, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	w := h2.db.NewBatch()
	if err := r.Apply(w, ents); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	r.Durable()
	if got, want := r.Bounds().Next, p.Bounds().Next; got != want || want != 5 {
		t.Fatalf("the replica ends at offset %d, the leader at %d (want 5)", got, want)
	}
	for _, base := range []uint64{0, 2, 4} {
		lr, _, _ := p.rowAt(base)
		rr, ok, err := r.rowAt(base)
		if err != nil || !ok || rr.span != lr.span || rr.raftIndex != lr.raftIndex {
			t.Fatalf("offset %d: replica row %+v (%v %v), leader row %+v", base, rr, ok, err, lr)
		}
	}
}
