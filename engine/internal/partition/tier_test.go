package partition

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/tier"
)

// TestUploadTierRecordsSealedRangesInTheManifest: the leader copies whole
// batches below a bound into segment objects, about maxBytes each, and
// each becomes a manifest row through raft; the objects hold exactly the
// batches the partition serves locally, and the manifest survives a
// restart.
func TestUploadTierRecordsSealedRangesInTheManifest(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	h := newHarness(t, fs, 64<<20)
	p := h.add(0, nil)
	fill(t, h, p, 10, 5) // batches of 5 records: [0,5) ... [45,50)
	st, err := tier.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Up to offset 32: batches [0,30) are sealed below it; [30,35) is not.
	var segs []TierSegment
	for {
		s, ok, err := p.UploadTier(ctx, st, 32, 200)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		segs = append(segs, s)
	}
	if len(segs) < 2 || segs[0].Base != 0 || segs[len(segs)-1].End != 30 {
		t.Fatalf("segments %+v, want several covering [0, 30)", segs)
	}
	got := p.Tiered()
	if len(got) != len(segs) {
		t.Fatalf("manifest %+v, uploaded %+v", got, segs)
	}
	r := p.NewReader()
	defer r.Close()
	for i, s := range got {
		if s != segs[i] || (i > 0 && s.Base != got[i-1].End) {
			t.Fatalf("manifest row %d: %+v (uploaded %+v)", i, s, segs[i])
		}
		seg, err := tier.OpenSegment(ctx, st, s.Name)
		if err != nil {
			t.Fatal(err)
		}
		for j, e := range seg.Entries {
			tb, err := seg.ReadBatch(ctx, st, j)
			if err != nil {
				t.Fatal(err)
			}
			lb, _, err := r.Read(e.Base)
			if err != nil {
				t.Fatal(err)
			}
			if lb.Base != e.Base || lb.AppendTime != e.AppendTime || !bytes.Equal(lb.Records.Bytes(), tb.Bytes()) {
				t.Fatalf("segment %s batch %d differs from the local batch at %d", s.Name, j, e.Base)
			}
		}
	}
	// Nothing more below 32; the next bound continues where it ended.
	if _, ok, _ := p.UploadTier(ctx, st, 32, 200); ok {
		t.Fatal("uploaded again below the same bound")
	}
	s, ok, err := p.UploadTier(ctx, st, 50, 1<<20)
	if err != nil || !ok || s.Base != 30 || s.End != 50 {
		t.Fatalf("next upload: %+v %v %v", s, ok, err)
	}
	// Reads are still local: the bounds did not move.
	if b := p.Bounds(); b.LogStart != 0 || b.Next != 50 {
		t.Fatalf("bounds %+v", b)
	}
	want := p.Tiered()
	h.restart()
	p = h.add(0, nil)
	if diff := cmpSegments(want, p.Tiered()); diff != "" {
		t.Fatalf("after a restart: %s", diff)
	}
}

func cmpSegments(a, b []TierSegment) string {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		return "manifests differ:\n" + string(ja) + "\n" + string(jb)
	}
	return ""
}

// TestTierCommandsAreIdempotentAndOrdered: the same segment recorded again
// (a new leader redoing an upload, or a command re-applied over a
// snapshot) changes nothing; a segment that does not start where the
// manifest ends, or that names another object for tiered offsets, is
// refused as stale.
func TestTierCommandsAreIdempotentAndOrdered(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	fill(t, h, p, 4, 5)
	st, err := tier.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, ok, err := p.UploadTier(ctx, st, 10, 1<<20)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := p.command(ctx, kindTier, s); err != nil {
		t.Fatalf("the same segment again: %v", err)
	}
	other := s
	other.Name += "x"
	gap := TierSegment{Base: 15, End: 20, Name: "x"}
	past := TierSegment{Base: 10, End: 99, Name: "x"}
	for _, c := range []TierSegment{other, gap, past} {
		if _, err := p.command(ctx, kindTier, c); !errors.Is(err, ErrStalePlan) {
			t.Errorf("segment %+v: %v, want ErrStalePlan", c, err)
		}
	}
	if got := p.Tiered(); len(got) != 1 || got[0] != s {
		t.Fatalf("manifest %+v", got)
	}
}

