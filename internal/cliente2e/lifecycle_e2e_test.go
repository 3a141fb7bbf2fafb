package cliente2e_test

// How streams end and go on: a group member stopped by its context commits
// what it was given before it leaves, and streams outlive a server restart.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// publishTo publishes values prefix-0 .. prefix-(n-1) to one partition.
func publishTo(t *testing.T, c *client.Client, topic string, p uint32, prefix string, n int) {
	t.Helper()
	msgs := make([]client.Message, n)
	for i := range msgs {
		msgs[i] = client.Message{Value: []byte(fmt.Sprintf("%s-%d", prefix, i)), Partition: &p}
	}
	if _, err := c.Publish(context.Background(), topic, msgs...); err != nil {
		t.Fatal(err)
	}
}

// consumeUntilCancelled reads a member's records, cancels its context once
// it has at least n, and returns every record it was given (the loop goes
// on to the end of the event it was in).
func consumeUntilCancelled(t *testing.T, sub *client.Subscription, cancel context.CancelFunc, n int) []client.Record {
	t.Helper()
	var got []client.Record
	for r, err := range sub.Records() {
		if err != nil {
			break // the cancellation
		}
		got = append(got, r)
		if len(got) == n {
			cancel()
		}
	}
	if len(got) < n {
		t.Fatalf("member got %d records before its stream ended: %v", len(got), sub.Err())
	}
	return got
}

// next returns a member's next event of type T, skipping others.
func next[T client.Event](t *testing.T, sub *client.Subscription) T {
	t.Helper()
	for sub.Next() {
		if e, ok := sub.Event().(T); ok {
			return e
		}
	}
	t.Fatalf("stream ended: %v", sub.Err())
	panic("unreachable")
}

// TestCancelledMemberCommitsWhatItWasGiven: a member whose context is
// cancelled commits, on Close, the records it was given, so the member that
// continues gets none of them again — whether it joins afterwards or was
// waiting in the group (and is given the partition when the first leaves,
// which fences commits of the first).
func TestCancelledMemberCommitsWhatItWasGiven(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "w", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	publishTo(t, c, "w", 0, "r", 20)
	for _, waiting := range []bool{false, true} {
		t.Run(fmt.Sprintf("second member waiting=%v", waiting), func(t *testing.T) {
			group := fmt.Sprintf("g-%v", waiting)
			// An interval longer than the test: only Close commits.
			opts := []client.SubscribeOption{client.Group(group), client.AutoCommit(time.Hour), client.MaxRecordsPerEvent(3)}
			actx, cancelA := context.WithCancel(ctx)
			defer cancelA()
			a, err := c.Subscribe(actx, "w", opts...)
			if err != nil {
				t.Fatal(err)
			}
			next[*client.Assigned](t, a)
			var b *client.Subscription
			if waiting {
				if b, err = c.Subscribe(ctx, "w", opts...); err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				if got := next[*client.Assigned](t, b); len(got.Partitions) != 0 {
					t.Fatalf("second member assigned %v while the first reads", got.Partitions)
				}
			}
			given := consumeUntilCancelled(t, a, cancelA, 5)
			if err := a.Close(); err != nil {
				t.Fatalf("close after cancel: %v", err)
			}
			if !waiting {
				if b, err = c.Subscribe(ctx, "w", opts...); err != nil {
					t.Fatal(err)
				}
				defer b.Close()
			}
			// The first member's leave may reach the server after the second
			// joined: wait for the assignment that gives the partition.
			as := next[*client.Assigned](t, b)
			for len(as.Partitions) == 0 {
				as = next[*client.Assigned](t, b)
			}
			if len(as.Partitions) != 1 || as.Partitions[0].NextOffset != uint64(len(given)) {
				t.Fatalf("second member starts at %+v; the first was given %d records", as.Partitions, len(given))
			}
			first := next[*client.Records](t, b)
			if got := first.Records[0].Offset; got != uint64(len(given)) {
				t.Fatalf("second member's first record is offset %d; the first member was given offsets 0..%d", got, len(given)-1)
			}
		})
	}
}

