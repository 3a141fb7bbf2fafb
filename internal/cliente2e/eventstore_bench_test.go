package cliente2e_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rewind-io/rewind/sdk/client"
)

// BenchmarkReadKey loads a 20-event entity (its events in 20 batches of
// 1,000 records shared with other keys) through the Go client from a real
// node on loopback: the whole path of an event-sourced load.
func BenchmarkReadKey(b *testing.B) {
	s := startServer(b, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "es", client.WithPartitions(1)); err != nil {
		b.Fatal(err)
	}
	for batch := range 20 {
		msgs := make([]client.Message, 1000)
		for i := range msgs {
			msgs[i] = client.Message{Key: []byte(fmt.Sprint("k", (batch*1000+i)%1000)), Value: make([]byte, 100)}
		}
		if _, err := c.Publish(ctx, "es", msgs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		r, err := c.ReadKey(ctx, "es", []byte("k42"))
		if err != nil || len(r.Records) != 20 {
			b.Fatal(len(r.Records), err)
		}
	}
}