// TestSnapshotCarriesTheTierManifest: a replica that jumps to the leader's
// snapshot has the leader's manifest.
func TestSnapshotCarriesTheTierManifest(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	fill(t, h, p, 4, 5)
	st, err := tier.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := p.UploadTier(ctx, st, 20, 1<<20); err != nil || !ok {
		t.Fatal(ok, err)
	}
	data, err := p.SnapshotData(p.Bounds().LastIndex)
	if err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, vfs.NewMem(), 64<<20)
	r, err := Open(Config{Group: p.Group(), TopicID: 1, DB: h2.db, Host: h2.host, Cache: h2.cache, Now: h2.clock.Load, KeyIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	w := h2.db.NewBatch()
	if err := r.RestoreSnapshot(w, p.Bounds().LastIndex, data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	r.Durable()
	if diff := cmpSegments(p.Tiered(), r.Tiered()); diff != "" {
		t.Fatal(diff)
	}
	// And from its store after a reopen.
	r2, err := Open(Config{Group: p.Group(), TopicID: 1, DB: h2.db, Host: h2.host, Cache: h2.cache, Now: h2.clock.Load, KeyIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmpSegments(p.Tiered(), r2.Tiered()); diff != "" {
		t.Fatal(diff)
	}
}

// withFileTier returns a partition with a file store as its tier, holding
// 10 batches of 5 records ([0, 50), one clock step of 10 apart), all
// local.
func withFileTier(t *testing.T) (*harness, *Partition, *tier.FileStore) {
	t.Helper()
	st, err := tier.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.Tier = st })
	fill(t, h, p, 10, 5)
	return h, p, st
}

// tiered returns a partition of 10 batches of 5 records ([0, 50), one clock
// step of 10 apart) whose batches below 30 are tiered to a file store in
// segments of about maxBytes and removed locally.
func tiered(t *testing.T, maxBytes int) (*harness, *Partition, *tier.FileStore, []string) {
	t.Helper()
	ctx := context.Background()
	h, p, st := withFileTier(t)
	want, _ := readAll(t, p)
	for {
		_, ok, err := p.UploadTier(ctx, st, 30, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	if err := p.TruncateLocal(ctx, 30); err != nil {
		t.Fatal(err)
	}
	if loc := p.local(); loc.LogStart != 30 || loc.ReadStart != 0 {
		t.Fatalf("after the local truncate: %+v", loc)
	}
	h.cache.Drop(p.Group())
	return h, p, st, want
}

// TestTieredHistoryReadsAsIfLocal: once the records below 30 are only in
// the object store, the partition still shows them: the same bounds, every
// record at its offset, exact time seeks and times, also after a restart.
func TestTieredHistoryReadsAsIfLocal(t *testing.T) {
	h, p, st, want := tiered(t, 200)
	if len(p.Tiered()) < 2 {
		t.Fatalf("want several segments, got %+v", p.Tiered())
	}
	check := func(p *Partition) {
		t.Helper()
		if b := p.Bounds(); b.LogStart != 0 || b.Next != 50 {
			t.Fatalf("bounds %+v, want [0, 50)", b)
		}
		got, times := readAll(t, p)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("records (-want +got):\n%s", diff)
		}
		// Batch i was appended at 1000 + 10(i+1): a seek to its time finds
		// its first offset, one nanosecond later the next batch's.
		for i := range 10 {
			tm := int64(1000 + 10*(i+1))
			if off, err := p.SeekTime(tm); err != nil || off != uint64(5*i) {
				t.Fatalf("SeekTime(%d) = %d %v, want %d", tm, off, err, 5*i)
			}
			if off, err := p.SeekTime(tm + 1); err != nil || off != uint64(5*(i+1)) {
				t.Fatalf("SeekTime(%d) = %d %v, want %d", tm+1, off, err, 5*(i+1))
			}
			if got, err := p.TimeOf(uint64(5*i + 2)); err != nil || got != tm || times[5*i+2] != tm {
				t.Fatalf("TimeOf(%d) = %d %v, want %d", 5*i+2, got, err, tm)
			}
		}
	}
	check(p)
	h.restart()
	check(h.add(0, func(c *Config) { c.Tier = st }))
}

// TestRetentionReachesIntoTieredHistory: total retention moves the
// readable start into tiered history (reads below it refused, segments
// wholly below it leave the manifest) before it touches local records.
func TestRetentionReachesIntoTieredHistory(t *testing.T) {
	ctx := context.Background()
	_, p, _, want := tiered(t, 1) // a segment per batch
	before := p.Tiered()
	if err := p.Truncate(ctx, 12); err != nil {
		t.Fatal(err)
	}
	if b := p.Bounds(); b.LogStart != 12 || p.local().LogStart != 30 {
		t.Fatalf("readable %+v, local start %d", b, p.local().LogStart)
	}
	r := p.NewReader()
	defer r.Close()
	if _, _, err := r.Read(11); !errors.Is(err, ErrBelowStart) {
		t.Fatalf("read below the new start: %v", err)
	}
	got, _ := readAll(t, p)
	if diff := cmp.Diff(want[12:], got); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	for _, s := range p.Tiered() {
		if s.End <= 12 {
			t.Fatalf("segment %+v wholly below the start stayed in the manifest", s)
		}
	}
	if len(p.Tiered()) >= len(before) {
		t.Fatalf("no segment left the manifest: %d before, %d after", len(before), len(p.Tiered()))
	}
	// Past the tiered history, into local records.
	if err := p.Truncate(ctx, 33); err != nil {
		t.Fatal(err)
	}
	if b := p.Bounds(); b.LogStart != 33 || len(p.Tiered()) != 0 {
		t.Fatalf("after 33: %+v, manifest %+v", b, p.Tiered())
	}
}

// TestLocalTruncateNeedsTheTieredCopy: local records can only go where the
// manifest covers them.
func TestLocalTruncateNeedsTheTieredCopy(t *testing.T) {
	ctx := context.Background()
	_, p, _, _ := tiered(t, 200)
	if err := p.TruncateLocal(ctx, 40); !errors.Is(err, ErrStalePlan) {
		t.Fatalf("a local truncate past the tiered end: %v", err)
	}
	if p.local().LogStart != 30 {
		t.Fatalf("local start moved to %d", p.local().LogStart)
	}
}

// TestCorruptOrMissingTierObjectsAreReportedNotDelivered: a flipped byte
// or a deleted object fails the read with ErrCorrupt naming the object and
// the offset; the batches of the window that pass their checks are still
// served, the window is not cached as good (nor is the error: once the
// object is whole again it reads), and local records go on being served.
func TestCorruptOrMissingTierObjectsAreReportedNotDelivered(t *testing.T) {
	ctx := context.Background()
	_, p, st, want := tiered(t, 1<<20) // one segment, [0, 30), one window
	row := p.Tiered()[0]
	good, err := st.ReadRange(ctx, row.Name, 0, int64(row.Bytes))
	if err != nil {
		t.Fatal(err)
	}
	seg, err := tier.OpenSegment(ctx, st, row.Name)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[seg.Entries[2].Pos+20] ^= 0xff // inside the batch of [10, 15)
	if err := st.Put(ctx, row.Name, bad); err != nil {
		t.Fatal(err)
	}
	cache := p.cfg.TierCache
	read := func(off uint64) error {
		t.Helper()
		r := p.NewReader()
		defer r.Close()
		b, _, err := r.Read(off)
		if err == nil && (b.Base > off || b.End() <= off || b.Span != 5) {
			t.Fatalf("read at %d: batch [%d, %d)", off, b.Base, b.End())
		}
		return err
	}
	r := p.NewReader()
	defer r.Close()
	for _, off := range []uint64{0, 5} { // before the bad batch, same window
		if b, _, err := r.Read(off); err != nil || b.Base != off {
			t.Fatalf("read at %d before the corrupt batch: %v", off, err)
		}
	}
	if _, _, err := r.Read(10); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), row.Name) || !strings.Contains(err.Error(), "offset 10") {
		t.Fatalf("a corrupt batch: %v, want ErrCorrupt naming %s and offset 10", err, row.Name)
	}
	if b, _, err := r.Read(30); err != nil || b.Base != 30 {
		t.Fatalf("local read after: %v", err)
	}
	// The window was not kept: another reader reads the store again.
	before := cache.Stats()
	if err := read(12); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a second read of the corrupt batch: %v", err)
	}
	if s := cache.Stats(); s.Misses != before.Misses+1 || s.Hits != before.Hits+1 {
		t.Fatalf("a corrupt window was cached: %+v, then %+v (want one more miss, and the index a hit)", before, s)
	}
	// Nor was the error: once the object is whole again, it reads, and the
	// window is kept.
	if err := st.Put(ctx, row.Name, good); err != nil {
		t.Fatal(err)
	}
	if err := read(10); err != nil {
		t.Fatalf("the object whole again: %v", err)
	}
	before = cache.Stats()
	got, _ := readAll(t, p)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	if s := cache.Stats(); s.Misses != before.Misses || s.Hits == before.Hits {
		t.Fatalf("a good window was not kept: %+v, then %+v", before, s)
	}
	// A missing object (read through a cache that does not hold it).
	if err := st.Delete(ctx, row.Name); err != nil {
		t.Fatal(err)
	}
	p.cfg.TierCache = tier.NewCache(tier.CacheConfig{})
	if err := read(7); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), row.Name) {
		t.Fatalf("a missing object: %v, want ErrCorrupt naming %s", err, row.Name)
	}
}

