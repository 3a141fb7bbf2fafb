package filter

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// reset forgets the registration and buffers, as a fresh module would
// start, so each test registers its own function.
func reset(t testing.TB) {
	t.Helper()
	guest, logHook = module{}, nil
	t.Cleanup(func() { guest, logHook = module{}, nil })
}

func harness(t testing.TB, config string) *Harness {
	t.Helper()
	h, err := NewHarness([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func rec(off uint64, key, value string, hs ...string) Record {
	var h []Header
	for i := 0; i+1 < len(hs); i += 2 {
		h = append(h, Header{Key: []byte(hs[i]), Value: []byte(hs[i+1])})
	}
	return Record{Offset: off, Time: int64(off) * 1000, Key: []byte(key), Value: []byte(value), Headers: NewHeaders(h...)}
}

// cmpRecords compares records by content (nil and empty alike).
var cmpRecords = cmp.Transformer("record", func(r Record) map[string]any {
	var hs []string
	for k, v := range r.Headers.All() {
		hs = append(hs, string(k)+"="+string(v))
	}
	return map[string]any{"off": r.Offset, "time": r.Time, "key": string(r.Key), "value": string(r.Value), "headers": hs}
})

func TestFilterKeepsInOrder(t *testing.T) {
	reset(t)
	Filter(func(r Record) bool { return bytes.HasPrefix(r.Key, []byte("a")) })
	h := harness(t, "")
	in := []Record{rec(10, "a1", "x"), rec(11, "b", "y", "h", "1"), rec(12, "a2", "", "k", "v", "k2", "")}
	out, err := h.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Output{{Index: 0, Record: in[0]}, {Index: 2, Record: in[2]}}
	if diff := cmp.Diff(want, out, cmpRecords); diff != "" {
		t.Fatalf("outputs (-want +got):\n%s", diff)
	}
}

func TestTransformUnchangedAndReplaced(t *testing.T) {
	reset(t)
	var scratch []byte
	Transform(func(r Record) (Record, bool) {
		switch string(r.Key) {
		case "drop":
			return r, false
		case "same":
			return r, true
		}
		scratch = append(append(scratch[:0], r.Value...), '!')
		return Record{Key: r.Key, Value: scratch, Headers: NewHeaders(Header{Key: []byte("t"), Value: []byte("1")})}, true
	})
	h := harness(t, "")
	in := []Record{rec(1, "same", "v1", "a", "b"), rec(2, "drop", "v2"), rec(3, "new", "v3", "a", "b")}
	out, err := h.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Output{
		{Index: 0, Record: in[0]},
		{Index: 2, Replaced: true, Record: rec(3, "new", "v3!", "t", "1")},
	}
	if diff := cmp.Diff(want, out, cmpRecords); diff != "" {
		t.Fatalf("outputs (-want +got):\n%s", diff)
	}
}

func TestOutputFullHalves(t *testing.T) {
	reset(t)
	SetBufferSizes(4096, 64) // the output holds 12 keeps
	calls := 0
	Filter(func(Record) bool { calls++; return true })
	h := harness(t, "")
	var in []Record
	for i := range 40 {
		in = append(in, rec(uint64(i), "k", "v"))
	}
	out, err := h.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 40 || out[39].Index != 39 {
		t.Fatalf("%d outputs, last %+v", len(out), out[len(out)-1])
	}
	if calls <= 40 {
		t.Fatalf("function called %d times; want retries after a full output", calls)
	}
}

func TestOutputTooBigForOneRecord(t *testing.T) {
	reset(t)
	SetBufferSizes(4096, 64)
	big := make([]byte, 100)
	Transform(func(r Record) (Record, bool) { return Record{Value: big}, true })
	_, err := harness(t, "").Run([]Record{rec(0, "k", "v")})
	if err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("err %v; want output buffer full", err)
	}
}

func TestInit(t *testing.T) {
	reset(t)
	if _, err := NewHarness(nil); err == nil || !strings.Contains(err.Error(), "no function registered") {
		t.Fatalf("init without a function: %v", err)
	}
	reset(t)
	Filter(func(Record) bool { return true })
	var got []byte
	OnInit(func(config []byte) error {
		got = config
		if string(config) == "bad" {
			return errors.New("bad config")
		}
		return nil
	})
	if _, err := NewHarness([]byte("bad")); err == nil || err.Error() != "filter: init: bad config" {
		t.Fatalf("bad config: %v", err)
	}
	if code := filterCall(0, 0); code != codeFailed {
		t.Fatalf("rewind_filter after a failed init: %d", code)
	}
	h := harness(t, `{"a":1}`)
	copy(guest.in, "xxxxxxx") // the callback's config is its own copy
	if string(got) != `{"a":1}` {
		t.Fatalf("config %q", got)
	}
	if code := filterCall(0, 0); code != 0 {
		t.Fatalf("empty call: %d", code)
	}
	_ = h
	if code := initCall(len(guest.in) + 1); code != 1 {
		t.Fatalf("config longer than the buffer: %d", code)
	}
	if code := initCall(-1); code != 1 {
		t.Fatalf("negative config length: %d", code)
	}
}

func TestInitPanicIsAnError(t *testing.T) {
	reset(t)
	Filter(func(Record) bool { return true })
	OnInit(func([]byte) error { panic("boom") })
	if _, err := NewHarness(nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v", err)
	}
}

func TestFunctionPanicFailsTheCall(t *testing.T) {
	reset(t)
	Filter(func(r Record) bool { return r.Key[5] == 0 })
	h := harness(t, "")
	_, err := h.Run([]Record{rec(0, "k", "v")})
	if err == nil || !strings.Contains(err.Error(), "index out of range") {
		t.Fatalf("err %v; want the panic logged", err)
	}
	if len(h.Logs()) != 1 || !strings.HasPrefix(h.Logs()[0], "filter: panic: ") {
		t.Fatalf("logs %q", h.Logs())
	}
}

func TestRegistrationPanics(t *testing.T) {
	keep := func(Record) bool { return true }
	same := func(r Record) (Record, bool) { return r, true }
	for name, tc := range map[string]struct {
		setup func()
		call  func()
	}{
		"nil filter":        {func() {}, func() { Filter(nil) }},
		"nil transform":     {func() {}, func() { Transform(nil) }},
		"nil OnInit":        {func() {}, func() { OnInit(nil) }},
		"filter twice":      {func() { Filter(keep) }, func() { Filter(keep) }},
		"both":              {func() { Filter(keep) }, func() { Transform(same) }},
		"OnInit twice":      {func() { OnInit(func([]byte) error { return nil }) }, func() { OnInit(func([]byte) error { return nil }) }},
		"after start":       {func() { buffers() }, func() { Filter(keep) }},
		"sizes after start": {func() { buffers() }, func() { SetBufferSizes(1024, 1024) }},
		"size too small":    {func() {}, func() { SetBufferSizes(MinBufferSize-1, 1024) }},
		"size too big":      {func() {}, func() { SetBufferSizes(1024, MaxBufferSize+1) }},
	} {
		t.Run(name, func(t *testing.T) {
			reset(t)
			tc.setup()
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.call()
		})
	}
}

func TestBufferSizes(t *testing.T) {
	reset(t)
	if in, out := buffers(); len(in) != DefaultBufferSize || len(out) != DefaultBufferSize {
		t.Fatalf("default sizes %d, %d", len(in), len(out))
	}
	reset(t)
	SetBufferSizes(1000, 2000)
	if in, out := buffers(); len(in) != 1000 || len(out) != 2000 {
		t.Fatalf("sizes %d, %d", len(in), len(out))
	}
}

func TestMalformedInputFails(t *testing.T) {
	reset(t)
	Filter(func(Record) bool { return true })
	h := harness(t, "")
	good := appendRecord(nil, rec(7, "key", "value", "h", "v"))
	run := func(b []byte, count int) int32 {
		copy(guest.in, b)
		return filterCall(count, len(b))
	}
	if code := run(good, 1); code != outputFixed {
		t.Fatalf("good record: %d", code)
	}
	// Every truncation of the record, with record_len adjusted or not.
	for n := range len(good) {
		if code := run(good[:n], 1); code != codeFailed {
			t.Errorf("truncated to %d bytes: %d", n, code)
		}
		adjusted := append([]byte{}, good[:n]...)
		if n >= 4 {
			put32(adjusted, uint32(n-4))
			if code := run(adjusted, 1); code != codeFailed {
				t.Errorf("body truncated to %d bytes, length adjusted: %d", n-4, code)
			}
		}
	}
	// Each inner length one too large.
	for _, at := range []int{4 + 16, 4 + 16 + 4 + 3, 4 + 16 + 4 + 3 + 4 + 5, 4 + 16 + 4 + 3 + 4 + 5 + 4} {
		bad := append([]byte{}, good...)
		put32(bad[at:], le32(bad[at:])+1)
		if code := run(bad, 1); code != codeFailed {
			t.Errorf("length at %d too large: %d", at, code)
		}
	}
	for _, tc := range []struct {
		b     []byte
		count int
	}{
		{append(append([]byte{}, good...), 0), 1}, // a trailing byte
		{good, 2}, // fewer records than count
		{append(append([]byte{}, good...), good...), 1}, // more records than count
	} {
		if code := run(tc.b, tc.count); code != codeFailed {
			t.Errorf("%d bytes, count %d: %d", len(tc.b), tc.count, code)
		}
	}
	for _, tc := range [][2]int{{-1, 0}, {0, -1}, {0, len(guest.in) + 1}} {
		if code := filterCall(tc[0], tc[1]); code != codeFailed {
			t.Errorf("count %d, length %d: %d", tc[0], tc[1], code)
		}
	}
	if len(h.Logs()) == 0 {
		t.Error("no log lines for malformed input")
	}
}

func TestHeaders(t *testing.T) {
	var zero Headers
	if zero.Len() != 0 {
		t.Fatal("zero Headers not empty")
	}
	if _, ok := zero.Get("a"); ok {
		t.Fatal("Get on zero Headers")
	}
	h := NewHeaders(Header{Key: []byte("a"), Value: []byte("1")}, Header{Key: []byte(""), Value: nil}, Header{Key: []byte("a"), Value: []byte("2")})
	if h.Len() != 3 {
		t.Fatalf("Len %d", h.Len())
	}
	if k, v := h.At(2); string(k) != "a" || string(v) != "2" {
		t.Fatalf("At(2) = %q, %q", k, v)
	}
	if k, v := h.At(1); len(k) != 0 || len(v) != 0 {
		t.Fatalf("At(1) = %q, %q", k, v)
	}
	if v, ok := h.Get("a"); !ok || string(v) != "1" {
		t.Fatalf("Get(a) = %q, %v", v, ok)
	}
	if _, ok := h.Get("b"); ok {
		t.Fatal("Get(b) found")
	}
	for _, i := range []int{-1, 3} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("At(%d) did not panic", i)
				}
			}()
			h.At(i)
		}()
	}
	k, _ := h.At(0)
	if cap(k) != len(k) {
		t.Fatal("header key capacity exceeds its length")
	}
}

