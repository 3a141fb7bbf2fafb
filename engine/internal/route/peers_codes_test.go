package route

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/partition"
)

// TestForwardedResourceExhaustedKeepsItsCode: a leader that refuses a
// forwarded publish with ResourceExhausted (disk almost full, too much
// pending) is answered with the partition's own error, which the edge
// maps to ResourceExhausted too, as if the client had asked the leader
// itself; it came back as Unavailable, which tells a client to fail over
// rather than back off.
func TestForwardedResourceExhaustedKeepsItsCode(t *testing.T) {
	for _, cause := range []error{partition.ErrDiskFull, partition.ErrBusy} {
		leader := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("publish to %q: %w", "t", cause))
		err := forwardError(3, "t", 1, leader)
		if !errors.Is(err, cause) || errors.Is(err, ErrUnavailable) {
			t.Errorf("forwarded %v: %v, want it to be %v and not unavailable", cause, err, cause)
		}
	}
}

// TestPeerAnswersClassified: how a member's answer is read back: a
// refusal marked not stored (or a dial that reached nobody) is a
// *NotLeaderError naming the leader the answer names; the request's own
// faults are a *RefusedError (with an idempotency conflict's position);
// anything else is Unavailable with its outcome unknown.
func TestPeerAnswersClassified(t *testing.T) {
	notStored := connect.NewError(connect.CodeUnavailable, errors.New("not the leader"))
	notStored.Meta().Set(NotStoredHeader, "1")
	notStored.Meta().Set(LeaderHeader, "4")
	var nl *NotLeaderError
	if err := forwardError(3, "t", 1, notStored); !errors.As(err, &nl) || nl.Leader != 4 || nl.Node != 3 || !errors.Is(err, ErrNotStored) {
		t.Errorf("not stored: %v", err)
	}
	if err := readError(t.Context(), 3, 1, notStored); !errors.As(err, &nl) || nl.Leader != 4 {
		t.Errorf("read, not stored: %v", err)
	}
	for _, tc := range []struct {
		code connect.Code
		want Refusal
	}{{connect.CodeInvalidArgument, RefusedInvalid}, {connect.CodeNotFound, RefusedNotFound}} {
		var re *RefusedError
		if err := forwardError(3, "t", 1, connect.NewError(tc.code, errors.New("no"))); !errors.As(err, &re) || re.Refusal != tc.want || errors.Is(err, ErrUnavailable) {
			t.Errorf("%v: %v", tc.code, err)
		}
	}
	var re *RefusedError
	if err := readError(t.Context(), 3, 1, connect.NewError(connect.CodeFailedPrecondition, errors.New("no"))); !errors.As(err, &re) || re.Refusal != RefusedPrecondition {
		t.Errorf("failed precondition: %v", err)
	}
	if err := forwardError(3, "t", 1, connect.NewError(connect.CodeInternal, errors.New("boom"))); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotStored) {
		t.Errorf("internal: %v, want unavailable with the outcome unknown", err)
	}
}
