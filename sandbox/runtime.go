package sandbox

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Config configures a Runtime. The zero value works: no disk cache, default
// limits, no logging.
type Config struct {
	// CacheDir keeps compiled machine code across restarts (wazero's
	// compilation cache, keyed by the module's bytes and wazero's version).
	// Empty: compiled code is kept in memory only.
	CacheDir string
	// Limits bound every module; zero fields take their defaults.
	Limits Limits
	// Logger receives guest log lines (rate-limited) and sandbox events.
	Logger hclog.Logger
	// Now is the clock of log rate limiting. Default time.Now.
	Now func() time.Time
	// MaxModules bounds compiled modules kept while no filter uses them.
	// Default 64.
	MaxModules int
}

// Runtime compiles and runs filter modules. It is safe for concurrent use.
type Runtime struct {
	lim   Limits
	log   hclog.Logger
	now   func() time.Time
	rt    wazero.Runtime
	cache wazero.CompilationCache
	max   int

	stats    counters
	calls    chan struct{} // a token per running guest call
	compiles chan struct{} // one compile at a time
	// compiling counts compile jobs and wazero compilations in progress,
	// including those abandoned at their timeout.
	compiling sync.WaitGroup
	// compileModule is wazero's compiler (a test may slow it down).
	compileModule func(context.Context, []byte) (wazero.CompiledModule, error)
	done          chan struct{} // closed by Close

	mu struct {
		sync.Mutex
		closed  bool
		modules map[string]*Module // compiled
		unused  *list.List         // of *Module with no references, most recent first
		idle    *list.List         // of *instance, most recent first (pool.go)
		// idleBytes is the linear memory of the instances in idle.
		idleBytes int64
		jobs      map[string]*job // compiling (or waiting to), by sha256
		// failed holds the error of modules that did not compile, the
		// latest maxFailed, oldest first in failedOrder.
		failed      map[string]error
		failedOrder []string
	}
}

// New starts a runtime.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	lim := cfg.Limits.WithDefaults()
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	r := &Runtime{lim: lim, log: cfg.Logger, now: cfg.Now, max: cfg.MaxModules}
	if r.log == nil {
		r.log = hclog.NewNullLogger()
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.max <= 0 {
		r.max = 64
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCoreFeatures(api.CoreFeaturesV2).
		WithMemoryLimitPages(lim.MaxMemoryPages).
		WithCloseOnContextDone(false) // fuel bounds every call; see doc.go
	if cfg.CacheDir != "" {
		// 0700, like the data directory it lives in (wazero writes its
		// files 0600).
		if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: cache dir: %w", err)
		}
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("sandbox: cache dir: %w", err)
		}
		r.cache = c
		rc = rc.WithCompilationCache(c)
	}
	r.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	if err := r.instantiateHost(ctx); err != nil {
		_ = r.rt.Close(ctx)
		return nil, err
	}
	r.calls = make(chan struct{}, lim.MaxConcurrentCalls)
	r.compiles = make(chan struct{}, 1)
	r.done = make(chan struct{})
	r.mu.modules = make(map[string]*Module)
	r.mu.jobs = make(map[string]*job)
	r.mu.failed = make(map[string]error)
	r.compileModule = r.rt.CompileModule
	r.mu.unused = list.New()
	r.mu.idle = list.New()
	return r, nil
}

// counters count what filters did (Stats), without locks.
type counters struct {
	calls, fuel atomic.Uint64
	failures    [KindConfig + 1]atomic.Uint64 // by Kind
	// idleEvictions counts idle instances closed to stay within the idle
	// pool's bounds; compilesDropped compiles never run (compile.go).
	idleEvictions, compilesDropped atomic.Uint64
}

// Stats counts what the runtime's filters did since it started.
type Stats struct {
	// Calls counts guest calls of rewind_filter; Fuel the fuel they
	// burned (a call that ran out counts its whole budget).
	Calls, Fuel uint64
	// Failures counts the runs of filters (Filter.Run) that failed, by
	// kind of failure; the index is the Kind (index 0 is unused).
	Failures [KindConfig + 1]uint64
	// IdleInstances and IdleBytes are the instances kept for reuse now
	// and their linear memory in bytes (at most
	// Limits.MaxIdleMemoryBytes); IdleEvictions counts idle instances
	// closed to stay within MaxIdleInstances and MaxIdleMemoryBytes.
	IdleInstances int
	IdleBytes     int64
	IdleEvictions uint64
	// CompilesDropped counts compiles removed from the queue before their
	// turn because every caller waiting for them had gone (their
	// contexts ended), none of them started by Prepare.
	CompilesDropped uint64
}

// Stats returns the runtime's counters. Safe for concurrent use.
func (r *Runtime) Stats() Stats {
	var st Stats
	st.Calls, st.Fuel = r.stats.calls.Load(), r.stats.fuel.Load()
	st.IdleInstances, st.IdleBytes = r.idleStats()
	st.IdleEvictions, st.CompilesDropped = r.stats.idleEvictions.Load(), r.stats.compilesDropped.Load()
	for k := range st.Failures {
		st.Failures[k] = r.stats.failures[k].Load()
	}
	return st
}

