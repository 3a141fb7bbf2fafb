package main

import (
	"strconv"
	"testing"

	"github.com/rewind-io/rewind/sdk/guest/filter"
)

func kept(t *testing.T, config string, values []string) []int {
	t.Helper()
	h, err := filter.NewHarness([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	var in []filter.Record
	for i, v := range values {
		in = append(in, filter.Record{Offset: uint64(i), Value: []byte(v)})
	}
	out, err := h.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	got := []int{}
	for _, o := range out {
		if o.Replaced {
			t.Fatalf("filter replaced a record: %+v", o)
		}
		got = append(got, o.Index)
	}
	return got
}

func TestJSONField(t *testing.T) {
	values := []string{
		`{"type":"order.created"}`,                  // 0 kept
		` { "id" : 1 , "type" : "order.created" } `, // 1 kept
		`{"type":"order.created2"}`,                 // 2 other value
		`{"type":"order"}`,                          // 3 prefix only
		`{"type":"order.created",}`,                 // 4 invalid JSON
		`{"type":"order.created"} x`,                // 5 trailing garbage
		`["type","order.created"]`,                  // 6 not an object
		`{"typ":"order.created"}`,                   // 7 missing
		`{"type":["order.created"]}`,                // 8 not a string
		`{"nested":{"type":"order.created"}}`,       // 9 not top-level
		`{"type":"order\u002ecreated"}`,             // 10 escapes not processed
		`{"type":"order.created","type":"x"}`,       // 11 first occurrence wins
		`{"type":"x","type":"order.created"}`,       // 12 likewise
		`{"ty\u0070e":"order.created"}`,             // 13 raw key differs
		``,                                          // 14 empty
		`"order.created"`,                           // 15 a string
	}
	got := kept(t, `{"field":"type","equals":"order.created"}`, values)
	if want := []int{0, 1, 11}; !equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	// The config is decoded JSON, the record is compared raw: to match a
	// raw escape, the config escapes its backslash.
	got = kept(t, `{"field":"type","equals":"order\\u002ecreated"}`, values)
	if want := []int{10}; !equal(got, want) {
		t.Fatalf("raw escape: kept %v, want %v", got, want)
	}
	got = kept(t, `{"field":"type","equals":"order\u002ecreated"}`, values)
	if want := []int{0, 1, 11}; !equal(got, want) {
		t.Fatalf("escaped config: kept %v, want %v", got, want)
	}
	got = kept(t, `{"equals":"","field":"e"}`, []string{`{"e":""}`, `{"e":" "}`, `{"e":null}`})
	if want := []int{0}; !equal(got, want) {
		t.Fatalf("empty string: kept %v, want %v", got, want)
	}
}

func TestJSONFieldBadConfig(t *testing.T) {
	for _, c := range []string{``, `{}`, `{"field":"type"}`, `{"equals":"x"}`, `{"field":1,"equals":"x"}`, `{"field":"a","equals":null}`} {
		if _, err := filter.NewHarness([]byte(c)); err == nil {
			t.Errorf("config %q accepted", c)
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

// batch is 256 records of about 100 bytes, a third of them matching.
func batch() []filter.Record {
	types := []string{"order.created", "order.paid", "user.signup"}
	var in []filter.Record
	for i := range 256 {
		in = append(in, filter.Record{
			Offset:  uint64(i),
			Key:     []byte("user-" + strconv.Itoa(100000+i)),
			Value:   []byte(`{"id":` + strconv.Itoa(100000+i) + `,"type":"` + types[i%3] + `","total":12.5,"ok":true}`),
			Headers: filter.NewHeaders(filter.Header{Key: []byte("source"), Value: []byte("web")}),
		})
	}
	return in
}

func TestJSONFieldNoAllocs(t *testing.T) {
	h, err := filter.NewHarness([]byte(`{"field":"type","equals":"order.created"}`))
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

// BenchmarkJSONField measures the dispatch and the filter natively over
// 256-record calls.
func BenchmarkJSONField(b *testing.B) {
	h, err := filter.NewHarness([]byte(`{"field":"type","equals":"order.created"}`))
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
