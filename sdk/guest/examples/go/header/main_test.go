package main

import (
	"testing"

	"github.com/rewind-io/rewind/sdk/guest/filter"
)

func hdrs(kv ...string) filter.Headers {
	var hs []filter.Header
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, filter.Header{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return filter.NewHeaders(hs...)
}

func TestHeader(t *testing.T) {
	h, err := filter.NewHarness([]byte(`{"header":"source","equals":"web"}`))
	if err != nil {
		t.Fatal(err)
	}
	in := []filter.Record{
		{Headers: hdrs("source", "web")},                            // 0 kept
		{Headers: hdrs("a", "b", "source", "app", "source", "web")}, // 1 kept: a later repeat matches
		{Headers: hdrs("source", "webx")},                           // 2
		{Headers: hdrs("Source", "web")},                            // 3 case matters
		{Headers: hdrs("src", "web")},                               // 4
		{},                                                          // 5 no headers
		{Key: []byte("source"), Value: []byte("web")},               // 6 key and value are not headers
		{Headers: hdrs("source", "")},                               // 7
	}
	out, err := h.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, o := range out {
		got = append(got, o.Index)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("kept %v, want [0 1]", got)
	}
}

func TestHeaderBadConfig(t *testing.T) {
	for _, c := range []string{``, `{}`, `{"header":"a"}`, `{"equals":"b"}`, `{"header":"a","equals":2}`, `{"header":null,"equals":"b"}`} {
		if _, err := filter.NewHarness([]byte(c)); err == nil {
			t.Errorf("config %q accepted", c)
		}
	}
}

func TestHeaderNoAllocs(t *testing.T) {
	h, err := filter.NewHarness([]byte(`{"header":"source","equals":"web"}`))
	if err != nil {
		t.Fatal(err)
	}
	in := make([]filter.Record, 100)
	for i := range in {
		in[i].Headers = hdrs("trace", "x", "source", []string{"web", "app"}[i%2])
	}
	run, err := h.Prepare(in)
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() { _ = run() }); a != 0 {
		t.Fatalf("%v allocations per call", a)
	}
}
