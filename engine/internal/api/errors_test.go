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
