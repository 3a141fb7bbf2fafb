package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	"github.com/rewind-io/rewind/sdk/guest/build"
)

func guestModule(tb testing.TB, lang, name string) []byte {
	tb.Helper()
	var b []byte
	var err error
	if lang == "go" {
		b, err = build.Go(context.Background(), filepath.Join("..", "sdk", "guest", "examples", "go", name))
	} else {
		b, err = build.AssemblyScript(filepath.Join("..", "sdk", "guest", "assemblyscript"), name)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fillEvents publishes records of 100 bytes: key "k-NN" (NN = i mod 100)
// and a JSON value whose "type" is "order.created" in one record of 100.
func fillEvents(tb testing.TB, c *client.Client, topic string, partitions uint32, records int) {
	tb.Helper()
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, topic, client.WithPartitions(partitions)); err != nil {
		tb.Fatal(err)
	}
	msgs := make([]client.Message, 1000)
	for n := 0; n < records; n += len(msgs) {
		batch := msgs[:min(len(msgs), records-n)]
		for i := range batch {
			k := (n + i) % 100
			typ := "order.updated"
			if k == 42 {
				typ = "order.created"
			}
			batch[i] = client.Message{Key: []byte(fmt.Sprintf("k-%02d", k)),
				Value: []byte(fmt.Sprintf(`{"id":%10d,"type":%q,"customer":"c-%04d","note":"abcdefghijklmn"}`, n+i, typ, (n+i)%1000))}
		}
		if _, err := c.Publish(ctx, topic, batch...); err != nil {
			tb.Fatal(err)
		}
	}
}

func benchRecordCount(def int) int {
	if v, err := strconv.Atoi(os.Getenv("REWIND_BENCH_RECORDS")); err == nil && v > 0 {
		return v
	}
	return def
}

// replayCount replays topic from the earliest record to the end and
// returns how many records were delivered.
func replayCount(tb testing.TB, c *client.Client, topic string, opts ...client.SubscribeOption) int {
	sub, err := c.Subscribe(context.Background(), topic, append(opts, client.From(client.Earliest()), client.Until(client.End()))...)
	if err != nil {
		tb.Fatal(err)
	}
	defer sub.Close()
	n := 0
	for sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok {
			n += len(r.Records)
		}
	}
	if err := sub.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// BenchmarkFilteredReplay replays a 4-partition topic of 100-byte records
// (500 000 unless REWIND_BENCH_RECORDS says otherwise) through a filter
// that keeps everything or 1%, in both guest languages, against the same
// replay without a filter. scanned/s counts the records read on the server.
func BenchmarkFilteredReplay(b *testing.B) {
	addr := enginetest.StartNode(b, engine.Config{}).URL
	c := client.New(addr)
	records := benchRecordCount(500_000)
	fillEvents(b, c, "t", 4, records)
	for _, v := range []struct {
		name, lang, module, config string
		keep                       int
	}{
		{"none", "", "", "", records},
		{"keepall/go", "go", "keyprefix", `{"prefix":""}`, records},
		{"keepall/as", "as", "keyprefix", `{"prefix":""}`, records},
		{"keyprefix-1pct/go", "go", "keyprefix", `{"prefix":"k-42"}`, records / 100},
		{"keyprefix-1pct/as", "as", "keyprefix", `{"prefix":"k-42"}`, records / 100},
		{"jsonfield-1pct/go", "go", "jsonfield", `{"field":"type","equals":"order.created"}`, records / 100},
		{"jsonfield-1pct/as", "as", "jsonfield", `{"field":"type","equals":"order.created"}`, records / 100},
	} {
		var opts []client.SubscribeOption
		if v.module != "" {
			ref := v.lang + "-" + v.module
			if _, _, err := c.UploadPlugin(context.Background(), ref, guestModule(b, v.lang, v.module), ""); err != nil {
				b.Fatal(err)
			}
			opts = append(opts, client.Filter(ref, []byte(v.config)))
		}
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				if n := replayCount(b, c, "t", opts...); n < v.keep*9/10 || n > v.keep*11/10 {
					b.Fatalf("delivered %d records, want about %d", n, v.keep)
				}
			}
			b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "scanned/s")
		})
	}
}

// BenchmarkPublishLatencyDuringFilteredReplays publishes one record per
// request, one request at a time, and reports the latency percentiles,
// alone and while four replays run a JSON-field filter over 200 000
// records of history in a loop.
func BenchmarkPublishLatencyDuringFilteredReplays(b *testing.B) {
	addr := enginetest.StartNode(b, engine.Config{}).URL
	c := client.New(addr)
	ctx := context.Background()
	fillEvents(b, c, "history", 4, 200_000)
	if _, err := c.CreateTopic(ctx, "live", client.WithPartitions(4)); err != nil {
		b.Fatal(err)
	}
	module := guestModule(b, "as", "jsonfield")
	if _, _, err := c.UploadPlugin(ctx, "jsonfield", module, ""); err != nil {
		b.Fatal(err)
	}
	for _, replays := range []int{0, 4} {
		b.Run(fmt.Sprintf("replays=%d", replays), func(b *testing.B) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range replays {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						replayCount(b, c, "history", client.Filter("jsonfield", []byte(`{"field":"type","equals":"order.created"}`)))
					}
				}()
			}
			time.Sleep(200 * time.Millisecond) // let the replays get going
			lat := make([]time.Duration, 0, b.N)
			msg := client.Message{Key: []byte("k"), Value: make([]byte, 100)}
			for b.Loop() {
				start := time.Now()
				if _, err := c.Publish(ctx, "live", msg); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(q(0.5), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
		})
	}
}
