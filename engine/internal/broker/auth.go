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
