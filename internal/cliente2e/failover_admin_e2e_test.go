package cliente2e_test

// Topic, group, plugin and cluster calls through a client whose first node
// is paused, refuses connections or answers Unavailable: reads move on to
// the next node; writes move on only when they certainly did nothing, and
// are never run twice.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// TestAdminReadsMoveOnFromAPausedNode: every call that may run twice (the
// reads, and AlterTopic, which sets a value) is answered by the second
// node while the first is paused. Each goes through a new client, so each
// must move on by itself.
func TestAdminReadsMoveOnFromAPausedNode(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	direct := client.New(s.addr)
	if _, err := direct.CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishN(t, direct, "t", "v", 4)
	if _, err := direct.ResetGroup(ctx, "g", "t", client.Earliest(), nil, false, client.CreateGroup()); err != nil {
		t.Fatal(err)
	}
	g := startGate(t, s.addr)
	g.set(gatePaused)
	calls := map[string]func(*client.Client) error{
		"ListTopics": func(c *client.Client) error { _, err := c.ListTopics(ctx); return err },
		"DescribeTopic": func(c *client.Client) error {
			_, parts, err := c.DescribeTopic(ctx, "t")
			if err == nil && len(parts) != 2 {
				return errors.New("wrong partitions")
			}
			return err
		},
		"AlterTopic": func(c *client.Client) error {
			_, err := c.AlterTopic(ctx, "t", client.WithRetention(time.Hour, 0, 0))
			return err
		},
		"ListGroups": func(c *client.Client) error { _, err := c.ListGroups(ctx); return err },
		"DescribeGroup": func(c *client.Client) error {
			ts, err := c.DescribeGroup(ctx, "g")
			if err == nil && len(ts) != 1 {
				return errors.New("group not described")
			}
			return err
		},
		"ResetGroup plan": func(c *client.Client) error {
			_, err := c.ResetGroup(ctx, "g", "t", client.Latest(), nil, true)
			return err
		},
		"ListPlugins":   func(c *client.Client) error { _, err := c.ListPlugins(ctx, ""); return err },
		"ClusterStatus": func(c *client.Client) error { _, err := c.ClusterStatus(ctx); return err },
		"Rebalance plan": func(c *client.Client) error {
			_, err := c.Rebalance(ctx, true)
			if connect.CodeOf(err) == connect.CodeFailedPrecondition {
				return nil // a single node has nothing to balance: answered by s
			}
			return err
		},
	}
	// In parallel: each waits out one attempt deadline (the default 2 s,
	// which no healthy answer comes near) on the paused node.
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := call(client.New(g.addr + "," + s.addr)); err != nil {
				t.Errorf("%s while the first node is paused: %v", name, err)
			}
		}()
	}
	wg.Wait()
	if tp, _, err := direct.DescribeTopic(ctx, "t"); err != nil || tp.RetentionAge != time.Hour {
		t.Fatalf("after AlterTopic: %+v, %v", tp, err)
	}
}

// TestAdminWriteToAPausedNodeIsNotRepeated: a create sent to a paused node
// fails once the connection's health check goes unanswered, with
// ErrOutcomeUnknown, and is not sent to the next node (where it would
// create the topic although the caller is told it failed); the next call
// goes to the next node.
func TestAdminWriteToAPausedNodeIsNotRepeated(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	g := startGate(t, s.addr)
	g.set(gatePaused)
	c := client.New(g.addr+","+s.addr, client.WithHealthCheck(200*time.Millisecond, 300*time.Millisecond))
	_, err := c.CreateTopic(ctx, "t")
	if !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("create through a paused node: %v, want ErrOutcomeUnknown", err)
	}
	ts, err := c.ListTopics(ctx)
	if err != nil {
		t.Fatalf("list after the failed create: %v", err)
	}
	if len(ts) != 0 {
		t.Fatalf("topics %v: the create was sent on to the next node", ts)
	}
}

// TestAdminWriteOnAPausedStreamIsNotRepeated is the same over the fast
// path: the client already has a stream to the node when it pauses; the
// stream's health check (a ping unanswered) fails the create with
// ErrOutcomeUnknown instead of leaving it waiting for ever.
func TestAdminWriteOnAPausedStreamIsNotRepeated(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	g := startGate(t, s.addr)
	c := client.New(g.addr+","+s.addr, client.WithHealthCheck(200*time.Millisecond, 300*time.Millisecond))
	for range 2 { // the first call learns of the fast path, the second opens the stream
		if _, err := c.ListTopics(ctx); err != nil {
			t.Fatal(err)
		}
	}
	g.set(gatePaused)
	_, err := c.CreateTopic(ctx, "t")
	if !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("create through a paused node's stream: %v, want ErrOutcomeUnknown", err)
	}
	ts, err := client.New(s.addr).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 0 {
		t.Fatalf("topics %v: the create was sent on to the next node", ts)
	}
}

