package main

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rewind-io/rewind/sdk/guest/filter"
)

type result struct {
	Index    int
	Replaced bool
	Key      string
	Value    string
	Headers  int
}

func run(t *testing.T, config string, vs ...string) []result {
	t.Helper()
	h, err := filter.NewHarness([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Run(records(vs...))
	if err != nil {
		t.Fatal(err)
	}
	var got []result
	for _, o := range out {
		got = append(got, result{o.Index, o.Replaced, string(o.Record.Key), string(o.Record.Value), o.Record.Headers.Len()})
	}
	return got
}

func records(vs ...string) []filter.Record {
	var in []filter.Record
	for i, v := range vs {
		in = append(in, filter.Record{Offset: uint64(i), Key: []byte("k" + strconv.Itoa(i)), Value: []byte(v),
			Headers: filter.NewHeaders(filter.Header{Key: []byte("h"), Value: []byte("v")})})
	}
	return in
}

func TestProject(t *testing.T) {
	got := run(t, `{"fields":["id","type"]}`,
		`{"type":"a","x":1,"id":7}`,            // 0 input order kept
		` { "id" : [1, 2] , "z" : {"id":1} } `, // 1 raw value kept, whitespace between tokens dropped
		`{"x":1}`,                              // 2 none: {}
		`{}`,                                   // 3 {}
		`{"id":1,"id":2,"type":"t"}`,           // 4 every occurrence
		`[1]`,                                  // 5 not an object: dropped
		`{"id":1,}`,                            // 6 invalid: dropped
		`{"i\u0064":1,"id":"\u00e9"}`,          // 7 raw keys: only the second matches
		`{"id":1}`,                             // 8 identical bytes, still a replacement
	)
	want := []result{
		{0, true, "k0", `{"type":"a","id":7}`, 1},
		{1, true, "k1", `{"id":[1, 2]}`, 1},
		{2, true, "k2", `{}`, 1},
		{3, true, "k3", `{}`, 1},
		{4, true, "k4", `{"id":1,"id":2,"type":"t"}`, 1},
		{7, true, "k7", `{"id":"\u00e9"}`, 1},
		{8, true, "k8", `{"id":1}`, 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestProjectEdgeConfigs(t *testing.T) {
	if got := run(t, `{"fields":[]}`, `{"a":1}`); len(got) != 1 || got[0].Value != `{}` {
		t.Fatalf("no fields: %+v", got)
	}
	if got := run(t, `{"fields":["a","a"]}`, `{"a":1,"a":2}`); len(got) != 1 || got[0].Value != `{"a":1,"a":2}` {
		t.Fatalf("listed twice: %+v", got)
	}
	// A listed key with an escape in the config matches the raw key only
	// when written with an escaped backslash.
	if got := run(t, `{"fields":["a\\\"b"]}`, `{"a\"b":1}`); len(got) != 1 || got[0].Value != `{"a\"b":1}` {
		t.Fatalf("escaped key: %+v", got)
	}
}

func TestProjectBadConfig(t *testing.T) {
	for _, c := range []string{``, `{}`, `{"fields":"id"}`, `{"fields":[1]}`, `{"fields":null}`, `{"fields":["a",null]}`} {
		if _, err := filter.NewHarness([]byte(c)); err == nil {
			t.Errorf("config %q accepted", c)
		}
	}
}

func TestProjectNoAllocs(t *testing.T) {
	h, err := filter.NewHarness([]byte(`{"fields":["id","type"]}`))
	if err != nil {
		t.Fatal(err)
	}
	run, err := h.Prepare(records(`{"id":1,"type":"a","x":[1,2,3]}`, `{"z":{"id":2},"id":2}`, `{"type":"c"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() { _ = run() }); a != 0 {
		t.Fatalf("%v allocations per call", a)
	}
}
