package filter

import (
	"bytes"
	"testing"
)

// FuzzRewindFilter feeds arbitrary input bytes and counts to rewind_filter's
// code path, for a filter and a transform: it must return -1 or outputs the
// host accepts, and never panic (a panic would be recovered and logged as
// "filter: panic", which the test also refuses).
func FuzzRewindFilter(f *testing.F) {
	one := appendRecord(nil, rec(7, "key", "value", "h", "v"))
	f.Add(one, 1, false)
	f.Add(append(append([]byte{}, one...), one...), 2, true)
	f.Add(appendRecord(nil, rec(0, "", "")), 1, true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, 1, false)
	f.Fuzz(func(t *testing.T, b []byte, count int, transform bool) {
		reset(t)
		SetBufferSizes(4096, 4096)
		if transform {
			Transform(func(r Record) (Record, bool) {
				if len(r.Key)%2 == 0 {
					return r, true
				}
				r.Key = r.Value
				return r, len(r.Value)%3 != 0
			})
		} else {
			Filter(func(r Record) bool {
				_, ok := r.Headers.Get("h")
				for range r.Headers.All() {
				}
				return ok || len(r.Value) > 2
			})
		}
		h := harness(t, "")
		if len(b) > len(guest.in) {
			b = b[:len(guest.in)]
		}
		copy(guest.in, b)
		code := filterCall(count, len(b))
		for _, l := range h.Logs() {
			if len(l) > 13 && l[:14] == "filter: panic:" {
				t.Fatalf("panic: %s", l)
			}
		}
		if code == codeFailed {
			return
		}
		if code < 0 {
			t.Fatalf("code %d", code)
		}
		// The input was valid: it must decode to count records, which
		// re-encode to the same bytes, and the outputs must be valid.
		var records []Record
		p := 0
		for range count {
			r, next, ok := nextRecord(b, p)
			if !ok {
				t.Fatalf("rewind_filter accepted input that does not decode at %d", p)
			}
			records, p = append(records, r), next
		}
		var again []byte
		for _, r := range records {
			again = appendRecord(again, r)
		}
		if !bytes.Equal(b, again) {
			t.Fatalf("re-encoding differs:\n%q\n%q", b, again)
		}
		if _, err := decodeOutputs(nil, guest.out[:code], records, 0, count); err != nil {
			t.Fatal(err)
		}
	})
}
