package api

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/partition"
)

// TestForwardedResourceExhaustedKeepsItsCode: a leader that refuses a
// forwarded publish with ResourceExhausted (disk almost full, too much
// pending) is answered to the client with ResourceExhausted too, as if it
// had asked the leader itself; it came back as Unavailable, which tells a
// client to fail over rather than back off.
func TestForwardedResourceExhaustedKeepsItsCode(t *testing.T) {
	for _, cause := range []error{partition.ErrDiskFull, partition.ErrBusy} {
		leader := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("publish to %q: %w", "t", cause))
		err := forwardError(3, "t", 1, leader)
		if !errors.Is(err, cause) {
			t.Errorf("forwarded %v: %v, want it to be %v", cause, err, cause)
		}
		if got := connect.CodeOf(toConnect(hclog.NewNullLogger(), err)); got != connect.CodeResourceExhausted {
			t.Errorf("forwarded %v answered with %v, want resource_exhausted", cause, got)
		}
	}
}
