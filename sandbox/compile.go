package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rewind-io/rewind/sandbox/internal/meter"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// allowedWASI is the allow-list of wasi_snapshot_preview1 imports (ABI v1):
// what the Go runtime and AssemblyScript need, no files, no sockets.
var allowedWASI = []string{
	"args_get", "args_sizes_get", "environ_get", "environ_sizes_get",
	"clock_time_get", "clock_res_get", "random_get",
	"fd_write", "fd_close", "fd_fdstat_get", "fd_seek",
	"poll_oneoff", "sched_yield", "proc_exit",
}

// The ABI v1 exports: name, parameters, results.
var abiExports = []struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
}{
	{"rewind_abi_v1", nil, nil},
	{"rewind_input", nil, []api.ValueType{api.ValueTypeI32}},
	{"rewind_input_cap", nil, []api.ValueType{api.ValueTypeI32}},
	{"rewind_output", nil, []api.ValueType{api.ValueTypeI32}},
	{"rewind_output_cap", nil, []api.ValueType{api.ValueTypeI32}},
	{"rewind_init", []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	{"rewind_filter", []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
}

// Compile validates, instruments and compiles a module, or returns the one
// already compiled with the same bytes. The compile runs in the background
// (see Prepare); Compile waits for it up to Limits.CompileWaitMillis and
// ctx. Errors: KindInvalid *Error saying what is wrong with the module
// (kept: asking again returns the same error without compiling again); a
// *CompilingError (errors.Is ErrCompiling) when the wait ends first, the
// compile going on; ctx's error; ErrClosed. The caller must Release the
// module.
//
// When ctx ends before the compile's turn and no other caller waits for
// it (nor started it with Prepare, nor was told ErrCompiling), the compile
// is dropped from the queue, never run: a client that has gone costs no
// compile. A compile already running runs to its end (see job).
func (r *Runtime) Compile(ctx context.Context, wasm []byte) (*Module, error) {
	if len(wasm) > r.lim.MaxModuleBytes {
		return nil, tooBig(len(wasm), r.lim.MaxModuleBytes)
	}
	sha := SHA256(wasm)
	wait := time.NewTimer(time.Duration(r.lim.CompileWaitMillis) * time.Millisecond)
	defer wait.Stop()
	for {
		m, j, err := r.start(sha, wasm, false)
		if m != nil || err != nil {
			return m, err
		}
		select {
		case <-j.done:
			if j.err != nil {
				return nil, j.err
			}
			// Compiled: start takes the reference (or compiles again if
			// it was evicted in between).
		case <-wait.C:
			r.leave(sha, j, true) // told "still compiling": it goes on
			return nil, &CompilingError{Module: sha, For: r.now().Sub(j.started)}
		case <-ctx.Done():
			r.leave(sha, j, false)
			return nil, ctx.Err()
		case <-r.done:
			return nil, ErrClosed
		}
	}
}

// Prepare starts compiling a module in the background, unless it is
// compiled, compiling or known not to compile, and returns its sha256 at
// once. State reports how it goes; Compile waits for it.
func (r *Runtime) Prepare(wasm []byte) string {
	sha := SHA256(wasm)
	if len(wasm) <= r.lim.MaxModuleBytes {
		if m, _, _ := r.start(sha, wasm, true); m != nil {
			m.Release()
		}
	}
	return sha
}

// State says whether the module with this sha256 (hex) is compiled in this
// runtime; for StateFailed, err says why.
func (r *Runtime) State(sha string) (State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.mu.modules[sha]; ok {
		return StateCompiled, nil
	}
	if _, ok := r.mu.jobs[sha]; ok {
		return StateCompiling, nil
	}
	if err, ok := r.mu.failed[sha]; ok {
		return StateFailed, err
	}
	return StateNone, nil
}

// State is where a module stands in a runtime.
type State uint8

const (
	// StateNone: not compiled here; it compiles when first used.
	StateNone State = iota
	// StateCompiling: compiling, or waiting for another compile to end.
	StateCompiling
	// StateCompiled: ready to run.
	StateCompiled
	// StateFailed: it does not compile (or instantiate); State's error
	// says why.
	StateFailed
)

func (s State) String() string {
	switch s {
	case StateCompiling:
		return "compiling"
	case StateCompiled:
		return "compiled"
	case StateFailed:
		return "failed"
	}
	return "not compiled"
}

// ErrCompiling is matched by a *CompilingError.
var ErrCompiling = errors.New("sandbox: module still compiling")

// CompilingError is Compile's answer when its wait ends before the
// module's compile: the compile goes on, and asking again later finds it.
type CompilingError struct {
	Module string        // sha256, hex
	For    time.Duration // since the compile was asked for
}

func (e *CompilingError) Error() string {
	return fmt.Sprintf("sandbox: module sha256:%s is still compiling (for %v); try again shortly", e.Module, e.For.Round(time.Second))
}

// Is makes errors.Is(err, ErrCompiling) hold.
func (e *CompilingError) Is(target error) bool { return target == ErrCompiling }

func tooBig(n, limit int) *Error {
	return errorf(KindInvalid, "", "module is %d bytes, over the limit of %d bytes this server takes: build it smaller (without debug sections)", n, limit)
}

// job is a module compiling in the background, or waiting for its turn
// (compiles run one at a time, in the order their turn comes).
//
// A job is wanted while a Compile waits for it, or once Prepare asked for
// it or a Compile was told ErrCompiling (keep: someone will come back for
// it). A job no longer wanted before its turn is dropped: removed from
// r.mu.jobs and never compiled. A job whose compile started runs to its
// end: wazero v1.12 checks a compile's context only when it compiles with
// several workers, between functions, and a compile cancelled there leaks
// its entry-preamble mapping (docs/design.md).
type job struct {
	done    chan struct{} // closed when err is set
	err     error
	started time.Time
	// drop is closed when the job is dropped before its turn.
	drop chan struct{}

	// Guarded by r.mu.
	waiters int  // Compile calls waiting for it now
	keep    bool // wanted even with no waiter
	running bool // its compile started (or it was dropped)
}

// maxFailed bounds the failed compiles a runtime remembers.
const maxFailed = 64

// start returns the compiled module, referenced; or the job compiling it,
// starting one if there is none, with the caller counted as its waiter
// (Compile: it must call leave when it stops waiting early) or keeping it
// (Prepare); or the error of its failed compile.
func (r *Runtime) start(sha string, wasm []byte, keep bool) (*Module, *job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return nil, nil, ErrClosed
	}
	if m, ok := r.mu.modules[sha]; ok {
		if m.unused != nil {
			r.mu.unused.Remove(m.unused)
			m.unused = nil
		}
		m.refs++
		return m, nil, nil
	}
	if err, ok := r.mu.failed[sha]; ok {
		return nil, nil, err
	}
	j := r.mu.jobs[sha]
	if j == nil {
		j = &job{done: make(chan struct{}), drop: make(chan struct{}), started: r.now()}
		r.mu.jobs[sha] = j
		r.compiling.Add(1)
		go r.run(j, sha, bytes.Clone(wasm))
	}
	if keep {
		j.keep = true
	} else {
		j.waiters++
	}
	return nil, j, nil
}

// leave ends a Compile's wait for job j before j ended: told says the
// caller was told the module is still compiling (so j is kept), else the
// caller has gone. A job nobody wants any more is dropped if its compile
// has not started.
func (r *Runtime) leave(sha string, j *job, told bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j.waiters--
	j.keep = j.keep || told
	if j.waiters > 0 || j.keep || j.running || r.mu.jobs[sha] != j {
		return
	}
	j.running = true // it never will
	delete(r.mu.jobs, sha)
	close(j.drop)
	r.stats.compilesDropped.Add(1)
}

// run compiles a module for job j, one compile at a time, and publishes
// the result: the module (unused, so evictable) or the failure.
func (r *Runtime) run(j *job, sha string, wasm []byte) {
	defer r.compiling.Done()
	var m *Module
	var err error
	select {
	case r.compiles <- struct{}{}:
		if !r.turn(j) {
			<-r.compiles
			return // dropped as its turn came
		}
		m, err = r.compile(sha, wasm)
		<-r.compiles
	case <-j.drop:
		return // leave removed it
	case <-r.done:
		err = ErrClosed
	}
	var drop []*Module
	r.mu.Lock()
	delete(r.mu.jobs, sha)
	switch {
	case err == nil && r.mu.closed:
		drop, err = []*Module{m}, ErrClosed
	case err == nil:
		r.mu.modules[sha] = m
		m.unused = r.mu.unused.PushFront(m)
		drop = r.evictLocked()
	case !errors.Is(err, ErrClosed):
		r.mu.failed[sha] = err
		r.mu.failedOrder = append(r.mu.failedOrder, sha)
		if len(r.mu.failedOrder) > maxFailed {
			delete(r.mu.failed, r.mu.failedOrder[0])
			r.mu.failedOrder = r.mu.failedOrder[1:]
		}
	}
	j.err = err
	close(j.done)
	r.mu.Unlock()
	for _, e := range drop {
		e.close()
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		r.log.Warn("module does not compile", "module", sha, "error", err)
	}
}

// turn marks j's compile started, unless j was dropped.
func (r *Runtime) turn(j *job) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j.running {
		return false
	}
	j.running = true
	return true
}

