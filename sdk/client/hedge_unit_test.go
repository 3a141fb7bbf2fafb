package client

import (
	"context"
	"errors"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"
)

// TestHedgeRefusalEndsTheCall: the first node is silent; the hedge's node
// answers at once with a refusal that names no leader (it knows none yet:
// an election is under way). That answer ends the attempt at the hedge
// delay, for the retry loop to go on, instead of waiting out the silent
// node's attempt deadline. A hedge that cannot reach its node leaves the
// attempt to the first node.
func TestHedgeRefusalEndsTheCall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hedgeErr error
		want     time.Duration // when the attempt ends
	}{
		{"refused", connect.NewError(connect.CodeUnavailable, errors.New("no leader known for partition 0")), 500 * time.Millisecond},
		{"unreachable", connect.NewError(connect.CodeUnavailable, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := New("a:1,b:2,c:3", WithHedgeDelay(500*time.Millisecond))
				first := c.at(c.nodes.use())
				do := func(ctx context.Context, cl *Client) (int, error) {
					if cl == first {
						<-ctx.Done() // silent: paused, or cut off
						return 0, ctx.Err()
					}
					return 0, tc.hedgeErr
				}
				start := time.Now()
				_, from, err := hedged(t.Context(), c, first, callKind{again: true, hedge: true, bound: 2 * time.Second}, do)
				if d := time.Since(start); d != tc.want {
					t.Errorf("the attempt ended after %s, want %s (err %v from %s)", d, tc.want, err, from.addr)
				}
				if err == nil {
					t.Fatal("no error")
				}
			})
		})
	}
}
