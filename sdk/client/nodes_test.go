package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// TestNodePenalty: a node that failed is skipped until its penalty ends,
// then used again when the node in use fails; when every node is
// penalised, the one whose penalty ends first is used; a leader hint
// moves the client at once, also to a node it was not given.
func TestNodePenalty(t *testing.T) {
	now := time.Unix(1000, 0)
	n := newNodes([]string{"a", "b", "c"}, 5*time.Second, func() time.Time { return now }, nil, "http://")
	step := func(what, want string) {
		t.Helper()
		if got := n.use(); got != want {
			t.Fatalf("%s: using %s, want %s", what, got, want)
		}
	}
	step("start", "a")
	n.fail("a")
	step("a failed", "b")
	now = now.Add(time.Second)
	n.fail("b")
	step("b failed", "c")
	now = now.Add(time.Second)
	n.fail("c")
	step("all failed: a's penalty ends first", "a")
	now = now.Add(3 * time.Second) // a's penalty is over, b's ends now
	n.fail("a")
	step("a failed again, b's penalty is over", "b")
	step("b stays in use", "b")
	n.prefer("d")
	step("a hint names d", "d")
	n.prefer("c")
	step("a hint names c, penalised", "c")
}

// TestAttemptBoundGrowsWithTheRequest: a large publish is not cut off by
// the attempt deadline while it is still being sent.
func TestAttemptBoundGrowsWithTheRequest(t *testing.T) {
	r := retryPolicy{attemptTime: 2 * time.Second}
	for _, c := range []struct {
		size int
		want time.Duration
	}{{0, 2 * time.Second}, {4<<20 - 1, 2 * time.Second}, {4 << 20, 3 * time.Second}, {64 << 20, 18 * time.Second}} {
		if got := r.attemptBound(c.size); got != c.want {
			t.Errorf("bound for %d bytes: %s, want %s", c.size, got, c.want)
		}
	}
	if got := (retryPolicy{}).attemptBound(64 << 20); got != 0 {
		t.Errorf("no attempt deadline became %s", got)
	}
}

// TestPenaltiesCarryOver: a client started with the penalties another
// returned skips the same nodes until their penalties end, and ignores
// those already over.
func TestPenaltiesCarryOver(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	first := New("a:1,b:2,c:3", withClock(clock))
	first.nodes.fail("http://a:1")
	got := first.Penalties()
	if len(got) != 1 || !got["http://a:1"].Equal(now.Add(DefaultNodePenalty)) {
		t.Fatalf("penalties %v, want a:1 until %v", got, now.Add(DefaultNodePenalty))
	}
	got["http://c:3"] = now.Add(-time.Second) // over: ignored
	next := New("a:1,b:2,c:3", withClock(clock), WithPenalties(got))
	if u := next.nodes.use(); u != "http://b:2" {
		t.Fatalf("the next client starts at %s, want http://b:2 (a:1 penalised)", u)
	}
	if p := next.Penalties(); len(p) != 1 {
		t.Fatalf("the next client's penalties %v, want a:1's only", p)
	}
	now = now.Add(DefaultNodePenalty)
	// The client stays where it moved; a:1 may be used again.
	if o := next.nodes.other("http://b:2"); o != "http://c:3" || len(next.Penalties()) != 0 {
		t.Fatalf("after the penalty: next other %s, penalties %v; want c:3 then a:1 usable, none penalised", o, next.Penalties())
	}
	if o := next.nodes.other("http://c:3"); o != "http://a:1" {
		t.Fatalf("after the penalty: other than c:3 is %s, want http://a:1", o)
	}
}

// withClock sets the client's clock (penalties).
func withClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// TestHintToAPenalisedNodeIsNotFollowed: a refusal naming as leader a node
// this client could not reach a moment ago (a member whose raft has not
// yet noticed that its leader died) keeps the client on the node that
// answered, unpenalised; a hint naming a node in good standing moves it.
func TestHintToAPenalisedNodeIsNotFollowed(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New("a:1,b:2,c:3", withClock(func() time.Time { return now }))
	hint := func(id, addr string) error {
		e := connect.NewError(connect.CodeUnavailable, errors.New("forward failed"))
		e.Meta().Set("Rewind-Leader", id)
		e.Meta().Set("Rewind-Leader-Address", addr)
		return e
	}
	c.nodes.fail("http://a:1") // a died: its dial was refused
	b := c.at(c.nodes.use())
	if b.addr != "http://b:2" {
		t.Fatalf("using %s, want b:2", b.addr)
	}
	c.moveOn(context.Background(), b, hint("1", "a:1"))
	if u := c.nodes.use(); u != "http://b:2" || c.nodes.penalised("http://b:2") || !c.nodes.penalised("http://a:1") {
		t.Fatalf("after a hint to the penalised a: using %s, penalties %v; want b:2 in use, a alone penalised", u, c.Penalties())
	}
	c.moveOn(context.Background(), b, hint("3", "c:3"))
	if u := c.nodes.use(); u != "http://c:3" {
		t.Fatalf("after a hint to c: using %s, want c:3", u)
	}
}

// TestHedgeGoesToAPenalisedNodeRatherThanNowhere: when every other node is
// penalised (they refused calls while the cluster started), a hedge still
// goes somewhere, to the one whose penalty ends first, instead of leaving
// the call to wait out a silent node's attempt deadline.
func TestHedgeGoesToAPenalisedNodeRatherThanNowhere(t *testing.T) {
	now := time.Unix(1000, 0)
	n := newNodes([]string{"a", "b", "c"}, 5*time.Second, func() time.Time { return now }, nil, "http://")
	n.fail("c")
	now = now.Add(time.Second)
	n.fail("b")
	if o := n.other("a"); o != "c" {
		t.Fatalf("hedge of a goes to %q, want c (its penalty ends first)", o)
	}
	if o := newNodes([]string{"a"}, time.Second, time.Now, nil, "http://").other("a"); o != "" {
		t.Fatalf("a lone node hedges to %q, want nowhere", o)
	}
}