// TestTierGarbageIsCollected: objects no manifest row names (segments
// total retention dropped, an upload whose command never applied) are
// deleted once old enough; named ones and young strays stay.
func TestTierGarbageIsCollected(t *testing.T) {
	ctx := context.Background()
	_, p, st, _ := tiered(t, 1) // a segment per batch below 30
	if err := p.Truncate(ctx, 12); err != nil {
		t.Fatal(err)
	}
	stray := tier.Prefix(p.TopicID(), p.Index()) + "00000000000000000030-00000000000000000035-deadbeef.seg"
	if err := st.Put(ctx, stray, []byte("an upload whose command was lost")); err != nil {
		t.Fatal(err)
	}
	objects := func() []string {
		objs, err := st.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.Name)
		}
		return out
	}
	before := objects()
	// Nothing is old enough yet.
	if n, err := p.CollectTierGarbage(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("young objects collected: %d %v", n, err)
	}
	n, err := p.CollectTierGarbage(ctx, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	after := objects()
	var want []string
	for _, r := range p.Tiered() {
		want = append(want, r.Name)
	}
	if diff := cmp.Diff(want, after); diff != "" || n != len(before)-len(after) || n != 3 {
		t.Fatalf("after collecting %d (of %d objects): (-manifest +store)\n%s", n, len(before), diff)
	}
}

