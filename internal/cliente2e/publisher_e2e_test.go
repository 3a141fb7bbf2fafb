package cliente2e_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rewind-io/rewind/sdk/client"
)

// Without a linger, messages published while the publisher's request is
// out wait and go together in the next one: all are acknowledged, each
// with its own result, in the order they were published.
func TestPublisherWithoutLingerKeepsOrder(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "p", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	p := c.NewPublisher("p")
	const n = 300
	pending := make([]*client.Pending, n)
	for i := range n {
		pd, err := p.Publish(ctx, client.Message{Value: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		pending[i] = pd
	}
	for i, pd := range pending {
		res, err := pd.Wait(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if res.Offset != uint64(i) {
			t.Fatalf("message %d stored at offset %d: order lost", i, res.Offset)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close after everything was sent leaves nothing behind, and a
	// publisher that was closed refuses more.
	if _, err := p.Publish(ctx, client.Message{Value: []byte("late")}); err == nil {
		t.Fatal("publish after Close accepted")
	}
}
