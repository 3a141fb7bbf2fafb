package client

import (
	"context"
	"time"

	"connectrpc.com/connect"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// retryPolicy retries publishes whose outcome is unknown.
type retryPolicy struct {
	attempts    int           // total attempts, >= 1
	backoff     time.Duration // before the first retry; doubles
	attemptTime time.Duration // bound of one attempt; 0: none beyond ctx
}

var defaultRetry = retryPolicy{attempts: 4, backoff: 50 * time.Millisecond}

// WithPublishRetry sets how a publish is retried when its outcome is unknown
// (Unavailable, DeadlineExceeded of one attempt, ResourceExhausted,
// Aborted): attempts in total (1: never retry; default 4), waiting backoff
// before the first retry and twice as long before each next one (default
// 50 ms), each attempt bounded by attemptTimeout (0: only by the caller's
// context). Retries resend the same request, so records with idempotency
// keys are never stored twice.
func WithPublishRetry(attempts int, backoff, attemptTimeout time.Duration) Option {
	return func(o *options) {
		o.retry = retryPolicy{attempts: max(1, attempts), backoff: backoff, attemptTime: attemptTimeout}
	}
}

func retryable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted, connect.CodeAborted:
		return true
	}
	return false
}

func (r retryPolicy) do(ctx context.Context, call func(context.Context) (*rewindv1.PublishResponse, error)) (*rewindv1.PublishResponse, error) {
	wait := r.backoff
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if r.attemptTime > 0 {
			actx, cancel = context.WithTimeout(ctx, r.attemptTime)
		}
		resp, err := call(actx)
		cancel()
		// A broken connection can surface as Canceled although the
		// caller did not cancel: that is retryable too.
		if err == nil || attempt >= r.attempts || !(retryable(err) || unreachable(err)) || ctx.Err() != nil {
			return resp, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, err
		}
		wait *= 2
	}
}
