package bank

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
)

// Bank runs the commands against a topic of accounts, an account per key.
// Safe for concurrent use: writers that race on an account are serialized
// by the conditional appends, not by a lock.
type Bank struct {
	c         *client.Client
	topic     string
	conflicts atomic.Int64
}

// New returns a Bank over topic (create it with CreateTopic).
func New(c *client.Client, topic string) *Bank { return &Bank{c: c, topic: topic} }

// CreateTopic creates the accounts topic with one partition (so any two
// accounts can take part in one transfer) and no retention limit (the
// default: the events are the accounts). A topic already there is fine.
func (b *Bank) CreateTopic(ctx context.Context) error {
	_, err := b.c.CreateTopic(ctx, b.topic, client.WithPartitions(1))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return nil
	}
	return err
}

// Conflicts returns how many appends were refused because another writer
// changed an account first (each was retried).
func (b *Bank) Conflicts() int64 { return b.conflicts.Load() }

// Open opens account id for owner (ErrAlreadyOpen when it is open).
func (b *Bank) Open(ctx context.Context, id, owner string) error {
	return b.update(ctx, id, func(a Account) ([]Event, error) { return a.OpenAccount(owner) })
}

// Deposit puts amount cents into account id.
func (b *Bank) Deposit(ctx context.Context, id string, amount int64) error {
	return b.update(ctx, id, func(a Account) ([]Event, error) { return a.Deposit(amount) })
}

// Withdraw takes amount cents from account id (ErrInsufficientFunds
// rather than an overdraft).
func (b *Bank) Withdraw(ctx context.Context, id string, amount int64) error {
	return b.update(ctx, id, func(a Account) ([]Event, error) { return a.Withdraw(amount) })
}

// Account loads account id as it stands.
func (b *Bank) Account(ctx context.Context, id string) (Account, error) {
	a, _, err := b.load(ctx, id)
	return a, err
}

// update is the load-decide-append loop of a command on one account.
func (b *Bank) update(ctx context.Context, id string, decide func(Account) ([]Event, error)) error {
	for {
		a, unchanged, err := b.load(ctx, id)
		if err != nil {
			return err
		}
		events, err := decide(a)
		if err != nil {
			return err
		}
		msgs := make([]client.Message, len(events))
		for i, e := range events {
			msgs[i] = message(id, e)
		}
		_, err = b.c.Append(ctx, b.topic, []byte(id), msgs, unchanged)
		if !b.conflict(err) {
			return err
		}
	}
}

// Transfer moves amount cents from one account to another: one atomic
// append of an event to each, made only if neither account changed since
// it was loaded.
func (b *Bank) Transfer(ctx context.Context, from, to string, amount int64) error {
	for {
		src, srcUnchanged, err := b.load(ctx, from)
		if err != nil {
			return err
		}
		dst, dstUnchanged, err := b.load(ctx, to)
		if err != nil {
			return err
		}
		out, in, err := Transfer(src, dst, amount)
		if err != nil {
			return err
		}
		_, err = b.c.Append(ctx, b.topic, []byte(from), []client.Message{message(from, out), message(to, in)},
			srcUnchanged, client.ForKey([]byte(to), dstUnchanged))
		if !b.conflict(err) {
			return err
		}
	}
}

// conflict reports whether err is an append refused because the account
// changed since it was loaded: the command is decided again on the new
// state. Every refusal means another writer's append went in, so the
// retries end when the contention does; ctx bounds them.
func (b *Bank) conflict(err error) bool {
	var ce *client.ConditionError
	if !errors.As(err, &ce) {
		return false
	}
	b.conflicts.Add(1)
	return true
}

// load reads the events of account id and folds them. It also returns the
// condition "the account is as loaded": the version of its last event, or
// no event at all.
func (b *Bank) load(ctx context.Context, id string) (Account, client.Condition, error) {
	a := Account{ID: id}
	var opts []client.ReadOption
	for {
		r, err := b.c.ReadKey(ctx, b.topic, []byte(id), opts...)
		if err != nil {
			return a, client.Condition{}, err
		}
		for _, rec := range r.Records {
			e, err := Decode(rec)
			if err != nil {
				return a, client.Condition{}, err
			}
			a.Apply(e)
		}
		if !r.More {
			return a, r.Expect(), nil
		}
		// A long history comes in pages.
		opts = []client.ReadOption{client.FromVersion(r.Records[len(r.Records)-1].KeyVersion + 1)}
	}
}

// message encodes e as a record of account id.
func message(id string, e Event) client.Message {
	v, err := json.Marshal(e)
	if err != nil {
		panic(err) // an Event always encodes
	}
	return client.Message{Key: []byte(id), Type: e.Type, Value: v}
}

// Decode returns the event a record of an account holds.
func Decode(rec client.Record) (Event, error) {
	var e Event
	for _, h := range rec.Headers {
		if h.Key == client.TypeHeader {
			e.Type = string(h.Value)
		}
	}
	if err := json.Unmarshal(rec.Value, &e); err != nil {
		return e, fmt.Errorf("bank: %s version %d: %w", rec.Key, rec.KeyVersion, err)
	}
	return e, nil
}
