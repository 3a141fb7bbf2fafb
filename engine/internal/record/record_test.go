package record

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sample() []Record {
	return []Record{
		{Key: []byte("k1"), Value: []byte("v1"), EventTime: 1700000000000000000},
		{Value: []byte("no key")},
		{Key: []byte("k3"), Value: nil, IdempotencyKey: []byte("idem-3"),
			Headers: []Header{{Key: []byte("h"), Value: []byte("1")}, {Key: []byte("h"), Value: nil}}},
		{EventTime: -5},
	}
}

func build(recs []Record) []byte {
	var b Builder
	b.Reset(42, 1234)
	for i := range recs {
		b.Add(&recs[i])
	}
	return b.Finish()
}

func decodeAll(t testing.TB, data []byte) []Record {
	t.Helper()
	b, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	it := b.Iter()
	var r Record
	for it.Next(&r) {
		c := r
		c.Headers = append([]Header(nil), r.Headers...)
		out = append(out, c)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	recs := sample()
	data := build(recs)
	b, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if b.ProposalID() != 42 || b.AppendTime() != 1234 || b.Count() != 4 || b.Span() != 4 {
		t.Fatalf("header: id %d time %d count %d span %d", b.ProposalID(), b.AppendTime(), b.Count(), b.Span())
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	got := decodeAll(t, data)
	for i := range recs {
		recs[i].OffsetDelta = uint32(i)
	}
	if diff := cmp.Diff(recs, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}

func TestEmptyBatch(t *testing.T) {
	b, err := Parse(build(nil))
	if err != nil {
		t.Fatal(err)
	}
	if b.Count() != 0 || b.Validate() != nil {
		t.Fatalf("empty batch: count %d, validate %v", b.Count(), b.Validate())
	}
}

// TestEveryFlippedBitIsCaught flips each bit of a batch in turn: the checksum
// (or the header checks) must catch every one.
func TestEveryFlippedBitIsCaught(t *testing.T) {
	data := build(sample())
	for i := range len(data) * 8 {
		c := bytes.Clone(data)
		c[i/8] ^= 1 << (i % 8)
		if _, err := Parse(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: Parse gave %v", i, err)
		}
	}
	for n := range len(data) {
		if _, err := Parse(data[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: Parse gave %v", n, err)
		}
	}
}

func TestValidateCatchesBadBodies(t *testing.T) {
	// Body errors behind a valid checksum: count mismatch, deltas out of
	// order. Build them by hand and re-seal.
	reseal := func(data []byte) []byte {
		var b Builder
		b.buf = data
		b.count = uint32(data[22]) // keep the header's count
		b.delta = uint32(data[26])
		return b.Finish()
	}
	data := build(sample())
	data[22] = 3 // header claims 3 records, body has 4
	if err := mustParse(t, reseal(data)).Validate(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("count mismatch: %v", err)
	}
}

func mustParse(t *testing.T, data []byte) Batch {
	t.Helper()
	b, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParse feeds arbitrary bytes to the decoder: it must return an error or
// records, never panic, and a batch it accepts must re-encode to itself.
func FuzzParse(f *testing.F) {
	f.Add(build(sample()))
	f.Add(build(nil))
	f.Add([]byte{})
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(data)
		if err != nil {
			return
		}
		checkBody(t, b)
	})
}

// FuzzBody skips the checksum, which random bytes almost never pass, so the
// fuzzer reaches the record decoder: a hostile body behind a valid checksum.
func FuzzBody(f *testing.F) {
	f.Add(build(sample())[HeaderSize:], uint32(4), uint32(4))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint32(1), uint32(1))
	f.Fuzz(func(t *testing.T, body []byte, count, span uint32) {
		var b Builder
		b.Reset(1, 1)
		b.buf = append(b.buf, body...)
		b.count, b.delta = count, span
		batch, err := Parse(b.Finish())
		if err != nil {
			return
		}
		checkBody(t, batch)
	})
}

func checkBody(t *testing.T, b Batch) {
	if err := b.Validate(); err != nil {
		return
	}
	// Accepted: re-encoding the records with the same deltas must give the
	// same bytes, when the deltas are dense (the only kind Builder writes).
	it := b.Iter()
	var r Record
	var recs []Record
	for it.Next(&r) {
		c := r
		c.Headers = append([]Header(nil), r.Headers...)
		recs = append(recs, c)
	}
	dense := true
	for i, r := range recs {
		dense = dense && r.OffsetDelta == uint32(i)
	}
	if !dense || uint32(len(recs)) != b.Span() {
		return
	}
	var nb Builder
	nb.Reset(b.ProposalID(), b.AppendTime())
	for i := range recs {
		nb.Add(&recs[i])
	}
	if got := nb.Finish(); !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("re-encoding differs:\n got %x\nwant %x", got, b.Bytes())
	}
}

func BenchmarkBuild(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 100)
	recs := make([]Record, 1000)
	for i := range recs {
		recs[i] = Record{Key: []byte(fmt.Sprint(i)), Value: value}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(recs) * 100))
	for b.Loop() {
		var bl Builder
		bl.Reset(1, 1)
		for i := range recs {
			bl.Add(&recs[i])
		}
		bl.Finish()
	}
}

