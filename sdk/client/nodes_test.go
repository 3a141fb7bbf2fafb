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
