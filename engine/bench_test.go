package engine_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/testcerts"
	"github.com/rewind-io/rewind/sdk/client"
)

func fill(tb testing.TB, c *client.Client, topic string, partitions uint32, records, size, batch int) {
	tb.Helper()
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, topic, client.WithPartitions(partitions)); err != nil {
		tb.Fatal(err)
	}
	payload := make([]byte, size)
	rand.Read(payload)
	msgs := make([]client.Message, batch)
	for i := range msgs {
		msgs[i].Value = payload
	}
	for n := 0; n < records; n += batch {
		if _, err := c.Publish(ctx, topic, msgs[:min(batch, records-n)]...); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkReplay replays a 4-partition topic of 100-byte records through
// the Go client over loopback, from the earliest record to the end.
func BenchmarkReplay(b *testing.B) {
	benchReplay(b, client.New(enginetest.StartNode(b, engine.Config{}).URL))
}

// BenchmarkReplayTLS is BenchmarkReplay over TLS (ECDSA P-256, TLS 1.3,
// HTTP/2 by ALPN): the cost of encryption on a replay.
func BenchmarkReplayTLS(b *testing.B) {
	addr, cfg := startTLS(b)
	benchReplay(b, client.New(addr, client.WithTLS(cfg)))
}

func benchReplay(b *testing.B, c *client.Client) {
	const records = 500_000
	fill(b, c, "t", 4, records, 100, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	total := 0
	cpu, writes := cpuTime(), writeCalls()
	for b.Loop() {
		n := replayCount(b, c, "t")
		if n != records {
			b.Fatalf("replayed %d records, want %d", n, records)
		}
		total += n
	}
	// Server and client share the process: CPU time per record counts
	// both ends and is steadier than records/s on a busy machine; the
	// write system calls are nearly all the server's (the client only
	// sends window updates).
	b.ReportMetric(float64(cpuTime()-cpu)/float64(total), "cpu-ns/record")
	if w := writeCalls(); w >= 0 && writes >= 0 {
		b.ReportMetric(float64(w-writes)/float64(b.N), "writes/op")
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
}

// writeCalls is the number of write system calls the process made so far
// (Linux's /proc/self/io syscw), or -1 where that is not available.
func writeCalls() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// BenchmarkPublish publishes 100-byte records through the Go client over
// loopback to a 4-partition topic on disk, 1000 per request, from four
// concurrent publishers (each one request in flight). Durable: every
// request is acknowledged after fsync.
func BenchmarkPublish(b *testing.B) {
	benchPublish(b, client.New(enginetest.StartNode(b, engine.Config{}).URL))
}

// BenchmarkPublishTLS is BenchmarkPublish over TLS: the cost of
// encryption on a publish.
func BenchmarkPublishTLS(b *testing.B) {
	addr, cfg := startTLS(b)
	benchPublish(b, client.New(addr, client.WithTLS(cfg)))
}

func benchPublish(b *testing.B, c *client.Client) {
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(4)); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 100)
	rand.Read(payload)
	msgs := make([]client.Message, 1000)
	for i := range msgs {
		msgs[i].Value = payload
	}
	b.ReportAllocs()
	b.SetParallelism(2) // 2 × GOMAXPROCS(2) = 4 publishers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Publish(ctx, "t", msgs...); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "records/s")
}

// startTLS starts a default node serving TLS with a certificate of a new
// CA, and returns its URL and a client configuration trusting that CA.
func startTLS(b *testing.B) (string, *tls.Config) {
	dir := b.TempDir()
	ca := testcerts.NewCA(b, "bench CA")
	f := ca.Issue(b, "bench", "127.0.0.1").Write(b, dir, "server")
	addr := enginetest.StartNode(b, engine.Config{Security: engine.SecurityConfig{TLSCertFile: f.Cert, TLSKeyFile: f.Key}}).URL
	return addr, &tls.Config{RootCAs: ca.Pool()}
}

// BenchmarkPublishOne publishes one 100-byte record at a time through the
// Go client over loopback, each waiting for the last: ns/op is an idle
// publisher's durable acknowledgement, end to end, over the fast path
// (the default) and over HTTP/2.
func BenchmarkPublishOne(b *testing.B) {
	for _, tr := range transports {
		b.Run("transport="+tr.name, func(b *testing.B) { benchPublishOne(b, engine.Config{}, tr.opt) })
	}
}

// transports are the Go client's two ways of sending a unary call.
var transports = []struct {
	name string
	opt  client.Option
}{{"fastpath", client.WithFastPath(true)}, {"h2", client.WithFastPath(false)}}

// benchPublishOne is BenchmarkPublishOne on a node of cfg.
func benchPublishOne(b *testing.B, cfg engine.Config, opts ...client.Option) {
	c := client.New(enginetest.StartNode(b, cfg).URL, opts...)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
		b.Fatal(err)
	}
	msg := client.Message{Value: make([]byte, 100)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Publish(ctx, "t", msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnaryCall calls DescribeTopic through the Go client over
// loopback, each call waiting for the last: ns/op is the cost of a unary
// call's path (client, transport, interceptors, handler) with next to no
// work behind it, the floor under every small request; over the fast path
// and over HTTP/2.
func BenchmarkUnaryCall(b *testing.B) {
	url := enginetest.StartNode(b, engine.Config{}).URL
	ctx := context.Background()
	if _, err := client.New(url).CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
		b.Fatal(err)
	}
	for _, tr := range transports {
		b.Run("transport="+tr.name, func(b *testing.B) {
			c := client.New(url, tr.opt)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, _, err := c.DescribeTopic(ctx, "t"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
