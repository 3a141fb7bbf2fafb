package groups

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// newCommitHarness is a topic of one partition holding 10 records, and a
// coordinator whose commits wait up to catchUp for the partition's end.
func newCommitHarness(t *testing.T, catchUp time.Duration) *harness {
	t.Helper()
	h := &harness{t: t}
	h.clock.Store(baseTime)
	h.open(1, time.Second)
	t.Cleanup(h.close)
	h.cfg.CommitCatchUp = catchUp
	h.c = New(h.cfg)
	h.publish(t, 10)
	if _, err := h.c.Reset(context.Background(), "g", h.topic, Target{Kind: ToEarliest}, nil, false, true); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) publish(t *testing.T, n int) {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("v")}
	}
	if _, err := h.parts[0].Append(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
}

// TestCommitWaitsForTheReplicaToCatchUp is the regression test of d86987f:
// the coordinator's replica of a partition may trail the leader its member
// read from, so a commit past the replica's end waits for the replica
// (CommitCatchUp) instead of being refused as out of range at once. Here
// the commit is issued before the records it covers are applied; it is
// accepted once they are.
func TestCommitWaitsForTheReplicaToCatchUp(t *testing.T) {
	h := newCommitHarness(t, time.Hour) // only the end arriving ends the wait
	res := make(chan error, 1)
	go func() {
		res <- h.c.Commit(context.Background(), "g", h.topic, 1, map[uint32]uint64{0: 15})
	}()
	h.publish(t, 3) // end 13: not there yet
	select {
	case err := <-res:
		t.Fatalf("commit of 15 returned with the end at 13: %v", err)
	default:
	}
	h.publish(t, 2)
	if err := <-res; err != nil {
		t.Fatalf("commit of 15 once the end is 15: %v", err)
	}
	if st, _, _ := h.parts[0].GroupState("g"); st.Offset != 15 {
		t.Fatalf("committed offset %d, want 15", st.Offset)
	}
}

// A commit past the end that the replica never reaches is out of range
// once the wait ends, at its deadline or its context's, and nothing is
// proposed.
func TestCommitPastTheEndIsOutOfRange(t *testing.T) {
	want := &cursor.OutOfRangeError{Partition: 0, Requested: 11, LogStart: 0, End: 10}
	check := func(t *testing.T, h *harness, ctx context.Context) {
		t.Helper()
		err := h.c.Commit(ctx, "g", h.topic, 1, map[uint32]uint64{0: 11})
		var oor *cursor.OutOfRangeError
		if !errors.As(err, &oor) {
			t.Fatalf("commit past the end: %v, want an OutOfRangeError", err)
		}
		if diff := cmp.Diff(want, oor); diff != "" {
			t.Fatalf("out of range error (-want +got):\n%s", diff)
		}
		if p := h.takeProposed(); len(p) != 0 {
			t.Fatalf("proposed %v", p)
		}
		if st, _, _ := h.parts[0].GroupState("g"); st.Offset != 0 {
			t.Fatalf("committed offset moved to %d", st.Offset)
		}
	}
	t.Run("deadline", func(t *testing.T) {
		h := newCommitHarness(t, time.Nanosecond)
		h.takeProposed()
		check(t, h, context.Background())
	})
	t.Run("context", func(t *testing.T) {
		h := newCommitHarness(t, time.Hour)
		h.takeProposed()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		check(t, h, ctx)
	})
}