func BenchmarkIter(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 100)
	var bl Builder
	bl.Reset(1, 1)
	for i := range 1000 {
		bl.Add(&Record{Key: []byte(fmt.Sprint(i)), Value: value})
	}
	data := bl.Finish()
	b.ReportAllocs()
	b.SetBytes(int64(1000 * 100))
	for b.Loop() {
		batch, _ := Parse(data)
		it := batch.Iter()
		var r Record
		for it.Next(&r) {
		}
	}
}

func TestCompactKeepsOffsetsAndSpan(t *testing.T) {
	b := mustParse(t, build(sample()))
	data, err := Compact(b, func(d uint32) bool { return d == 0 || d == 2 })
	if err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, data)
	if c.Span() != 4 || c.Count() != 2 || c.ProposalID() != b.ProposalID() || c.AppendTime() != b.AppendTime() {
		t.Fatalf("compacted header: span %d count %d", c.Span(), c.Count())
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	got := decodeAll(t, data)
	if len(got) != 2 || got[0].OffsetDelta != 1 || got[1].OffsetDelta != 3 || string(got[0].Value) != "no key" {
		t.Fatalf("kept %+v", got)
	}
	// Everything dropped: an empty batch that still covers its offsets.
	empty, err := Compact(b, func(uint32) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	e := mustParse(t, empty)
	if e.Count() != 0 || e.Span() != 4 || e.Validate() != nil {
		t.Fatalf("empty compacted batch: count %d span %d", e.Count(), e.Span())
	}
}

// TestPayloadSizeCountsWhatThePublisherChose: PayloadSize is the bytes of
// the fields, without framing; the framing a batch adds per record is a few
// bytes per field.
func TestPayloadSizeCountsWhatThePublisherChose(t *testing.T) {
	for _, r := range sample() {
		want := len(r.Key) + len(r.Value) + len(r.IdempotencyKey)
		for _, h := range r.Headers {
			want += len(h.Key) + len(h.Value)
		}
		if got := r.PayloadSize(); got != want {
			t.Errorf("%+v: PayloadSize %d, want %d", r, got, want)
		}
		framing := len(build([]Record{r})) - HeaderSize - r.PayloadSize()
		if max := 30 + 20*len(r.Headers); framing <= 0 || framing > max {
			t.Errorf("%+v: %d bytes of framing, want 1 to %d", r, framing, max)
		}
	}
}

func TestSeekDeltaSkipsToARecord(t *testing.T) {
	recs := sample()
	data := build(recs)
	// A compacted copy without delta 1: seeking it lands on delta 2.
	b, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	compacted, err := Compact(b, func(d uint32) bool { return d == 1 })
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		data  []byte
		seek  uint32
		want  []uint32 // deltas the iterator then returns
		label string
	}{
		{data, 0, []uint32{0, 1, 2, 3}, "to the first"},
		{data, 2, []uint32{2, 3}, "to the middle"},
		{data, 4, nil, "past the last"},
		{compacted, 1, []uint32{2, 3}, "to a dropped record"},
	} {
		bt, err := Parse(tc.data)
		if err != nil {
			t.Fatal(err)
		}
		it := bt.Iter()
		it.SeekDelta(tc.seek)
		var got []uint32
		var r Record
		for it.Next(&r) {
			got = append(got, r.OffsetDelta)
		}
		if it.Err() != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("%s: deltas %v (%v), want %v", tc.label, got, it.Err(), tc.want)
		}
	}
}
