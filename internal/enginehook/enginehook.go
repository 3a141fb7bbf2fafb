// Package enginehook sets the parts of an engine.Config that tests and
// the scenario runner need and users never should: the filesystem under
// the data directory, the broker clock, the dialer to the other members,
// and how long a forward cut short by an election waits for its winner.
// They are an unexported field of engine.Config, so they stay off the
// engine's public API; this package, internal to the module, is the one
// way to reach them (internal/enginetest, the engine's tests, and
// cmd/rewind's hidden --peer-via flag use it).
//
// Copying an engine.Config copies its hooks.
package enginehook

import (
	"context"
	"net"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Hooks are an engine.Config's test hooks. The zero value of each selects
// the production behaviour.
type Hooks struct {
	// FS replaces the operating system's filesystem (in-memory,
	// crash-simulating, fault-injecting). Default: the OS.
	FS vfs.FS
	// Clock replaces the broker clock (append times, token expiry, the
	// failed-authentication limits). Default time.Now.
	Clock func() time.Time
	// PeerDialer opens the connections to the other members (raft
	// streams, forwarded publishes, reads through leaders, membership
	// calls). Default: TCP with a 3 s dial timeout. Tests and the scenario
	// runner's proxies inject network faults with it.
	PeerDialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// NewLeaderWait bounds how long a node whose forward to a partition's
	// leader was cut short by an election waits for the winner, so that
	// its Unavailable answer names the new leader rather than the old one.
	// Default half an election timeout; tests set it long.
	NewLeaderWait time.Duration
}

// of returns the hooks inside a *engine.Config; package engine installs
// it (Register), since this package cannot import engine.
var of func(cfg any) *Hooks

// Register installs the accessor of engine.Config's hooks. Package engine
// calls it once, from init; nothing else may.
func Register(f func(cfg any) *Hooks) { of = f }

// Of returns the hooks of the engine.Config cfg points to, for the caller
// to set. It panics if cfg is not a *engine.Config.
func Of(cfg any) *Hooks { return of(cfg) }

// With returns cfg, an engine.Config, with its hooks replaced by h: for a
// configuration written in one expression,
//
//	enginehook.With(engine.Config{Dir: "data"}, enginehook.Hooks{FS: vfs.NewMem()})
func With[C any](cfg C, h Hooks) C {
	*of(&cfg) = h
	return cfg
}
