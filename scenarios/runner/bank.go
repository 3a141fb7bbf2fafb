package runner

// The bank workload (the lost-update scenario): accounts are keys of the
// event store, each written by several writers at once. A writer loads its
// account's history (ReadKey), replays it to a balance, decides an entry
// (open the account, deposit, or withdraw what the balance allows) and
// appends it expecting the version it loaded. Refused (a ConditionError:
// another writer got there first), it loads and decides again. Every
// decision is one history.Publish with its Cond; a decision's own retries
// after answers that never came resend the same request, idempotency key
// included, so the server answers a stored attempt with the original.
//
// Half the writers are patient: they resend an unanswered append for up
// to bankRetryFor. The others give the decision up at the first attempt
// that got no answer (its outcome unknown), as an application whose
// request timed out would, and load again: they find their own entry
// there or not, and the checker judges an unknown append that was stored
// like an acknowledged one.
//
// Withdrawals take more than half of the balance on purpose: two writers
// that decide from the same version and were both accepted overdraw the
// account, which the business-rule check of the appends checker sees even
// where the versions alone would not.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
	"github.com/rewind-io/rewind/scenarios/spec"
	"github.com/rewind-io/rewind/sdk/client"
)

// Bounds of the bank workload's calls: each attempt, and the time a
// decision's append is retried before its outcome is left unknown.
const (
	bankAttempt  = 3 * time.Second
	bankRetryFor = 10 * time.Second
	openDeposit  = 100
)

// accountKey names account i.
func accountKey(i int) string { return fmt.Sprintf("acct-%02d", i) }

// bank runs b's writers on topic until ctx ends; spawn starts each one
// under the run's wait group. Writer w of account a is publisher
// a*Writers+w in the history.
func bank(ctx context.Context, addrs string, rec *recorder, topic string, b spec.Bank, rng *rand.Rand, spawn func(func())) {
	for a := range b.Accounts {
		// One client per account: its writers share the connections.
		c := client.New(addrs, client.WithPublishRetry(1, 0, 2*time.Second))
		for w := range b.Writers {
			wr := &writer{c: c, rec: rec, topic: topic, key: accountKey(a), id: a*b.Writers + w, patient: w%2 == 0,
				rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(a*b.Writers+w)))}
			spawn(func() { wr.run(ctx) })
		}
	}
}

// writer is one of an account's concurrent writers.
type writer struct {
	c     *client.Client
	rec   *recorder
	topic string
	key   string
	id    int
	rng   *rand.Rand
	// patient: resend an unanswered append (else: give it up at once,
	// its outcome unknown).
	patient bool
}

func (w *writer) run(ctx context.Context) {
	for seq := 0; ctx.Err() == nil; seq++ {
		loaded, ok := w.load(ctx)
		if !ok {
			return
		}
		op, amount := w.decide(loaded)
		idem := fmt.Sprintf("w%d-%d", w.id, seq)
		p := history.Publish{Publisher: w.id, Seq: seq, Topic: w.topic, Key: w.key, IdemKey: idem,
			Value: history.BankValue(op, amount, idem), Cond: &history.Condition{None: !loaded.HasHead, Version: loaded.Head}}
		at := w.append(ctx, &p, loaded.Expect())
		w.rec.publish(p, at)
	}
}

// load reads the account's whole history, retrying until it succeeds or
// ctx ends (ok false).
func (w *writer) load(ctx context.Context) (*client.ReadResult, bool) {
	backoff := 20 * time.Millisecond
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, bankAttempt)
		rr, err := readAll(rctx, w.c, w.topic, w.key)
		cancel()
		if err == nil {
			return rr, true
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	return nil, false
}

