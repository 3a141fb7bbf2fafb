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

func run(t *testing.T, config string, in []filter.Record) []result {
	t.Helper()
	h, err := filter.NewHarness([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []result
	for _, o := range out {
		got = append(got, result{o.Index, o.Replaced, string(o.Record.Key), string(o.Record.Value), o.Record.Headers.Len()})
	}
	return got
}

func values(vs ...string) []filter.Record {
	var in []filter.Record
	for i, v := range vs {
		in = append(in, filter.Record{Offset: uint64(i), Key: []byte("k" + strconv.Itoa(i)), Value: []byte(v),
			Headers: filter.NewHeaders(filter.Header{Key: []byte("h"), Value: []byte("v")})})
	}
	return in
}

func TestRedact(t *testing.T) {
	in := values(
		`{"email":"a@b.c","id":1}`,        // 0 string replaced
		`{ "id":1, "email" : {"x":[1]} }`, // 1 object replaced, spacing kept
		`{"id":1}`,                        // 2 absent: unchanged
		`{"email":1,"email":2}`,           // 3 every occurrence
		`[{"email":1}]`,                   // 4 not an object: dropped
		`{"email":"x"`,                    // 5 invalid: dropped
		``,                                // 6 dropped
		`{"nested":{"email":"x"}}`,        // 7 not top-level: unchanged
		`{"email":null}`,                  // 8 null replaced
	)
	got := run(t, `{"field":"email"}`, in)
	want := []result{
		{0, true, "k0", `{"email":"***","id":1}`, 1},
		{1, true, "k1", `{ "id":1, "email" : "***" }`, 1},
		{2, false, "k2", `{"id":1}`, 1},
		{3, true, "k3", `{"email":"***","email":"***"}`, 1},
		{7, false, "k7", `{"nested":{"email":"x"}}`, 1},
		{8, true, "k8", `{"email":"***"}`, 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestRedactWith(t *testing.T) {
	// "with" is JSON-decoded from the config, then re-encoded escaping
	// only '"' and '\'.
	got := run(t, `{"field":"e","with":"a\"b\\c\u00e9/"}`, values(`{"e":true}`))
	want := []result{{0, true, "k0", `{"e":"a\"b\\cé/"}`, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	got = run(t, `{"with":"","field":"e"}`, values(`{"e":true}`))
	if want := `{"e":""}`; len(got) != 1 || got[0].Value != want {
		t.Fatalf("got %+v, want value %s", got, want)
	}
	got = run(t, `{"with":"x","field":"e","with":null}`, values(`{"e":true}`))
	if want := `{"e":"***"}`; len(got) != 1 || got[0].Value != want {
		t.Fatalf("null with: got %+v, want value %s", got, want)
	}
}

func TestRedactBadConfig(t *testing.T) {
	for _, c := range []string{``, `{}`, `{"with":"x"}`, `{"field":1}`, `{"field":"a","with":1}`, `{"field":null,"with":"x"}`} {
		if _, err := filter.NewHarness([]byte(c)); err == nil {
			t.Errorf("config %q accepted", c)
		}
	}
}

func TestRedactNoAllocs(t *testing.T) {
	h, err := filter.NewHarness([]byte(`{"field":"email"}`))
	if err != nil {
		t.Fatal(err)
	}
	run, err := h.Prepare(values(`{"email":"a@b.c","id":1}`, `{"id":2}`, `{"id":3,"email":"x@y.z","n":[1,2,3]}`))
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() { _ = run() }); a != 0 {
		t.Fatalf("%v allocations per call", a)
	}
}
