package cliente2e_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
)

// TestHedgedCallsDoNotWaitOutAPausedNode: with an attempt timeout far
// beyond the test's deadline, only a hedge can finish a call whose node is
// paused. Publishes whose records all have idempotency keys, and reads,
// are sent to the next node too after the hedge delay, and succeed; each
// record is stored once. A publish with a record without a key is never
// hedged: it waits for its node (here until its deadline), and nothing of
// it is stored twice.
func TestHedgedCallsDoNotWaitOutAPausedNode(t *testing.T) {
	s := startServer(t, "")
	g := startGate(t, s.addr)
	direct := client.New(s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	if _, err := direct.CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	// A new client starts at the paused node: each call below needs its
	// hedge (a client that hedged moves on to the next node).
	fresh := func() *client.Client {
		return client.New(g.addr+","+s.addr, client.WithPublishRetry(1, 0, 10*noHang), client.WithHedgeDelay(50*time.Millisecond))
	}
	c := fresh()
	if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("before"), IdempotencyKey: "k-before"}); err != nil {
		t.Fatal(err)
	}
	g.set(gatePaused)
	for _, v := range []string{"during-1", "during-2"} {
		if _, err := fresh().Publish(ctx, "t", client.Message{Value: []byte(v), IdempotencyKey: "k-" + v}); err != nil {
			t.Fatalf("keyed publish %s while the first node is paused: %v", v, err)
		}
	}
	if _, _, err := fresh().DescribeTopic(ctx, "t"); err != nil {
		t.Fatalf("describe while the first node is paused: %v", err)
	}
	// The keyless publish waits for the paused node: its deadline ends
	// it (the deadline is not the point, only that it was not hedged).
	kctx, kcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := fresh().Publish(kctx, "t", client.Message{Value: []byte("keyless")})
	kcancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Fatalf("keyless publish through the paused node: %v, want its deadline exceeded (never hedged)", err)
	}
	g.set(gatePass)
	got := values(readAll(t, direct, "t", client.Until(client.End())))
	slices.Sort(got)
	// The keyless record may be stored once when the paused node
	// resumes, never twice.
	if want := []string{"before", "during-1", "during-2"}; !slices.Equal(slices.DeleteFunc(got, func(v string) bool { return v == "keyless" }), want) {
		t.Fatalf("stored %v, want %v (and at most one keyless)", got, want)
	}
}
