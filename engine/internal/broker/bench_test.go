package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rewind-io/rewind/engine/internal/record"
)

// BenchmarkPublishIdempotent publishes 100-record requests from 4
// publishers into a 4-partition topic on disk (no network): records with
// keys and no idempotency key, keyless records with idempotency keys (each
// goes to its key's home partition: no binding), and keyed records with
// idempotency keys (three in four are routed away from their key's home
// partition and bound there first; idempotency.go).
func BenchmarkPublishIdempotent(b *testing.B) {
	for _, c := range []struct {
		name       string
		key, idemp bool
	}{{"keyed", true, false}, {"keyless-idempotent", false, true}, {"keyed-idempotent", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			br, err := Open(Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			ctx := context.Background()
			if _, err := br.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 4, DedupeWindow: -1}); err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 100)
			var seq atomic.Uint64
			const per = 100
			b.ReportAllocs()
			b.SetParallelism(2) // 2 × GOMAXPROCS(2) = 4 publishers
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				recs := make([]PublishRecord, per)
				for pb.Next() {
					for i := range recs {
						n := seq.Add(1)
						recs[i] = PublishRecord{Record: record.Record{Value: payload}}
						if c.key {
							recs[i].Key = fmt.Appendf(nil, "k%d", n%1000)
						}
						if c.idemp {
							recs[i].IdempotencyKey = fmt.Appendf(nil, "ik-%d", n)
						}
					}
					if _, _, err := br.Publish(ctx, "t", recs); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkPublishKeyless publishes keyless requests of 1, 100 and 1,000
// records of 100 bytes from 4 publishers into a 4-partition topic on disk:
// the sticky runs (stickyBytes) keep a request's records in as few
// partitions as possible.
func BenchmarkPublishKeyless(b *testing.B) {
	for _, per := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("records=%d", per), func(b *testing.B) {
			br, err := Open(Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			ctx := context.Background()
			if _, err := br.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 4}); err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 100)
			b.ReportAllocs()
			b.SetParallelism(2) // 2 × GOMAXPROCS(2) = 4 publishers
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				recs := make([]PublishRecord, per)
				for i := range recs {
					recs[i] = PublishRecord{Record: record.Record{Value: payload}}
				}
				for pb.Next() {
					if _, _, err := br.Publish(ctx, "t", recs); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkPublishWide publishes one-record requests (keyless, then keyed)
// from 4 publishers into topics of 4, 64 and 1,024 partitions on disk: what
// a topic's partition count costs each request (the per-partition slices
// of a publish, the spreader's scan), beside what each partition costs a
// node idle (docs/partition-cost.sh). Behind the per-topic cap,
// MaxPartitions.
func BenchmarkPublishWide(b *testing.B) {
	for _, parts := range []uint32{4, 64, 1024} {
		for _, keyed := range []bool{false, true} {
			b.Run(fmt.Sprintf("partitions=%d/keyed=%v", parts, keyed), func(b *testing.B) {
				br, err := Open(Config{Dir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				defer br.Close()
				ctx := context.Background()
				if _, err := br.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: parts, NoKeyIndex: true}); err != nil {
					b.Fatal(err)
				}
				payload := make([]byte, 100)
				var seq atomic.Uint64
				b.ReportAllocs()
				b.SetParallelism(2) // 2 × GOMAXPROCS(2) = 4 publishers
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						r := PublishRecord{Record: record.Record{Value: payload}}
						if keyed {
							r.Key = fmt.Appendf(nil, "k%d", seq.Add(1)%4096)
						}
						if _, _, err := br.Publish(ctx, "t", []PublishRecord{r}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