// Limits returns the runtime's limits, defaults filled in.
func (r *Runtime) Limits() Limits { return r.lim }

// instantiateHost provides the imports a module may use: WASI (the
// allow-list is enforced at validation), rewind.log and env.abort.
func (r *Runtime) instantiateHost(ctx context.Context) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r.rt); err != nil {
		return err
	}
	i32 := api.ValueTypeI32
	_, err := r.rt.NewHostModuleBuilder("rewind").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostLog), []api.ValueType{i32, i32}, nil).Export("log").
		Instantiate(ctx)
	if err != nil {
		return err
	}
	_, err = r.rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostAbort), []api.ValueType{i32, i32, i32, i32}, nil).Export("abort").
		Instantiate(ctx)
	return err
}

// Close stops the runtime: every module and instance is closed. Calls in
// progress finish first (they are bounded by fuel).
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil
	}
	r.mu.closed = true
	r.mu.Unlock()
	close(r.done)
	for range cap(r.calls) {
		r.calls <- struct{}{}
	}
	// Compile jobs end (those waiting for their turn at once); a compile
	// that timed out runs on in the background (wazero's compiler cannot
	// be stopped): wazero must outlive it.
	r.compiling.Wait()
	err := r.rt.Close(ctx)
	if r.cache != nil {
		err = errors.Join(err, r.cache.Close(ctx))
	}
	return err
}

// SHA256 returns the hex sha256 of a module's bytes: its identity.
func SHA256(wasm []byte) string {
	s := sha256.Sum256(wasm)
	return hex.EncodeToString(s[:])
}

// Module is a validated, instrumented and compiled module. Get one with
// Compile and Release it when done.
type Module struct {
	r        *Runtime
	sha      string
	size     int
	compiled wazero.CompiledModule
	log      *guestLog
	info     Info

	// Guarded by r.mu.
	refs   int
	unused *list.Element
}

// Info describes a module.
type Info struct {
	// SHA256 is the hex sha256 of the module as uploaded.
	SHA256 string
	// Size is its size in bytes as uploaded.
	Size int
	// InstrumentedSize is its size with fuel metering.
	InstrumentedSize int
	// Imports lists what it imports, as "module.name".
	Imports []string
	// InputCap and OutputCap are its buffer sizes.
	InputCap, OutputCap uint32
}

// SHA256 returns the module's identity.
func (m *Module) SHA256() string { return m.sha }

// Info describes the module.
func (m *Module) Info() Info { return m.info }

// Release gives up the reference Compile returned. The module stays
// compiled while other references exist, and for a while after.
func (m *Module) Release() {
	r := m.r
	r.mu.Lock()
	m.refs--
	var evict []*Module
	if m.refs == 0 {
		m.unused = r.mu.unused.PushFront(m)
		evict = r.evictLocked()
	}
	r.mu.Unlock()
	for _, e := range evict {
		e.close()
	}
}

// evictLocked removes unused modules beyond the cap.
func (r *Runtime) evictLocked() []*Module {
	var out []*Module
	for len(r.mu.modules) > r.max && r.mu.unused.Len() > 0 {
		m := r.mu.unused.Remove(r.mu.unused.Back()).(*Module)
		m.unused = nil
		delete(r.mu.modules, m.sha)
		out = append(out, m)
	}
	return out
}

// close closes the module's idle instances and compiled code.
func (m *Module) close() {
	m.r.dropIdle(m)
	_ = m.compiled.Close(context.Background())
}

// Forget drops a module from the runtime once nothing uses it (a deleted
// plugin), and the error of its failed compile. Unknown modules are
// ignored.
func (r *Runtime) Forget(sha string) {
	r.mu.Lock()
	if _, ok := r.mu.failed[sha]; ok {
		delete(r.mu.failed, sha)
		r.mu.failedOrder = slices.DeleteFunc(r.mu.failedOrder, func(s string) bool { return s == sha })
	}
	m, ok := r.mu.modules[sha]
	if !ok || m.refs > 0 {
		r.mu.Unlock()
		return
	}
	delete(r.mu.modules, sha)
	if m.unused != nil {
		r.mu.unused.Remove(m.unused)
		m.unused = nil
	}
	r.mu.Unlock()
	m.close()
}

// acquireCall waits for a guest-call token.
func (r *Runtime) acquireCall(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // even when a slot is free: select would pick at random
	}
	select {
	case r.calls <- struct{}{}:
	case <-r.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	closed := r.mu.closed
	r.mu.Unlock()
	if closed {
		<-r.calls
		return ErrClosed
	}
	return nil
}

func (r *Runtime) releaseCall() { <-r.calls }