// Lookup returns the compiled module with this sha256 (hex), referenced
// (the caller must Release it), or nil when it is not compiled.
func (r *Runtime) Lookup(sha string) (*Module, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return nil, ErrClosed
	}
	m, ok := r.mu.modules[sha]
	if !ok {
		return nil, nil
	}
	if m.unused != nil {
		r.mu.unused.Remove(m.unused)
		m.unused = nil
	}
	m.refs++
	return m, nil
}

// Validate checks what can be checked of a module without compiling it,
// in about the time it takes to read it: its size, that it parses, its
// functions, imports, tables and memories against the limits. The
// exports and instantiation are checked when it compiles. Failures are
// KindInvalid errors; Info lacks the buffer sizes, known once compiled.
func (r *Runtime) Validate(wasm []byte) (Info, error) {
	if len(wasm) > r.lim.MaxModuleBytes {
		return Info{}, tooBig(len(wasm), r.lim.MaxModuleBytes)
	}
	sha := SHA256(wasm)
	inst, err := r.instrument(sha, wasm)
	if err != nil {
		return Info{}, err
	}
	return Info{SHA256: sha, Size: len(wasm), InstrumentedSize: len(inst.Wasm), Imports: importNames(inst.Info.Imports)}, nil
}

// instrument adds fuel metering to a module and checks it against the
// limits.
func (r *Runtime) instrument(sha string, wasm []byte) (*meter.Result, error) {
	inst, err := meter.InstrumentModule(wasm, meter.Options{InitialFuel: int64(r.lim.FuelPerInit)})
	if err != nil {
		return nil, &Error{Kind: KindInvalid, Module: sha, Reason: "does not parse", Err: err}
	}
	if inst.Info.Functions > r.lim.MaxFunctions {
		return nil, errorf(KindInvalid, sha, "defines %d functions, over the limit of %d", inst.Info.Functions, r.lim.MaxFunctions)
	}
	if err := r.checkImports(sha, inst.Info.Imports); err != nil {
		return nil, err
	}
	for i, t := range inst.Info.Tables {
		if t.Min > r.lim.MaxTableElements || (inst.Info.TableGrow && (!t.HasMax || t.Max > r.lim.MaxTableElements)) {
			return nil, errorf(KindInvalid, sha, "table %d may hold %s elements, over the limit of %d (a module that grows a table must declare its maximum)",
				i, t, r.lim.MaxTableElements)
		}
	}
	for i, mem := range inst.Info.Memories {
		if mem.Min > r.lim.MaxMemoryPages {
			return nil, errorf(KindInvalid, sha, "memory %d declares %d pages (64 KiB each), over the limit of %d", i, mem.Min, r.lim.MaxMemoryPages)
		}
	}
	return inst, nil
}

