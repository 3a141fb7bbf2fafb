package sandbox

import (
	"context"
	"fmt"
	"github.com/rewind-io/rewind/sandbox/internal/meter"
	"slices"
	"strings"
	"time"

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
// already compiled with the same bytes. Validation failures are KindInvalid
// errors saying what is wrong. The caller must Release the module.
func (r *Runtime) Compile(ctx context.Context, wasm []byte) (*Module, error) {
	if len(wasm) > r.lim.MaxModuleBytes {
		return nil, errorf(KindInvalid, "", "module is %d bytes, over the limit of %d", len(wasm), r.lim.MaxModuleBytes)
	}
	sha := SHA256(wasm)
	if m, err := r.lookup(sha); m != nil || err != nil {
		return m, err
	}
	select {
	case r.compiles <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.compiles }()
	if m, err := r.lookup(sha); m != nil || err != nil {
		return m, err
	}
	m, err := r.compile(ctx, sha, wasm)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		m.close()
		return nil, ErrClosed
	}
	m.refs = 1
	r.mu.modules[sha] = m
	evict := r.evictLocked()
	r.mu.Unlock()
	for _, e := range evict {
		e.close()
	}
	return m, nil
}

// Lookup returns the compiled module with this sha256 (hex), referenced
// (the caller must Release it), or nil when it is not compiled.
func (r *Runtime) Lookup(sha string) (*Module, error) { return r.lookup(sha) }

// lookup returns a referenced compiled module, if there is one.
func (r *Runtime) lookup(sha string) (*Module, error) {
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

func (r *Runtime) compile(ctx context.Context, sha string, wasm []byte) (*Module, error) {
	deadline := time.Duration(r.lim.CompileTimeoutMillis) * time.Millisecond
	start := r.now()
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
		cm, err := r.rt.CompileModule(context.Background(), inst.Wasm)
		select {
		case done <- result{cm, err}:
		case <-abandon:
			if cm != nil {
				_ = cm.Close(context.Background())
			}
		}
	}()
	timer := time.NewTimer(max(0, deadline-r.now().Sub(start)))
	defer timer.Stop()
	var res result
	select {
	case res = <-done:
	case <-timer.C:
		close(abandon)
		return nil, errorf(KindInvalid, sha, "compiling took longer than %v", deadline)
	case <-ctx.Done():
		close(abandon)
		return nil, ctx.Err()
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
	probe.close(ctx)
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
