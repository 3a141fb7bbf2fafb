package stream

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/resume"
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
