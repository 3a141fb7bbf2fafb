package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/meta"
)

// Auth returns the durable authorization state of the metadata group
// (package auth). Shared and never modified.
func (b *Broker) Auth() *auth.State { return b.meta.Auth() }

// ProposeAuth proposes an authorization change through the metadata group
// and waits until it is durable here. auth.ErrNoSuchUser and
// auth.ErrNoSuchRule come back as they are (the API maps them to
// NotFound).
func (b *Broker) ProposeAuth(ctx context.Context, c auth.Command) (auth.Result, error) {
	if err := b.open(); err != nil {
		return auth.Result{}, err
	}
	res, err := b.meta.ProposeAuth(ctx, c)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, auth.ErrInvalid), errors.Is(err, auth.ErrTooMany):
		return res, fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, auth.ErrNotInitialized):
		return res, unavailable(err)
	case errors.Is(err, meta.ErrNotProposed), errors.Is(err, meta.ErrOutcomeUnknown), errors.Is(err, meta.ErrStopped):
		return res, unavailable(err)
	}
	return res, err
}

// CommittedOffset returns group's committed offset in partition p of
// topic, as this node's replica of the partition has it (ok false: none).
func (b *Broker) CommittedOffset(group, topic string, p uint32) (offset uint64, ok bool, err error) {
	lt, err := b.topic(topic)
	if err != nil || int(p) >= len(lt.parts) || lt.parts[p] == nil {
		return 0, false, err
	}
	st, ok, err := lt.parts[p].GroupState(group)
	if err != nil || !ok || !st.Committed {
		return 0, false, err
	}
	return st.Offset, true, nil
}

// AllCommitted reports whether group has a committed offset in every
// partition of topic (as this node's replicas have them).
func (b *Broker) AllCommitted(group, topic string) bool {
	lt, err := b.topic(topic)
	if err != nil || len(lt.parts) == 0 {
		return false
	}
	for p := range lt.parts {
		if _, ok, err := b.CommittedOffset(group, topic, uint32(p)); err != nil || !ok {
			return false
		}
	}
	return true
}
