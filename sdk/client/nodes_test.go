package client

import (
	"testing"
	"time"
)

// TestNodePenalty: a node that failed is skipped until its penalty ends,
// then used again when the node in use fails; when every node is
// penalised, the one whose penalty ends first is used; a leader hint
// moves the client at once, also to a node it was not given.
func TestNodePenalty(t *testing.T) {
	now := time.Unix(1000, 0)
	n := newNodes([]string{"a", "b", "c"}, 5*time.Second, func() time.Time { return now })
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
