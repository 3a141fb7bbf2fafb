package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"connectrpc.com/connect"
)

// DefaultAttemptTimeout bounds one attempt of a publish or of another call
// that may be repeated, unless WithPublishRetry says otherwise: well below
// a caller's deadline, so a node that does not answer (paused, cut off)
// costs one attempt and the call goes on through another node.
const DefaultAttemptTimeout = 2 * time.Second

// DefaultRetryWindow is how long, from its first attempt, a call that may
// be repeated goes on being retried by default even when its attempts are
// used up: longer than a leader election (1–2 s with the server's
// defaults) on a busy machine, whose refusals come quickly one after the
// other. See WithRetryWindow.
const DefaultRetryWindow = 5 * time.Second

// maxBackoff caps the pause between retries: a quarter of a second, so a
// call whose attempts are refused quickly during an election (about half
// a second with the server's failure detector) goes out again within
// 250 ms of the new leader, not up to a second later (Kafka clients retry
// every 100 ms by default). A refusal costs the node little.
const maxBackoff = 250 * time.Millisecond

// retryPolicy retries calls whose outcome is unknown.
type retryPolicy struct {
	attempts    int           // total attempts, >= 1
	backoff     time.Duration // before the first retry; doubles up to maxBackoff
	attemptTime time.Duration // bound of one attempt; 0: none beyond ctx
	// window: retries go on until the attempts are used up and window
	// has passed since the first attempt (0: attempts only).
	window time.Duration
	// hedge: how long an attempt of a call that may run twice waits
	// before it also goes to another node (0: never; hedge.go).
	hedge time.Duration
}

var defaultRetry = retryPolicy{attempts: 4, backoff: 50 * time.Millisecond, attemptTime: DefaultAttemptTimeout, window: DefaultRetryWindow, hedge: DefaultHedgeDelay}

// more reports whether a call that made attempt attempts, the first at
// start, may make another.
func (r retryPolicy) more(attempt int, start, now time.Time) bool {
	return attempt < r.attempts || now.Sub(start) < r.window
}

// WithPublishRetry sets how a publish is retried when its outcome is
// unknown or may change (Unavailable, no answer within attemptTimeout,
// DeadlineExceeded, ResourceExhausted but for ErrTooLarge, Aborted, a
// broken connection): attempts in total (1:
// never retry; default 4), waiting backoff before the first retry and
// twice as long before each next one (default 50 ms), each attempt bounded
// by attemptTimeout (default DefaultAttemptTimeout, plus a second per 4 MiB
// of request; 0: only by the caller's context). After an attempt that could not reach its node, got
// no answer within attemptTimeout or was answered Unavailable, the next
// attempt goes to another node (or to the leader the answer named).
// Retries resend the same request, so records with idempotency keys are
// never stored twice; a record without one may be stored twice when an
// attempt's outcome was unknown (see WithGeneratedIdempotencyKeys).
//
// Topic, group, plugin and cluster calls follow the same policy, as far as
// each may be repeated (see the package documentation).
//
// The default policy also retries for DefaultRetryWindow after the first
// attempt, whatever the count; WithPublishRetry makes the count exact
// (no window) unless WithRetryWindow follows it.
func WithPublishRetry(attempts int, backoff, attemptTimeout time.Duration) Option {
	return func(o *options) {
		o.retry = retryPolicy{attempts: max(1, attempts), backoff: backoff, attemptTime: attemptTimeout, hedge: o.retry.hedge}
	}
}