// compile validates, instruments and compiles a module, within
// CompileTimeoutMillis from when it starts.
func (r *Runtime) compile(sha string, wasm []byte) (*Module, error) {
	deadline := time.Duration(r.lim.CompileTimeoutMillis) * time.Millisecond
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	inst, err := r.instrument(sha, wasm)
	if err != nil {
		return nil, err
	}
	type result struct {
		cm  wazero.CompiledModule
		err error
	}
	done := make(chan result)
	abandon := make(chan struct{})
	r.compiling.Add(1)
	go func() {
		// wazero's compiler does not stop on cancellation: after a
		// timeout this goroutine runs on and closes what it made.
		defer r.compiling.Done()
		cm, err := r.compileModule(context.Background(), inst.Wasm)
		select {
		case done <- result{cm, err}:
		case <-abandon:
			if cm != nil {
				_ = cm.Close(context.Background())
			}
		}
	}()
	var res result
	select {
	case res = <-done:
	case <-timer.C:
		close(abandon)
		return nil, errorf(KindInvalid, sha, "compiling took longer than %v", deadline)
	case <-r.done:
		close(abandon)
		return nil, ErrClosed
	}
	if res.err != nil {
		return nil, &Error{Kind: KindInvalid, Module: sha, Reason: "does not compile", Err: res.err}
	}
	if err := checkExports(sha, res.cm); err != nil {
		_ = res.cm.Close(context.Background())
		return nil, err
	}
	m := &Module{r: r, sha: sha, size: len(wasm), compiled: res.cm}
	m.log = newGuestLog(r.log.Named("guest").With("module", sha[:16]), r.lim, r.now)
	m.info = Info{SHA256: sha, Size: len(wasm), InstrumentedSize: len(inst.Wasm), Imports: importNames(inst.Info.Imports)}
	// Prove the module starts: instantiate it, run its initialisation, and
	// check its buffers. rewind_init is not called (config-specific).
	probe, err := m.newInstance(nil, false)
	if err != nil {
		_ = res.cm.Close(context.Background())
		if e, ok := err.(*Error); ok && e.Kind != KindInvalid {
			e.Reason = "at instantiation: " + e.Reason
			e.Kind = KindInvalid
		}
		return nil, err
	}
	m.info.InputCap, m.info.OutputCap = probe.inCap, probe.outCap
	probe.close(context.Background())
	return m, nil
}

