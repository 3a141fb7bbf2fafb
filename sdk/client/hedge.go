package client

import (
	"context"
	"sync"
	"time"
)

// DefaultHedgeDelay is how long an attempt of a call that may run twice
// waits for its node's answer before the same request also goes to
// another node, unless WithHedgeDelay says otherwise. Below an election
// timeout (1 s with the server's defaults): a paused or cut-off node costs
// this much, not a whole attempt (DefaultAttemptTimeout); above the
// answers of a node that is only busy (a durable publish is milliseconds,
// a busy machine's worst some tens).
const DefaultHedgeDelay = 500 * time.Millisecond

// WithHedgeDelay sets how long an attempt waits for its node before the
// request is also sent to another node (default DefaultHedgeDelay; 0:
// never, an attempt waits out its attempt timeout). The first answer is
// the call's; the node that had not answered is skipped by the next calls
// for the node penalty (WithNodePenalty), so a client stops waiting out a
// silent node after one hedge. Only calls that may run twice with the
// effect of once are hedged: reads, idempotent writes, and publishes whose
// every record has an idempotency key (given or generated,
// WithGeneratedIdempotencyKeys). A publish with a record without one is
// never hedged, since both copies could be stored.
func WithHedgeDelay(d time.Duration) Option {
	return func(o *options) { o.retry.hedge = max(0, d) }
}

// hedged makes one attempt of do, on cl and, when k allows a hedge and cl
// has not answered within the policy's hedge delay, on another node too
// (one not penalised, if the client knows one). It returns the first
// answer that ends the call (final), else the last one, with the client
// that gave it; the other attempt is cancelled. Any answer the hedge's
// node gives ends the call (the first node was silent for the delay); a
// hedge that could not reach its node leaves it to the first attempt. The
// node that was hedged is penalised.
//
// The first attempt runs on the caller's goroutine and the hedge, when
// there is one, on the timer's: the common call, answered before the
// delay, costs no goroutine (whose stack would grow through the whole
// call path again on every call).
func hedged[T any](ctx context.Context, c *Client, cl *Client, k callKind, do func(context.Context, *Client) (T, error)) (T, *Client, error) {
	delay := c.retry.hedge
	if !k.hedge || delay <= 0 || k.bound > 0 && delay >= k.bound {
		v, err := try(ctx, cl, k.bound, do)
		return v, cl, err
	}
	type answer struct {
		v   T
		err error
		cl  *Client
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel() // the attempt that lost
	var (
		mu       sync.Mutex
		finished bool    // the first attempt has answered
		hc       *Client // where the hedge went, once sent
	)
	hedge := make(chan answer, 1)
	t := time.AfterFunc(delay, func() {
		mu.Lock()
		other := ""
		if !finished {
			other = c.nodes.other(cl.addr)
		}
		if other != "" {
			hc = c.at(other)
		}
		mu.Unlock()
		if other == "" {
			return
		}
		c.nodes.fail(cl.addr)
		v, err := try(actx, hc, k.bound, do)
		if !unreachable(err) {
			// Any answer of the hedge's node is the call's, a refusal
			// without a useful hint too (its retry goes on elsewhere
			// after the backoff): the first node has been silent for the
			// hedge delay, and waiting for it cost a whole attempt (2 s)
			// when the other member knew no leader yet. Only a hedge that
			// could not reach its node leaves the call to the first.
			cancel()
		}
		hedge <- answer{v, err, hc}
	})
	v, err := try(actx, cl, k.bound, do)
	mu.Lock()
	finished = true
	other := hc
	mu.Unlock()
	t.Stop()
	if other == nil || err == nil || ctx.Err() != nil {
		return v, cl, err
	}
	if actx.Err() == nil && final(err, cl, other) {
		return v, cl, err // the first attempt's own answer
	}
	// Cancelled by the hedge's answer, or the first node failed: the
	// hedge's answer (the last one, if it failed too).
	a := <-hedge
	return a.v, a.cl, a.err
}

// final reports whether err, the answer of node from while the call's other
// attempt waits on node waiting, ends the call: a success, an answer that
// does not blame its node (badNode), or a refusal that names the
// partition's leader, unless that leader is the node the other attempt
// waits on. A refusal naming the leader is the answer because the retry
// goes there, while the other attempt may be stuck on the old leader (a
// member cut off from the others).
func final(err error, from, waiting *Client) bool {
	if !badNode(err) {
		return true
	}
	id, addr := leaderHint(err)
	return id != 0 && (addr == "" || from.sibling(addr) != waiting.addr)
}