// WithRetryWindow sets how long after its first attempt a call that may be
// repeated is still retried once its attempts are used up (default
// DefaultRetryWindow; 0: the attempts only). The pause between retries
// doubles up to 250 ms. Elections answer quickly with refusals that
// store nothing ("no leader known"), and four attempts 50, 100 and 200 ms
// apart ran out before a new leader was elected on a busy machine: the
// window makes the default outlast an election whatever the machine's
// speed.
func WithRetryWindow(d time.Duration) Option {
	return func(o *options) { o.retry.window = max(0, d) }
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

// retryable reports whether err is an outcome that another attempt may
// change. ResourceExhausted is (a busy partition, a quota), unless it is
// the client's refusal of an answer over MaxMessageBytes (ErrTooLarge).
func retryable(err error) bool {
	if errors.Is(err, ErrTooLarge) {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted, connect.CodeAborted:
		return true
	}
	return false
}

// callKind says how a unary call may be repeated.
type callKind struct {
	// again: running the call twice has the effect and the answer of
	// running it once (a read; a write that sets a value), so an attempt
	// whose outcome is unknown may be repeated, on another node. Without
	// it only an attempt that certainly did nothing (notDone) is.
	again bool
	// bound is one attempt's deadline (0: only the caller's context). Only
	// calls that may run again have one: a write cut off by it could not
	// be repeated, and its work (waiting for leaders, moving replicas) has
	// no bound the client knows. A node that stops answering such a call
	// is noticed by the connection's health check (WithHealthCheck).
	bound time.Duration
	// hedge: running the call twice at once has the effect of once, so an
	// attempt may also go to a second node while the first is out
	// (hedge.go).
	hedge bool
}

// repeatable is the kind of a call that may run again, moving up to size
// bytes (the request or the answer), and may be hedged.
func (c *Client) repeatable(size int) callKind {
	return callKind{again: true, bound: c.retry.attemptBound(size), hedge: true}
}

// once is the kind of a write that must not run twice: a second run would
// answer otherwise than the first (AlreadyExists after a create, NotFound
// after a delete) or do it again (a relative reset).
var once = callKind{}

// maxRedirects bounds how often one call follows refusals that name the
// node to ask (the coordinator of subscriber groups).
const maxRedirects = 2

// unary runs do, a unary call, on the node the client picks (nodes.go), and
// again as the retry policy and k allow. After an attempt whose node could
// not be reached, gave no answer within k.bound or answered Unavailable,
// that node is penalised and the next attempt goes to another (or to the
// leader the refusal named). A refusal naming the coordinator of
// subscriber groups sends the call there at once: it was not served.
func unary[T any](ctx context.Context, c *Client, k callKind, do func(context.Context, *Client) (T, error)) (T, error) {
	r := c.retry
	wait := r.backoff
	var to *Client // where a refusal sent the next attempt
	redirects := 0
	// tried holds the nodes that refused this call; after a refusal that
	// named no leader, the next attempt prefers another node.
	tried := map[string]bool{}
	avoid := false
	start := time.Now()
	for attempt := 1; ; attempt++ {
		cl := to
		if cl == nil {
			cl = c.pick()
			if avoid {
				cl = c.at(c.nodes.useUntried(tried))
			}
		}
		to = nil
		v, cl, err := hedged(ctx, c, cl, k, do)
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		if addr := coordinatorOf(err); addr != "" && redirects < maxRedirects {
			redirects++
			attempt--
			to = c.at(cl.sibling(addr))
			continue
		}
		bad := badNode(err)
		if bad {
			tried[cl.addr] = true
			id, _ := leaderHint(err)
			avoid = id == 0
			c.moveOn(ctx, cl, err)
		}
		// A broken connection can surface as Canceled although the
		// caller did not cancel: bad covers it.
		again := notDone(err) || k.again && (bad || retryable(err))
		if !again && bad && !k.again {
			err = outcomeUnknown(err)
		}
		if !again || !r.more(attempt, start, time.Now()) {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, err
		}
		wait = min(2*wait, maxBackoff)
	}
}

// try makes one attempt of do on cl, bounded by bound (0: only by ctx).
func try[T any](ctx context.Context, cl *Client, bound time.Duration, do func(context.Context, *Client) (T, error)) (T, error) {
	if bound <= 0 {
		return do(ctx, cl)
	}
	actx, cancel := context.WithTimeoutCause(ctx, bound, errNoAnswer)
	defer cancel()
	v, err := do(actx, cl)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errNoAnswer) {
		// The attempt's deadline, not the caller's: the node did not
		// answer in time.
		err = connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("%w %s within %s: %w", errNoAnswer, cl.addr, bound, err))
	}
	return v, err
}

// notDone reports whether err certainly did nothing, so any call may be
// sent again: the request never left (the connection could not be made),
// or the node said it stored nothing (Rewind-Not-Stored).
func notDone(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var ce *connect.Error
	return errors.As(err, &ce) && ce.Code() == connect.CodeUnavailable && ce.Meta().Get("Rewind-Not-Stored") != ""
}

// ErrOutcomeUnknown marks the error of a call that is not repeated by
// itself (a create, delete, upload, executed reset, node removal or
// rebalance) when its node failed while it was out: the call may have
// taken effect. Check (describe, list) before trying again. Test it with
// errors.Is; the error keeps its Connect code.
var ErrOutcomeUnknown = errors.New("the call may have taken effect before its node failed")

// unknownOutcome is ErrOutcomeUnknown with the error that caused it.
type unknownOutcome struct{ err *connect.Error }

func (u *unknownOutcome) Error() string {
	return u.err.Message() + " (" + ErrOutcomeUnknown.Error() + ": check before trying again)"
}
func (u *unknownOutcome) Unwrap() error        { return u.err }
func (u *unknownOutcome) Is(target error) bool { return target == ErrOutcomeUnknown }

// outcomeUnknown marks err, from a node that failed during a call that
// must not run twice, as ErrOutcomeUnknown, keeping its code.
func outcomeUnknown(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		ce = connect.NewError(connect.CodeUnknown, err)
	}
	return connect.NewError(ce.Code(), &unknownOutcome{ce})
}
