package main

import (
	"strconv"
	"testing"

	"github.com/rewind-io/rewind/sdk/guest/filter"
)

func TestKeyprefix(t *testing.T) {
	h, err := filter.NewHarness([]byte(`{"prefix":"user-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"user-1", "user-10", "user-2", "", "user", "xuser-1", "user-1\x00"}
	var in []filter.Record
	for i, k := range keys {
		in = append(in, filter.Record{Offset: uint64(i), Key: []byte(k), Value: []byte("v")})
	}
	out, err := h.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, o := range out {
		if o.Replaced {
			t.Fatalf("filter replaced a record: %+v", o)
		}
		got = append(got, o.Index)
	}
	if want := []int{0, 1, 6}; !equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
}

func TestKeyprefixEmptyPrefixKeepsAll(t *testing.T) {
	h, err := filter.NewHarness([]byte(` { "prefix" : "" } `))
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Run([]filter.Record{{}, {Key: []byte("a")}})
	if err != nil || len(out) != 2 {
		t.Fatalf("%d outputs, %v", len(out), err)
	}
}

func TestKeyprefixBadConfig(t *testing.T) {
	for _, c := range []string{``, `{}`, `[]`, `{"prefix":1}`, `{"prefix":"a"`, `{"prefix":null}`, `{"prefix":"a","prefix":null}`, `{"pre\u0066ix":"a"}`} {
		if _, err := filter.NewHarness([]byte(c)); err == nil {
			t.Errorf("config %q accepted", c)
		}
	}
}

// TestKeyprefixConfigRules checks the config rules every example shares:
// unknown fields ignored, the last of repeated fields wins, null is absent.
func TestKeyprefixConfigRules(t *testing.T) {
	for _, c := range []string{`{"prefix":"user-1","other":[1]}`, `{"prefix":"x","prefix":"user-1"}`, `{"prefix":null,"prefix":"user-1"}`} {
		h, err := filter.NewHarness([]byte(c))
		if err != nil {
			t.Fatalf("config %s: %v", c, err)
		}
		out, err := h.Run([]filter.Record{{Key: []byte("user-1")}, {Key: []byte("x")}})
		if err != nil || len(out) != 1 || out[0].Index != 0 {
			t.Fatalf("config %s: %+v, %v", c, out, err)
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// batch is 256 records of about 100 bytes, a tenth of them matching
// user-1.
func batch() []filter.Record {
	var in []filter.Record
	for i := range 256 {
		in = append(in, filter.Record{
			Offset:  uint64(i),
			Key:     []byte("user-" + strconv.Itoa(i%10) + "-" + strconv.Itoa(100000+i)),
			Value:   []byte(`{"id":` + strconv.Itoa(i) + `,"type":"order.created","total":12.5}`),
			Headers: filter.NewHeaders(filter.Header{Key: []byte("source"), Value: []byte("web")}),
		})
	}
	return in
}

func TestKeyprefixNoAllocs(t *testing.T) {
	h, err := filter.NewHarness([]byte(`{"prefix":"user-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	run, err := h.Prepare(batch())
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() { _ = run() }); a != 0 {
		t.Fatalf("%v allocations per call", a)
	}
}

// BenchmarkKeyprefix measures the dispatch and the filter natively over
// 256-record calls.
func BenchmarkKeyprefix(b *testing.B) {
	h, err := filter.NewHarness([]byte(`{"prefix":"user-1"}`))
	if err != nil {
		b.Fatal(err)
	}
	in := batch()
	run, err := h.Prepare(in)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/record")
}