// TestUploadLag: the lag is what the local limits want off the disk, in
// whole batches, not uploaded yet, and the age of its oldest record; it
// shrinks as segments are uploaded and is 0 once they caught up.
func TestUploadLag(t *testing.T) {
	ctx := context.Background()
	h, p, st := withFileTier(t) // batch i at 1000 + 10(i+1)
	now := h.clock.Load() + 1000
	if _, ok, err := p.UploadLag(now); ok || err != nil {
		t.Fatalf("a lag without local limits: %v %v", ok, err)
	}
	lag := func(records uint64, nanos int64) {
		t.Helper()
		got, ok, err := p.UploadLag(now)
		if err != nil || !ok || got != (TierLag{Records: records, Nanos: nanos}) {
			t.Fatalf("lag %+v %v %v, want %d records, %d ns", got, ok, err, records, nanos)
		}
	}
	// Older than the batch at 1070 (offset 30) may go.
	p.SetPolicy(Policy{LocalMaxAge: time.Duration(now - 1070)})
	lag(30, now-1010)
	if _, _, err := p.UploadTier(ctx, st, 15, 1<<20); err != nil {
		t.Fatal(err)
	}
	lag(15, now-1040)
	if _, _, err := p.UploadTier(ctx, st, 30, 1<<20); err != nil {
		t.Fatal(err)
	}
	lag(0, 0)
	// A bytes limit that keeps 12 records: the boundary, 38, falls inside
	// the batch [35, 40), which stays whole.
	per := p.local().Payload / 50
	p.SetPolicy(Policy{LocalMaxBytes: 12 * per})
	if x, _, err := p.PlanLocal(now); err != nil || x != 38 {
		t.Fatalf("local boundary %d %v, want 38", x, err)
	}
	lag(5, now-1070)
}

