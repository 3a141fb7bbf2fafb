package engine_test

import (
	"context"
	"crypto/rand"
	"net"
	"net/http"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/sdk/client"
)

// startNode runs a node on a loopback port (HTTP/1.1 and h2c) for the test.
func startNode(tb testing.TB, cfg engine.Config) (*engine.Node, string) {
	tb.Helper()
	if cfg.Dir == "" {
		cfg.Dir = tb.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	n, err := engine.Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: n.Handler(), Protocols: p, HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerConnection: 64 << 20, MaxReceiveBufferPerStream: 16 << 20,
	}}
	go srv.Serve(ln)
	tb.Cleanup(func() {
		n.Drain()
		srv.Close()
		if err := n.Close(); err != nil {
			tb.Errorf("close node: %v", err)
		}
	})
	return n, "http://" + ln.Addr().String()
}

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
	_, addr := startNode(b, engine.Config{})
	c := client.New(addr)
	const records = 500_000
	fill(b, c, "t", 4, records, 100, 1000)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	total := 0
	for b.Loop() {
		sub, err := c.Subscribe(ctx, "t", client.From(client.Earliest()), client.Until(client.End()))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for sub.Next() {
			if r, ok := sub.Event().(*client.Records); ok {
				n += len(r.Records)
			}
		}
		if err := sub.Err(); err != nil || n != records {
			b.Fatalf("replayed %d records: %v", n, err)
		}
		sub.Close()
		total += n
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
}