// reader collects a stream's records and notes its other events.
type streamReader struct {
	t    *testing.T
	sub  *client.Subscription
	seen map[string]int // event kinds: "disconnected", "reconnected"
	// commitErrs are the automatic commits' errors seen after events.
	commitErrs []error
}

// records returns the next n records, failing if the stream ends first.
func (r *streamReader) records(n int) []string {
	r.t.Helper()
	var out []string
	for len(out) < n && r.sub.Next() {
		switch e := r.sub.Event().(type) {
		case *client.Records:
			for _, rec := range e.Records {
				out = append(out, fmt.Sprintf("%d:%s", rec.Partition, rec.Value))
			}
		case *client.Disconnected:
			r.seen["disconnected"]++
		case *client.Reconnected:
			r.seen["reconnected"]++
		}
		if err := r.sub.CommitErr(); err != nil {
			r.commitErrs = append(r.commitErrs, err)
		}
	}
	if len(out) < n {
		r.t.Fatalf("stream ended after %d of %d records: %v", len(out), n, r.sub.Err())
	}
	return out
}

// until reads events up to the first of type T.
func until[T client.Event](r *streamReader) T {
	r.t.Helper()
	for r.sub.Next() {
		switch e := r.sub.Event().(type) {
		case T:
			return e
		case *client.Records:
			r.t.Fatalf("records %v while waiting for %T", e.Records, *new(T))
		}
	}
	r.t.Fatalf("stream ended: %v", r.sub.Err())
	panic("unreachable")
}