// TestNoAllocsPerRecord proves the hot path allocates nothing: decoding,
// calling the function, reading headers and writing outputs.
func TestNoAllocsPerRecord(t *testing.T) {
	var in []Record
	for i := range 256 {
		in = append(in, rec(uint64(i), "user-"+string(rune('0'+i%10)), `{"type":"order.created","id":1}`, "source", "web", "trace", "abc"))
	}
	for name, register := range map[string]func(){
		"filter": func() {
			Filter(func(r Record) bool {
				v, ok := r.Headers.Get("source")
				return ok && string(v) == "web" && r.Key[5] < '5'
			})
		},
		"transform": func() {
			var scratch []byte
			Transform(func(r Record) (Record, bool) {
				if r.Key[5] < '3' {
					return r, true
				}
				scratch = append(append(scratch[:0], r.Value...), ' ')
				r.Value = scratch
				return r, r.Key[5] < '8'
			})
		},
	} {
		t.Run(name, func(t *testing.T) {
			reset(t)
			register()
			run, err := harness(t, "").Prepare(in)
			if err != nil {
				t.Fatal(err)
			}
			if allocs := testing.AllocsPerRun(50, func() {
				if err := run(); err != nil {
					t.Fatal(err)
				}
			}); allocs != 0 {
				t.Fatalf("%v allocations per call of %d records, want 0", allocs, len(in))
			}
		})
	}
}

