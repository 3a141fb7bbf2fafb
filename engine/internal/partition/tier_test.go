package partition

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

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
	r, err := Open(Config{Group: p.Group(), TopicID: 1, DB: h2.db, Host: h2.host, Cache: h2.cache, Now: h2.clock.Load})
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
	r2, err := Open(Config{Group: p.Group(), TopicID: 1, DB: h2.db, Host: h2.host, Cache: h2.cache, Now: h2.clock.Load})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmpSegments(p.Tiered(), r2.Tiered()); diff != "" {
		t.Fatal(diff)
	}
}
