package partition

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestGroupCommitsAreFencedAndDurable(t *testing.T) {
	fs := vfs.NewMem()
	h := newHarness(t, fs, 64<<20)
	p := h.add(0, nil)
	ctx := context.Background()
	do := func(op GroupOp) (GroupState, error) {
		t.Helper()
		return p.GroupCommand(ctx, op)
	}
	if st, err := do(GroupOp{Kind: OpCommit, Group: "g", Generation: 3, Offset: 10}); err != nil || st.Offset != 10 || st.Fence != 3 {
		t.Fatalf("first commit: %+v %v", st, err)
	}
	// The partition moves to a member of generation 5: the old member's
	// late commit is rejected and changes nothing.
	if _, err := do(GroupOp{Kind: OpFence, Group: "g", Generation: 5}); err != nil {
		t.Fatal(err)
	}
	_, err := do(GroupOp{Kind: OpCommit, Group: "g", Generation: 3, Offset: 99})
	var fe *FencedError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFenced) || fe.Fence != 5 {
		t.Fatalf("zombie commit: %v", err)
	}
	if st, _, _ := p.GroupState("g"); st.Offset != 10 {
		t.Fatalf("zombie commit changed the offset to %d", st.Offset)
	}
	if st, err := do(GroupOp{Kind: OpCommit, Group: "g", Generation: 5, Offset: 20}); err != nil || st.Offset != 20 {
		t.Fatalf("current commit: %+v %v", st, err)
	}
	// A reset moves the offset back and fences generation 5.
	if st, err := do(GroupOp{Kind: OpReset, Group: "g", Generation: 6, Offset: 4, Epoch: 1}); err != nil || st.Offset != 4 || st.Epoch != 1 {
		t.Fatalf("reset: %+v %v", st, err)
	}
	if _, err := do(GroupOp{Kind: OpCommit, Group: "g", Generation: 5, Offset: 21}); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit from before the reset: %v", err)
	}
	if _, err := do(GroupOp{Kind: OpCommit, Group: "other", Generation: 1, Offset: 1}); err != nil {
		t.Fatal(err)
	}
	h.restart()
	p = h.add(0, nil)
	st, ok, err := p.GroupState("g")
	if err != nil || !ok || st.Offset != 4 || st.Fence != 6 || st.Epoch != 1 {
		t.Fatalf("after restart: %+v %v %v", st, ok, err)
	}
	names, err := p.GroupNames()
	if err != nil || len(names) != 2 || names[0] != "g" || names[1] != "other" {
		t.Fatalf("groups %v %v", names, err)
	}
	if _, err := p.GroupCommand(ctx, GroupOp{Kind: OpDelete, Group: "g"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := p.GroupState("g"); ok {
		t.Fatal("deleted group still has a row")
	}
}

// TestForwardedCommandFailsWhenItsLeaderChanges: a follower forwards its
// group commands to the leader, and raft never resends a forwarded
// proposal. When the leader changes before the command is answered, the
// command's outcome is unknown at once, instead of after its caller's
// deadline. One forwarded to a leader that stays is answered when applied,
// and the lost one, should it still be applied later, changes the row but
// answers no one.
func TestForwardedCommandFailsWhenItsLeaderChanges(t *testing.T) {
	h := newByHand(t)
	p := h.open()
	p.LeaderChanged(2, 5)
	queue := func(op GroupOp) (<-chan error, [][]byte) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := p.GroupCommand(context.Background(), op)
			done <- err
		}()
		for {
			p.mu.Lock()
			n := len(p.mu.ops)
			p.mu.Unlock()
			if n > 0 {
				break
			}
			runtime.Gosched() // until the goroutine queued it
		}
		p.Proposing(0) // a follower: forwarded
		return done, p.TakeProposals(nil)
	}
	lost, lostData := queue(GroupOp{Kind: OpCommit, Group: "g", Generation: 1, Offset: 0})
	p.LeaderChanged(3, 6)
	err := <-lost
	if !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "forwarded to leader 2") {
		t.Fatalf("a command forwarded to a leader that lost the leadership: %v", err)
	}
	kept, keptData := queue(GroupOp{Kind: OpCommit, Group: "g", Generation: 1, Offset: 0})
	h.apply(p, keptData)
	p.LeaderChanged(0, 6) // an election after it was applied and answered
	if err := <-kept; err != nil {
		t.Fatalf("a command applied before the leader changed: %v", err)
	}
	h.apply(p, lostData)
	if st, ok, err := p.GroupState("g"); err != nil || !ok || st.Fence != 1 {
		t.Fatalf("the group row: %+v %v %v", st, ok, err)
	}
}
