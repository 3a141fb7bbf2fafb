package main

import (
	"testing"

	"github.com/rewind-io/rewind/sdk/guest/filter"
)

func TestSample(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   []uint64
	}{
		{`{"n":10}`, []uint64{0, 10, 20, 10 << 40}},
		{`{"n":1}`, []uint64{0, 3, 7, 10, 11, 20, 21, 10 << 40, 1<<64 - 1}},
		{`{"n":9223372036854775807}`, []uint64{0}},
		{`{"n":2,"n":10,"x":"y"}`, []uint64{0, 10, 20, 10 << 40}},
	} {
		h, err := filter.NewHarness([]byte(tc.config))
		if err != nil {
			t.Fatal(err)
		}
		h.MaxRecordsPerCall = 2 // batching must not matter
		var in []filter.Record
		for _, off := range []uint64{0, 3, 7, 10, 11, 20, 21, 10 << 40, 1<<64 - 1} {
			in = append(in, filter.Record{Offset: off})
		}
		out, err := h.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, o := range out {
			got = append(got, o.Record.Offset)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: kept %v, want %v", tc.config, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("%s: kept %v, want %v", tc.config, got, tc.want)
			}
		}
	}
}

func TestSampleBadConfig(t *testing.T) {
	for _, c := range []string{``, `{}`, `{"n":0}`, `{"n":-1}`, `{"n":1.5}`, `{"n":1e1}`, `{"n":"10"}`, `{"n":9223372036854775808}`, `{"n":null}`, `{"n":10,"n":null}`} {
		if _, err := filter.NewHarness([]byte(c)); err == nil {
			t.Errorf("config %q accepted", c)
		}
	}
}