// decide picks the next entry from the loaded history: open a new account;
// otherwise deposit, or (one time in two, when there is money) withdraw
// more than half of the balance.
func (w *writer) decide(loaded *client.ReadResult) (history.BankOp, int64) {
	if !loaded.HasHead {
		return history.Open, openDeposit
	}
	var balance int64
	for _, r := range loaded.Records {
		switch op, amount, _ := history.ParseBankValue(string(r.Value)); op {
		case history.Open, history.Deposit:
			balance += amount
		case history.Withdraw:
			balance -= amount
		}
	}
	if balance > 0 && w.rng.IntN(2) == 0 {
		return history.Withdraw, balance/2 + 1 + w.rng.Int64N(balance-balance/2)
	}
	return history.Deposit, 1 + w.rng.Int64N(50)
}

// append sends p's entry with cond, resending the same request while no
// answer says what happened, and fills in p's outcome. It returns the
// record's append time when acknowledged.
func (w *writer) append(ctx context.Context, p *history.Publish, cond client.Condition) time.Time {
	msg := client.Message{Value: []byte(p.Value), IdempotencyKey: p.IdemKey}
	stored := false // some attempt may have stored it
	backoff := 20 * time.Millisecond
	p.Start = time.Now()
	defer func() { p.End = time.Now() }()
	for {
		p.Attempts++
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bankAttempt)
		res, err := w.c.Append(actx, w.topic, []byte(w.key), []client.Message{msg}, cond)
		cancel()
		if err == nil {
			r := res[0]
			p.Outcome, p.Partition, p.Offset, p.MessageID, p.Duplicate, p.Err = history.Acked, r.Partition, r.Offset, r.MessageID, r.Duplicate, ""
			p.Cond.KeyVersion = r.KeyVersion
			return r.AppendTime
		}
		p.Err = err.Error()
		var ce *client.ConditionError
		if errors.As(err, &ce) {
			// Refused at apply: nothing of this decision is stored (an
			// earlier attempt that was would have been answered as a
			// duplicate, before any condition is checked).
			p.Outcome, p.Partition = history.Failed, ce.Partition
			p.Cond.Conflict, p.Cond.Actual, p.Cond.HasActual = true, ce.Actual, ce.HasActual
			return time.Time{}
		}
		if !notStored(err) {
			stored = true
		}
		if time.Since(p.Start) > bankRetryFor || ctx.Err() != nil || (stored && !w.patient) {
			p.Outcome = history.Failed
			if stored {
				p.Outcome = history.Unknown
			}
			return time.Time{}
		}
		time.Sleep(backoff) // between attempts
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// readAll reads key's whole history, page by page.
func readAll(ctx context.Context, c *client.Client, topic, key string) (*client.ReadResult, error) {
	rr, err := c.ReadKey(ctx, topic, []byte(key))
	for err == nil && rr.More && len(rr.Records) > 0 {
		var next *client.ReadResult
		next, err = c.ReadKey(ctx, topic, []byte(key), client.FromVersion(rr.Records[len(rr.Records)-1].KeyVersion+1))
		if err == nil {
			rr.Records = append(rr.Records, next.Records...)
			rr.More = next.More
			rr.Head, rr.HasHead = next.Head, next.HasHead
		}
	}
	return rr, err
}

// readKeys reads the final history of every account, once the cluster
// has converged: through the leader, retrying each for up to within.
func readKeys(ctx context.Context, c *client.Client, topic string, b spec.Bank, within time.Duration) []history.KeyRead {
	var out []history.KeyRead
	for a := range b.Accounts {
		kr := history.KeyRead{Topic: topic, Key: accountKey(a)}
		deadline := time.Now().Add(within)
		for {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			rr, err := readAll(rctx, c, topic, kr.Key)
			cancel()
			if err == nil {
				kr.Partition, kr.Head, kr.HasHead, kr.Err = rr.Partition, rr.Head, rr.HasHead, ""
				for _, r := range rr.Records {
					kr.Records = append(kr.Records, recordOf(r))
				}
				break
			}
			kr.Err = err.Error()
			if time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond) // an election after the heal
		}
		out = append(out, kr)
	}
	return out
}
