package engine_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// benchClient starts a node with or without auth and returns a client
// whose principal holds exactly publish, read and replay on topic t (with
// auth), or an anonymous one.
func benchClient(b *testing.B, withAuth bool) *client.Client {
	if !withAuth {
		addr := enginetest.StartNode(b, engine.Config{}).URL
		return client.New(addr)
	}
	a := startAuthNode(b, nil)
	root := a.client(a.root)
	if _, err := root.CreateTopic(context.Background(), "t", client.WithPartitions(4)); err != nil {
		b.Fatal(err)
	}
	return a.client(a.user(b, "bench", "allow publish,read,replay,describe topic:t"))
}

// BenchmarkAuthCost measures what authentication and authorization cost:
// the same publishes and replay as BenchmarkPublish and BenchmarkReplay
// (and a publish of one record per request, where the per-call check
// weighs most), with auth off and on. Besides records/s it reports the
// process's CPU time per record (cpu-ns/record), which a busy machine
// disturbs far less.
func BenchmarkAuthCost(b *testing.B) {
	payload := make([]byte, 100)
	rand.Read(payload)
	for _, batch := range []int{1000, 1} {
		for _, on := range []bool{false, true} {
			b.Run(benchName("publish", batch, on), func(b *testing.B) {
				c := benchClient(b, on)
				ctx := context.Background()
				if !on {
					if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(4)); err != nil {
						b.Fatal(err)
					}
				}
				msgs := make([]client.Message, batch)
				for i := range msgs {
					msgs[i].Value = payload
				}
				b.ReportAllocs()
				b.SetParallelism(2)
				b.ResetTimer()
				cpu := cpuTime()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := c.Publish(ctx, "t", msgs...); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N*batch), "cpu-ns/record")
			})
		}
	}
	for _, on := range []bool{false, true} {
		b.Run(benchName("replay", 0, on), func(b *testing.B) {
			c := benchClient(b, on)
			const records = 200_000
			ctx := context.Background()
			if !on {
				if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(4)); err != nil {
					b.Fatal(err)
				}
			}
			msgs := make([]client.Message, 1000)
			for i := range msgs {
				msgs[i].Value = payload
			}
			for n := 0; n < records; n += len(msgs) {
				if _, err := c.Publish(ctx, "t", msgs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			total := 0
			for b.Loop() {
				n := replayCount(b, c, "t")
				if n != records {
					b.Fatalf("replayed %d records, want %d", n, records)
				}
				total += n
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(cpuTime()-cpu)/float64(total), "cpu-ns/record")
		})
	}
}

func benchName(what string, batch int, on bool) string {
	s := what
	if batch > 0 {
		s += "-batch" + strconv.Itoa(batch)
	}
	if on {
		return s + "/auth=on"
	}
	return s + "/auth=off"
}