// TestTieredReadsPrefetchTheNextWindow: a sequential read of tiered
// history reads each segment's index and first window itself; every later
// window was prefetched when the reader entered the one before (the
// reader finds it kept or joins its read), so nothing is read twice.
func TestTieredReadsPrefetchTheNextWindow(t *testing.T) {
	_, p, _, want := tiered(t, 200)
	cache := tier.NewCache(tier.CacheConfig{WindowBytes: 1}) // a window per batch
	p.cfg.TierCache = cache
	got, _ := readAll(t, p)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	segs, batches := 0, 0
	for _, r := range p.Tiered() {
		segs++
		batches += int(r.Batches)
	}
	if s := cache.Stats(); s.Misses != uint64(2*segs) || s.Prefetches != uint64(batches-segs) || batches <= segs {
		t.Fatalf("%d segments of %d batches: %+v, want %d misses and %d prefetches", segs, batches, s, 2*segs, batches-segs)
	}
}

// heldCheckStore fails a Put made while a background turn is held.
type heldCheckStore struct {
	tier.Store
	held *bool
	t    *testing.T
}

func (s heldCheckStore) Put(ctx context.Context, name string, data []byte) error {
	if *s.held {
		s.t.Errorf("object %s written while holding a background turn", name)
	}
	return s.Store.Put(ctx, name, data)
}

// TestUploadTierTakesBackgroundTurns: the mover reads and packs history in
// turns of the node's scheduler (Config.Background) of at most
// backgroundSlice bytes each, so live work goes first between them, and
// writes the object holding none (it waits on the store, not a
// processor). The regression guard counts the scheduler's grants, not
// time.
func TestUploadTierTakesBackgroundTurns(t *testing.T) {
	ctx := context.Background()
	var granted, ended int
	held := false
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) {
		c.Background = func(context.Context) (func(), error) {
			if held {
				t.Error("a background turn asked for while one is held")
			}
			granted++
			held = true
			return func() { ended++; held = false }, nil
		}
	})
	const batches, per, size = 40, 4, 16 << 10
	total := 0
	for i := range batches {
		rs := make([]record.Record, per)
		for j := range rs {
			rs[j] = record.Record{Value: bytes.Repeat([]byte{byte(i)}, size)}
			total += size
		}
		if _, err := p.Append(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	fst, err := tier.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seg, ok, err := p.UploadTier(ctx, heldCheckStore{Store: fst, held: &held, t: t}, batches*per, 64<<20)
	if err != nil || !ok || seg.End != batches*per {
		t.Fatalf("upload: %+v %v %v, want one segment of every batch", seg, ok, err)
	}
	// Reading takes at least one turn per backgroundSlice bytes; packing
	// takes one more.
	if want := total/backgroundSlice + 1; granted < want {
		t.Fatalf("%d turns for %d bytes of history, want at least %d", granted, total, want)
	}
	if held || ended != granted {
		t.Fatalf("%d turns granted, %d ended (one still held: %v)", granted, ended, held)
	}
}