func (r *Runtime) checkImports(sha string, imports []meter.Import) error {
	for _, im := range imports {
		ok := false
		fn := im.Kind == meter.ImportFunc
		switch im.Module {
		case "wasi_snapshot_preview1":
			ok = fn && slices.Contains(allowedWASI, im.Name)
			if !ok && (strings.HasPrefix(im.Name, "path_") || strings.HasPrefix(im.Name, "fd_")) {
				return errorf(KindInvalid, sha, "imports %s.%s: modules get no filesystem", im.Module, im.Name)
			}
			if !ok && strings.HasPrefix(im.Name, "sock_") {
				return errorf(KindInvalid, sha, "imports %s.%s: modules get no network", im.Module, im.Name)
			}
		case "rewind":
			ok = fn && im.Name == "log"
		case "env":
			ok = fn && im.Name == "abort"
		}
		if !ok {
			return errorf(KindInvalid, sha, "imports %s %s.%s, which is not allowed (see the ABI's import list)", im.Kind, im.Module, im.Name)
		}
	}
	return nil
}

func importNames(imports []meter.Import) []string {
	names := make([]string, len(imports))
	for i, im := range imports {
		names[i] = im.Module + "." + im.Name
	}
	return names
}

func checkExports(sha string, cm wazero.CompiledModule) error {
	fns := cm.ExportedFunctions()
	if _, ok := fns["rewind_abi_v1"]; !ok {
		for name := range fns {
			if strings.HasPrefix(name, "rewind_abi_v") {
				return errorf(KindInvalid, sha, "exports %s: this server speaks ABI v1 (rewind_abi_v1)", name)
			}
		}
		return errorf(KindInvalid, sha, "does not export rewind_abi_v1: not a Rewind filter module (ABI v1)")
	}
	for name := range fns {
		if strings.HasPrefix(name, "rewind_abi_v") && name != "rewind_abi_v1" {
			return errorf(KindInvalid, sha, "exports both rewind_abi_v1 and %s", name)
		}
	}
	if _, ok := fns["_start"]; ok {
		return errorf(KindInvalid, sha, "exports _start: build a reactor (Go: -buildmode=c-shared), not a command")
	}
	for _, want := range abiExports {
		def, ok := fns[want.name]
		if !ok {
			return errorf(KindInvalid, sha, "does not export %s", want.name)
		}
		if !slices.Equal(def.ParamTypes(), want.params) || !slices.Equal(def.ResultTypes(), want.results) {
			return errorf(KindInvalid, sha, "exports %s with the wrong signature %s, want %s",
				want.name, signature(def.ParamTypes(), def.ResultTypes()), signature(want.params, want.results))
		}
	}
	if def, ok := fns["_initialize"]; ok && (len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 0) {
		return errorf(KindInvalid, sha, "exports _initialize with the wrong signature")
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		return errorf(KindInvalid, sha, "does not export its memory as \"memory\"")
	}
	return nil
}

func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("func(%s) (%s)", names(params), names(results))
}
