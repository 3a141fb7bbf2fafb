package sandbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rewind-io/rewind/sandbox"
)

// benchRecords are n records of about 100 bytes: a key "k-NN" and a JSON
// value whose "type" matches "order.created" in one record of 100.
func benchRecords(n int) []rec {
	out := make([]rec, n)
	for i := range out {
		typ := "order.updated"
		if i%100 == 42 {
			typ = "order.created"
		}
		out[i] = rec{offset: uint64(i), time: int64(i), key: fmt.Sprintf("k-%02d", i%100),
			value: fmt.Sprintf(`{"id":%8d,"type":%q,"customer":"c-%04d","amount":%6d,"note":"abcdefgh"}`, i, typ, i%1000, i%99999)}
	}
	return out
}

// BenchmarkFilter measures the per-record cost of a filter call, by module
// and batch size (records per guest call): records/s is what one core scans.
func BenchmarkFilter(b *testing.B) {
	r := newRuntime(b, sandbox.Limits{MaxRecordsPerCall: 4096})
	recs := benchRecords(4096)
	for _, c := range []struct{ name, config string }{
		{"keyprefix", `{"prefix":"k-42"}`},
		{"jsonfield", `{"field":"type","equals":"order.created"}`},
		{"jsonfield-99pct", `{"field":"type","equals":"order.updated"}`}, // the worst case: nearly all match
		{"keepall", `{"prefix":""}`},
	} {
		for _, lang := range []string{"go", "as"} {
			name := c.name
			switch name {
			case "keepall":
				name = "keyprefix"
			case "jsonfield-99pct":
				name = "jsonfield"
			}
			m := compile(b, r, module(b, lang, name))
			f := m.NewFilter([]byte(c.config))
			for _, size := range []int{1, 16, 128, 1024, 4096} {
				batch := batchOf(recs[:size])
				b.Run(fmt.Sprintf("%s/%s/batch=%d", c.name, lang, size), func(b *testing.B) {
					var outs []sandbox.Output
					var err error
					for b.Loop() {
						outs, err = f.Run(context.Background(), batch, outs[:0])
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "records/s")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/record")
				})
			}
		}
	}
}