// TestAdminWriteWhoseAnswerIsLostIsNotRepeated: a write that reached its
// node, which did it, but whose connection broke before the answer came,
// is not repeated on the next node: a relative reset moves the offsets
// once, and a create is reported as possibly done rather than
// AlreadyExists.
func TestAdminWriteWhoseAnswerIsLostIsNotRepeated(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	direct := client.New(s.addr)
	if _, err := direct.CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	publishN(t, direct, "t", "v", 10)
	if _, err := direct.ResetGroup(ctx, "g", "t", client.Offset(5), nil, false, client.CreateGroup()); err != nil {
		t.Fatal(err)
	}
	committed := func() uint64 {
		ts, err := direct.DescribeGroup(ctx, "g")
		if err != nil || len(ts) != 1 || len(ts[0].Partitions) != 1 {
			t.Fatalf("describe group: %+v, %v", ts, err)
		}
		return ts[0].Partitions[0].CommittedOffset
	}
	// writeThenBreak runs call through a gate to s and breaks the gate's
	// connections once done says s did it (no health check, no attempt
	// deadline: only the break ends the call).
	writeThenBreak := func(call func(*client.Client) error, done func() bool) error {
		g := startGate(t, s.addr)
		c := client.New(g.addr+","+s.addr, client.WithHealthCheck(0, 0))
		// Connect through the gate: the first call learns that the node
		// serves the fast path, the second opens its stream.
		for range 2 {
			if _, err := c.ListTopics(ctx); err != nil {
				t.Fatal(err)
			}
		}
		g.set(gateLoseAnswers)
		errc := make(chan error, 1)
		go func() { errc <- call(c) }()
		for !done() {
			if ctx.Err() != nil {
				t.Fatal("the node never did the write")
			}
			time.Sleep(5 * time.Millisecond) // poll: the node acts on the request
		}
		g.close()
		return <-errc
	}
	err := writeThenBreak(func(c *client.Client) error {
		_, err := c.ResetGroup(ctx, "g", "t", client.Shift(-2), nil, false)
		return err
	}, func() bool { return committed() != 5 })
	if !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Errorf("reset whose answer was lost: %v, want ErrOutcomeUnknown", err)
	}
	if got := committed(); got != 3 {
		t.Fatalf("committed offset %d after shifting 5 by -2: want 3 (the reset ran once)", got)
	}
	err = writeThenBreak(func(c *client.Client) error {
		_, err := c.CreateTopic(ctx, "u")
		return err
	}, func() bool { _, _, err := direct.DescribeTopic(ctx, "u"); return err == nil })
	if !errors.Is(err, client.ErrOutcomeUnknown) || connect.CodeOf(err) == connect.CodeAlreadyExists {
		t.Errorf("create whose answer was lost: %v, want ErrOutcomeUnknown", err)
	}
}

// refusing is a node whose topic service refuses every create with
// Unavailable, saying it stored nothing (Rewind-Not-Stored) or not.
type refusing struct {
	rewindv1connect.UnimplementedTopicServiceHandler
	notStored bool
	asked     atomic.Int32
}

func (r *refusing) CreateTopic(context.Context, *rewindv1.CreateTopicRequest) (*rewindv1.CreateTopicResponse, error) {
	r.asked.Add(1)
	e := connect.NewError(connect.CodeUnavailable, errors.New("not now"))
	if r.notStored {
		e.Meta().Set("Rewind-Not-Stored", "1")
	}
	return nil, e
}

func startRefusing(t *testing.T, notStored bool) (*refusing, string) {
	t.Helper()
	r := &refusing{notStored: notStored}
	mux := http.NewServeMux()
	mux.Handle(rewindv1connect.NewTopicServiceHandler(r))
	return r, enginetest.ServeHandler(t, mux)
}

// TestAdminWriteMovesOnWhenItDidNothing: a create goes on to the next node
// when the first refused the connection or answered Unavailable with
// Rewind-Not-Stored; an Unavailable without that mark may have been done,
// so it ends the call with ErrOutcomeUnknown.
func TestAdminWriteMovesOnWhenItDidNothing(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	direct := client.New(s.addr)
	retry := client.WithPublishRetry(3, time.Millisecond, 0)
	t.Run("connection refused", func(t *testing.T) {
		closed := "http://" + enginetest.FreeAddr(t)
		if _, err := client.New(closed+","+s.addr, retry).CreateTopic(ctx, "refused"); err != nil {
			t.Fatalf("create with the first node down: %v", err)
		}
	})
	t.Run("not stored", func(t *testing.T) {
		r, addr := startRefusing(t, true)
		if _, err := client.New(addr+","+s.addr, retry).CreateTopic(ctx, "not-stored"); err != nil {
			t.Fatalf("create refused with Rewind-Not-Stored by the first node: %v", err)
		}
		if n := r.asked.Load(); n != 1 {
			t.Errorf("the refusing node was asked %d times, want 1", n)
		}
	})
	t.Run("outcome unknown", func(t *testing.T) {
		r, addr := startRefusing(t, false)
		_, err := client.New(addr+","+s.addr, retry).CreateTopic(ctx, "unknown")
		if !errors.Is(err, client.ErrOutcomeUnknown) || connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("create refused with Unavailable alone: %v, want ErrOutcomeUnknown (Unavailable)", err)
		}
		if n := r.asked.Load(); n != 1 {
			t.Errorf("the refusing node was asked %d times, want 1", n)
		}
		if _, _, err := direct.DescribeTopic(ctx, "unknown"); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("the create went on to the next node: describe says %v", err)
		}
	})
}
