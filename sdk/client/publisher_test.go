package client_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

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

// TestPublishRefusesEventTimesThatWouldWrap: an event time outside int64
// Unix nanoseconds is refused before anything is sent (UnixNano wraps it
// into another year).
func TestPublishRefusesEventTimesThatWouldWrap(t *testing.T) {
	c := client.New("http://127.0.0.1:1") // nothing listens: the check comes first
	for _, at := range []time.Time{
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		_, err := c.Publish(context.Background(), "t", client.Message{Value: []byte("v"), EventTime: at})
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "event time") {
			t.Errorf("event time %s: %v, want InvalidArgument about the event time", at, err)
		}
	}
}
