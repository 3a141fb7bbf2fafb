package stream

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/resume"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// TestContainsDeliversTheMatchingRecords: a stream with Options.Contains
// delivers exactly the records whose key, value, or a header's key or
// value holds the bytes, in offset order with their own offsets, also
// past a long run of records that do not match (more than a round's
// scan); the end position covers every record read, so a resume from the
// stream's last token finds only what was appended later.
func TestContainsDeliversTheMatchingRecords(t *testing.T) {
	e := newEnv(t, 2, 64<<20)
	rec := func(key, value string, headers ...string) record.Record {
		r := record.Record{Key: []byte(key), Value: []byte(value)}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Headers = append(r.Headers, record.Header{Key: []byte(headers[i]), Value: []byte(headers[i+1])})
		}
		return r
	}
	appendTo := func(p int, rs ...record.Record) {
		t.Helper()
		if _, err := e.parts[p].Append(context.Background(), rs); err != nil {
			t.Fatal(err)
		}
	}
	appendTo(0,
		rec("k0", "nothing here"),                    // 0
		rec("k-needle-1", "v"),                       // 1: in the key
		rec("k2", "a NEEDLE is not a needle"),        // 2: in the value (case-sensitive: the second word)
		rec("k3", "v", "needle-header", "x"),         // 3: a header's key
		rec("k4", "v", "h", "hay", "h2", "a needle"), // 4: a header's value (the second header)
		rec("k5", "Needle, capitalised"),             // 5: no
	)
	var filler []record.Record
	for i := range 300 { // more than MaxScanPerEvent below: several rounds of nothing
		filler = append(filler, rec(fmt.Sprint("f", i), "hay"))
	}
	appendTo(1, filler...)
	appendTo(1, rec("late", "the needle at last")) // 300
	appendTo(1, rec("k", "\x00\xffneedle\x01"))    // 301: binary values match by bytes

	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd})
	s := newSink()
	opts := Options{Contains: []byte("needle"), MaxScanPerEvent: 64, MaxRecordsPerEvent: 16}
	if err := Run(context.Background(), topicID, e.sources(), cs, opts, s); err != nil {
		t.Fatal(err)
	}
	evs := s.snapshot()
	got := sortByPartition(records(evs))
	want := []delivered{
		{0, 1, "v"}, {0, 2, "a NEEDLE is not a needle"}, {0, 3, "v"}, {0, 4, "v"},
		{1, 300, "the needle at last"}, {1, 301, "\x00\xffneedle\x01"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(delivered{})); diff != "" {
		t.Fatalf("delivered (-want +got):\n%s", diff)
	}
	end := evs[len(evs)-1].GetEnd()
	if end == nil || end.GetPartitions()[0].GetNextOffset() != 6 || end.GetPartitions()[1].GetNextOffset() != 302 {
		t.Fatalf("the stream ends with %v, want an end at offsets 6 and 302", evs[len(evs)-1])
	}

	// Resume from the end's token: only the newer match.
	tok, err := resume.Parse(end.GetResumeToken())
	if err != nil {
		t.Fatal(err)
	}
	appendTo(0, rec("n1", "hay"), rec("n2", "needle again"))
	s2 := newSink()
	if err := Run(context.Background(), topicID, e.sources(), e.resolve(cursor.Start{Kind: cursor.FromToken, Token: tok}, cursor.Stop{Kind: cursor.AtEnd}), opts, s2); err != nil {
		t.Fatal(err)
	}
	if got, want := records(s2.snapshot()), []delivered{{0, 7, "needle again"}}; !cmp.Equal(got, want, cmp.AllowUnexported(delivered{})) {
		t.Fatalf("resumed, the stream delivered %v, want %v", got, want)
	}
}

// discard is a sink that counts records and keeps nothing.
type discard struct{ records int }

func (d *discard) Send(m *rewindv1.SubscribeResponse) error {
	d.records += len(m.GetRecords().GetRecords())
	return nil
}

// BenchmarkContains replays a partition of 100,000 records of 100 bytes:
// unfiltered (every record sent), searched for bytes in one record of 100,
// and searched for bytes no record holds (the unfavourable case: every
// record is read and tested, in rounds of MaxScanPerEvent, and nothing is
// sent). records/s counts the records read.
func BenchmarkContains(b *testing.B) {
	const n = 100_000
	e := newEnv(b, 1, 256<<20)
	for i := 0; i < n; i += 1000 {
		rs := make([]record.Record, 1000)
		for j := range rs {
			typ := "order.updated"
			if (i+j)%100 == 42 {
				typ = "order.created"
			}
			rs[j] = record.Record{Key: fmt.Appendf(nil, "k-%02d", (i+j)%100),
				Value: fmt.Appendf(nil, `{"id":%10d,"type":%q,"customer":"c-%04d","note":"abcdefghijklmn"}`, i+j, typ, (i+j)%1000)}
		}
		if _, err := e.parts[0].Append(context.Background(), rs); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name     string
		contains []byte
		want     int
	}{
		{"all", nil, n},
		{"one-in-100", []byte("order.created"), n / 100},
		{"none", []byte("no such bytes"), 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d := &discard{}
				cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd})
				if err := Run(context.Background(), topicID, e.sources(), cs, Options{Contains: bc.contains}, d); err != nil {
					b.Fatal(err)
				}
				if d.records != bc.want {
					b.Fatalf("%d records delivered, want %d", d.records, bc.want)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
