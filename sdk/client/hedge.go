package client

import (
	"context"
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
// answer that is a success, does not blame its node (badNode) or names
// the leader, else the last one, with the client that gave it; the other
// attempt is cancelled.
// The node that was hedged is penalised.
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
	answers := make(chan answer, 2)
	run := func(cl *Client) {
		v, err := try(actx, cl, k.bound, do)
		answers <- answer{v, err, cl}
	}
	go run(cl)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case a := <-answers:
		return a.v, a.cl, a.err
	case <-t.C:
	}
	other := c.nodes.other(cl.addr)
	if other == "" {
		a := <-answers
		return a.v, a.cl, a.err
	}
	c.nodes.fail(cl.addr)
	hedge := c.at(other)
	go run(hedge)
	a := <-answers
	if a.err != nil && badNode(a.err) && ctx.Err() == nil {
		// A refusal that names the partition's leader is the answer: the
		// retry goes there, while the other attempt may be stuck on the
		// old leader (a member cut off from the others). Unless the
		// leader it names is the node the other attempt waits on.
		pending := hedge
		if a.cl == hedge {
			pending = cl
		}
		if id, addr := leaderHint(a.err); id == 0 || addr != "" && a.cl.sibling(addr) == pending.addr {
			a = <-answers
		}
	}
	return a.v, a.cl, a.err
}