func TestHarnessRejectsOversizedRecord(t *testing.T) {
	reset(t)
	SetBufferSizes(256, 256)
	Filter(func(Record) bool { return true })
	_, err := harness(t, "").Run([]Record{rec(0, "k", "v"), rec(1, "k", strings.Repeat("x", 300))})
	if err == nil || !strings.Contains(err.Error(), "record 1 does not fit") {
		t.Fatalf("err %v", err)
	}
}

func TestHarnessSplitsCalls(t *testing.T) {
	reset(t)
	SetBufferSizes(1024, 1024)
	inCall := 0
	Filter(func(r Record) bool { inCall++; return r.Offset%3 == 0 })
	h := harness(t, "")
	h.MaxRecordsPerCall = 7
	var in []Record
	for i := range 100 {
		in = append(in, rec(uint64(i), "key", strings.Repeat("v", i)))
	}
	out, err := h.Run(in) // calls of at most 7 records, fewer as values grow
	if err != nil {
		t.Fatal(err)
	}
	if inCall != 100 {
		t.Fatalf("function saw %d records, want 100", inCall)
	}
	for i, o := range out {
		if o.Index != 3*i || o.Record.Offset != uint64(3*i) {
			t.Fatalf("output %d: %+v", i, o)
		}
	}
}