// TestStreamsGoOnAcrossARestart: a follower and a group member reading
// live records outlive a graceful restart of their only server on the same
// address and data directory: they say they were disconnected, then
// continue with exactly the records published after the restart — none
// again, none missing. The member commits at every Next, so the offsets of
// its last event before the stop are due when the server is gone: it was
// given more than the group committed, and its commits after the restart
// succeed.
func TestStreamsGoOnAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	listen := strings.TrimPrefix(s.addr, "http://")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "f", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishTo(t, c, "f", 0, "a", 3)
	publishTo(t, c, "f", 1, "a", 3)
	follower, err := c.Subscribe(ctx, "f", client.From(client.Earliest()))
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	member, err := c.Subscribe(ctx, "f", client.Group("g"), client.AutoCommit(0), client.MaxRecordsPerEvent(1))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	readers := map[string]*streamReader{
		"follower": {t: t, sub: follower, seen: map[string]int{}},
		"member":   {t: t, sub: member, seen: map[string]int{}},
	}
	before := []string{"0:a-0", "0:a-1", "0:a-2", "1:a-0", "1:a-1", "1:a-2"}
	for name, r := range readers {
		if got := sortedCopy(r.records(6)); !slices.Equal(got, before) {
			t.Fatalf("%s before the restart: %v, want %v", name, got, before)
		}
	}

	s.stop()
	for _, r := range readers {
		until[*client.Disconnected](r)
	}
	startServerWith(t, engine.Config{Dir: dir}, enginetest.WithAddr(listen)) // stopped by its cleanup
	publishTo(t, c, "f", 0, "b", 2)
	publishTo(t, c, "f", 1, "b", 2)
	after := []string{"0:b-0", "0:b-1", "1:b-0", "1:b-1"}
	for name, r := range readers {
		if got := sortedCopy(r.records(4)); !slices.Equal(got, after) {
			t.Errorf("%s after the restart: %v, want %v", name, got, after)
		}
		if r.seen["reconnected"] != 1 || r.sub.Resumes() != 1 {
			t.Errorf("%s: %d reconnected events, %d resumes; want 1", name, r.seen["reconnected"], r.sub.Resumes())
		}
		if len(r.commitErrs) > 0 {
			t.Errorf("%s: commits failed after the restart: %v", name, r.commitErrs)
		}
	}
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestStreamEndsWhenItsServerDoesNotReturn: within its reconnect window a
// stream whose server is gone keeps trying; after it, the stream ends
// with a ReconnectError that says so.
func TestStreamEndsWhenItsServerDoesNotReturn(t *testing.T) {
	for _, group := range []string{"", "g"} {
		t.Run("group="+group, func(t *testing.T) {
			s := startServer(t, "")
			c := client.New(s.addr)
			ctx := context.Background()
			if _, err := c.CreateTopic(ctx, "gone", client.WithPartitions(1)); err != nil {
				t.Fatal(err)
			}
			opts := []client.SubscribeOption{client.ReconnectWithin(200 * time.Millisecond)}
			if group != "" {
				opts = append(opts, client.Group(group), client.AutoCommit(0))
			}
			sub, err := c.Subscribe(ctx, "gone", opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			r := &streamReader{t: t, sub: sub, seen: map[string]int{}}
			if group != "" {
				until[*client.Assigned](r)
			}
			s.stop()
			d := until[*client.Disconnected](r)
			if d.RetryFor != 200*time.Millisecond {
				t.Errorf("disconnected event says it retries for %s", d.RetryFor)
			}
			if sub.Next() {
				t.Fatalf("event %T after the window, want the end", sub.Event())
			}
			var re *client.ReconnectError
			if !errors.As(sub.Err(), &re) || re.Window != 200*time.Millisecond || re.Attempts < 1 {
				t.Fatalf("stream ended with %v, want a ReconnectError for the 200ms window", sub.Err())
			}
		})
	}
}

// TestCloseEndsAReconnectingStream: Close, called from another goroutine,
// ends a stream that waits for its server to come back.
func TestCloseEndsAReconnectingStream(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "c", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, "c", client.ReconnectWithin(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	s.stop()
	disconnected := make(chan struct{})
	ended := make(chan error)
	go func() {
		for sub.Next() {
			if _, ok := sub.Event().(*client.Disconnected); ok {
				close(disconnected)
			}
		}
		ended <- sub.Err()
	}()
	<-disconnected
	sub.Close()
	if err := <-ended; err == nil {
		t.Fatal("a closed stream ended without an error")
	}
}

// failingStreams accepts every stream and fails it at once with
// Unavailable after its Started event: a node whose tiered storage is down
// answers a replay of tiered history that way.
type failingStreams struct {
	rewindv1connect.UnimplementedSubscribeServiceHandler
	opened atomic.Int32
}

func (f *failingStreams) Subscribe(_ context.Context, _ *rewindv1.SubscribeRequest, st *connect.ServerStream[rewindv1.SubscribeResponse]) error {
	f.opened.Add(1)
	if err := st.Send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_Started{Started: &rewindv1.StartedEvent{ResumeToken: "tok"}}}); err != nil {
		return err
	}
	return connect.NewError(connect.CodeUnavailable, errors.New("tiered storage unavailable"))
}

// TestAStreamThatFailsOnEveryReconnectGivesUp: a node that accepts each
// stream and fails it before any record used to restart the reconnect
// window on every successful reopen, so the client reopened it in a tight
// loop forever. The window now goes on from the first break, with pauses
// between reopens, and the stream ends with a ReconnectError.
func TestAStreamThatFailsOnEveryReconnectGivesUp(t *testing.T) {
	f := &failingStreams{}
	mux := http.NewServeMux()
	mux.Handle(rewindv1connect.NewSubscribeServiceHandler(f))
	url := enginetest.ServeHandler(t, mux)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang detector
	defer cancel()
	sub, err := client.New(url).Subscribe(ctx, "t", client.ReconnectWithin(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for sub.Next() {
	}
	var re *client.ReconnectError
	if !errors.As(sub.Err(), &re) {
		t.Fatalf("the stream ended with %v, want a ReconnectError", sub.Err())
	}
	// Pauses of 100 ms doubling within a 1 s window: a handful of reopens
	// whatever the machine's speed (a slow one makes fewer), not thousands.
	if n := f.opened.Load(); n > 10 {
		t.Fatalf("the stream was reopened %d times within its 1s window", n)
	}
}
