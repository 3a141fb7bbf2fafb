package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// DefaultAttemptTimeout bounds one publish attempt unless WithPublishRetry
// says otherwise: well below a caller's deadline, so a node that does not
// answer (paused, cut off) costs one attempt and the publish goes on
// through another node.
const DefaultAttemptTimeout = 2 * time.Second

// retryPolicy retries publishes whose outcome is unknown.
type retryPolicy struct {
	attempts    int           // total attempts, >= 1
	backoff     time.Duration // before the first retry; doubles
	attemptTime time.Duration // bound of one attempt; 0: none beyond ctx
}

var defaultRetry = retryPolicy{attempts: 4, backoff: 50 * time.Millisecond, attemptTime: DefaultAttemptTimeout}

// WithPublishRetry sets how a publish is retried when its outcome is
// unknown (Unavailable, no answer within attemptTimeout, DeadlineExceeded,
// ResourceExhausted, Aborted, a broken connection): attempts in total (1:
// never retry; default 4), waiting backoff before the first retry and
// twice as long before each next one (default 50 ms), each attempt bounded
// by attemptTimeout (default DefaultAttemptTimeout, plus a second per 4 MiB
// of request; 0: only by the caller's context). After an attempt that could not reach its node, got
// no answer within attemptTimeout or was answered Unavailable, the next
// attempt goes to another node (or to the leader the answer named).
// Retries resend the same request, so records with idempotency keys are
// never stored twice; a record without one may be stored twice when an
// attempt's outcome was unknown (see WithGeneratedIdempotencyKeys).
func WithPublishRetry(attempts int, backoff, attemptTimeout time.Duration) Option {
	return func(o *options) {
		o.retry = retryPolicy{attempts: max(1, attempts), backoff: backoff, attemptTime: attemptTimeout}
	}
}

// attemptBound is the deadline of one attempt to send size bytes: the
// policy's, plus a second per 4 MiB, so a large request on a slow link
// (32 Mbit/s and up) is not cut off while it is still being sent.
func (r retryPolicy) attemptBound(size int) time.Duration {
	if r.attemptTime <= 0 {
		return 0
	}
	return r.attemptTime + time.Duration(size>>22)*time.Second
}

func retryable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted, connect.CodeAborted:
		return true
	}
	return false
}

// publish sends req, retrying as the policy says, each attempt to the node
// the client picks (nodes.go).
func (c *Client) publish(ctx context.Context, req *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
	r := c.retry
	wait := r.backoff
	bound := r.attemptBound(proto.Size(req))
	// tried holds the nodes that refused this call; after a refusal that
	// named no leader, the next attempt prefers another node.
	tried := map[string]bool{}
	avoid := false
	for attempt := 1; ; attempt++ {
		cl := c.pick()
		if avoid {
			cl = c.at(c.nodes.useUntried(tried))
		}
		actx, cancel := ctx, context.CancelFunc(func() {})
		if bound > 0 {
			actx, cancel = context.WithTimeoutCause(ctx, bound, errNoAnswer)
		}
		resp, err := cl.pub.Publish(actx, req)
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errNoAnswer) {
			// The attempt's deadline, not the caller's: the node did not
			// answer in time.
			err = connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("%w %s within %s: %w", errNoAnswer, cl.addr, bound, err))
		}
		cancel()
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
		bad := badNode(err)
		if bad {
			tried[cl.addr] = true
			id, _ := leaderHint(err)
			avoid = id == 0
			c.moveOn(ctx, cl, err)
		}
		// A broken connection can surface as Canceled although the
		// caller did not cancel: that is retryable too.
		if attempt >= r.attempts || !(bad || retryable(err)) {
			return resp, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
		wait *= 2
	}
}
