package partition

import (
	"context"
	"errors"
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
