package api

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/broker"
)

// TestLeaderHintHeaders: a node that could not get a publish to the
// partition's leader answers Unavailable with the leader's id and client
// address, and Rewind-Not-Stored only when nothing was stored.
func TestLeaderHintHeaders(t *testing.T) {
	for _, notStored := range []bool{true, false} {
		cause := fmt.Errorf("%w: forward cut short", broker.ErrUnavailable)
		if notStored {
			cause = fmt.Errorf("%w: %w: cannot reach node 3", broker.ErrUnavailable, broker.ErrNotStored)
		}
		err := toConnect(hclog.NewNullLogger(), fmt.Errorf("publish to %q: %w", "t", &broker.LeaderHintError{Partition: 1, Leader: 3, Addr: "h3:7070", Err: cause}))
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable {
			t.Fatalf("%v: want Unavailable", err)
		}
		if ce.Meta().Get(LeaderHeader) != "3" || ce.Meta().Get(LeaderAddressHeader) != "h3:7070" {
			t.Errorf("headers %v: want leader 3 at h3:7070", ce.Meta())
		}
		if got := ce.Meta().Get(NotStoredHeader) != ""; got != notStored {
			t.Errorf("not stored header %v, want %v", got, notStored)
		}
	}
}

// TestCodesAgreeWithBrokerTyped: the broker's list of final errors
// (broker.Typed) and this package's code table cannot drift apart. Every
// final error has a code of its own (not Internal), and the broker's
// marking of every other error as Unavailable changes no code the table
// gives, except where noted below: a new entry in the table placed after
// broker.ErrUnavailable, or a broker error that should be final but is
// not listed, fails here.
func TestCodesAgreeWithBrokerTyped(t *testing.T) {
	log := hclog.NewNullLogger()
	for _, e := range broker.Typed {
		if code := connect.CodeOf(toConnectCode(log, e)); code == connect.CodeInternal || code == connect.CodeUnknown {
			t.Errorf("broker.Typed has %q, which the code table does not map (%v)", e, code)
		}
	}
	// A member's FailedPrecondition refusal of a forwarded request
	// reaches its sender as ErrFailedPrecondition, which the broker marks
	// Unavailable on the publish and group paths; kept as it was (issue
	// 25 leaves behaviour unchanged), and pinned here so that a change is
	// deliberate.
	marked := map[error]connect.Code{broker.ErrFailedPrecondition: connect.CodeUnavailable}
	for _, c := range codes {
		want := c.code
		if code, ok := marked[c.err]; ok {
			want = code
		}
		err := fmt.Errorf("wrapped: %w", c.err)
		if got := connect.CodeOf(toConnectCode(log, broker.UnavailableUnlessTyped(err))); got != want {
			t.Errorf("%q: %v once the broker marked it, want %v (add it to broker.Typed, or order the table)", c.err, got, want)
		}
	}
}
