package meta

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/keys"
)

// authState is the authorization state (package auth) kept in the
// metadata group: tokens (hashes only), ACL rules, superusers and the
// resume token key. It is one JSON value under keys.AuthStateKey, written
// in the same batch as the command that changed it, so it replicates and
// recovers like the catalog: a new member applies the whole metadata log.
type authState struct {
	applied *auth.State // loop-owned
	// durable is what readers see (published in Durable).
	durable atomic.Pointer[auth.State]
}

func (m *Meta) openAuth() error {
	var data []byte
	v, closer, err := m.cfg.DB.Get(keys.AuthStateKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("meta: auth state: %w", err)
	default:
		data = append([]byte(nil), v...)
		closer.Close()
	}
	st, err := auth.Load(data)
	if err != nil {
		return err
	}
	m.auth.applied = st
	m.auth.durable.Store(st)
	return nil
}

func (m *Meta) applyAuth(w *pebble.Batch, c *auth.Command) (auth.Result, error) {
	st, res, err := m.auth.applied.Apply(*c)
	if err != nil || st == m.auth.applied {
		return res, err
	}
	v, err := st.Marshal()
	if err != nil {
		return auth.Result{}, err
	}
	if err := w.Set(keys.AuthStateKey, v, nil); err != nil {
		return auth.Result{}, err
	}
	m.auth.applied = st
	return res, nil
}

func (m *Meta) publishAuth() { m.auth.durable.Store(m.auth.applied) }

// Auth returns the durable authorization state. It is shared and never
// modified; safe for concurrent use without locks.
func (m *Meta) Auth() *auth.State { return m.auth.durable.Load() }

// ProposeAuth proposes an authorization change and waits until it is
// durable on this node.
func (m *Meta) ProposeAuth(ctx context.Context, c auth.Command) (auth.Result, error) {
	r, err := m.proposeResult(ctx, command{Auth: &c})
	return r.auth, err
}
