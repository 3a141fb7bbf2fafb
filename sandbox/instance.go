package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/rewind-io/rewind/sandbox/internal/meter"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// instance is one initialised module instance. It is used by one call at a
// time: it sits in the runtime's idle list or is held by a Filter's Run.
type instance struct {
	m   *Module
	key string // the config it was initialised with (sha256)
	// ctx is what every call runs with: it carries the instance to the
	// host functions. Calls are bounded by fuel, not by a context.
	ctx context.Context
	mod api.Module
	mem api.Memory

	fuel   api.MutableGlobal
	filter api.Function
	stack  [2]uint64

	in, inCap, out, outCap uint32

	// Per-call state, reset by begin.
	clock int64  // clock readings in this call
	abort string // set by env.abort
	// last is the guest's last log line in this call (rewind.log, stdout
	// or stderr, before rate limiting), at most MaxGuestMessageBytes: the
	// message a guest writes just before it reports a failure.
	last []byte
	// crash is the first line of the call's stdout or stderr that starts a
	// language runtime's crash report (crashLine), at most
	// MaxGuestMessageBytes: why a Go guest traps ("runtime: out of memory:
	// ...", "panic: ..."), printed before its goroutine dump.
	crash []byte

	stdout, stderr *lineWriter

	// idleBytes is its memory's size when it was last put idle (pool.go);
	// guarded by the runtime's mu while it is idle.
	idleBytes int64
}

type instanceKey struct{}

// newInstance instantiates m and runs its initialisation (_initialize, the
// buffer exports and, when init is set, rewind_init with config).
func (m *Module) newInstance(config []byte, init bool) (*instance, error) {
	in := &instance{m: m, key: configKey(config)}
	in.stdout = &lineWriter{g: m.log, stream: "stdout", note: in.noteOutput}
	in.stderr = &lineWriter{g: m.log, stream: "stderr", note: in.noteOutput}
	in.ctx = context.WithValue(context.Background(), instanceKey{}, in)
	ctx := in.ctx
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdout(in.stdout).
		WithStderr(in.stderr).
		WithRandSource(fixedRand{}).
		WithWalltime(in.walltime, 1000).
		WithNanotime(in.nanotime, 1000)
	lim := m.r.lim
	mod, err := m.r.rt.InstantiateModule(ctx, m.compiled, cfg)
	if err != nil {
		return nil, in.classify(err, "instantiating", lim.FuelPerInit)
	}
	in.mod = mod
	in.mem = mod.Memory()
	fuel, ok := mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal)
	if !ok || in.mem == nil {
		in.close(ctx)
		return nil, errorf(KindInvalid, m.sha, "instrumented module lacks its fuel global or memory")
	}
	in.fuel = fuel
	in.filter = mod.ExportedFunction("rewind_filter")
	if f := mod.ExportedFunction("_initialize"); f != nil {
		if _, err := in.call(ctx, f, lim.FuelPerInit); err != nil {
			in.close(ctx)
			return nil, in.classify(err, "_initialize", lim.FuelPerInit)
		}
	}
	var vals [4]uint32
	for i, name := range []string{"rewind_input", "rewind_input_cap", "rewind_output", "rewind_output_cap"} {
		res, err := in.call(ctx, mod.ExportedFunction(name), lim.FuelPerInit)
		if err != nil {
			in.close(ctx)
			return nil, in.classify(err, name, lim.FuelPerInit)
		}
		vals[i] = uint32(res[0])
	}
	in.in, in.inCap, in.out, in.outCap = vals[0], vals[1], vals[2], vals[3]
	size := uint64(in.mem.Size())
	if uint64(in.in)+uint64(in.inCap) > size || uint64(in.out)+uint64(in.outCap) > size {
		in.close(ctx)
		return nil, errorf(KindInvalid, m.sha, "buffers input [%d, +%d) or output [%d, +%d) lie outside its %d bytes of memory",
			in.in, in.inCap, in.out, in.outCap, size)
	}
	if in.inCap < RecordOverhead || in.outCap < 5 {
		in.close(ctx)
		return nil, errorf(KindInvalid, m.sha, "buffers too small: input %d bytes, output %d bytes", in.inCap, in.outCap)
	}
	if !init {
		return in, nil
	}
	if len(config) > int(in.inCap) {
		in.close(ctx)
		return nil, errorf(KindLimit, m.sha, "config is %d bytes; the module's input buffer holds %d", len(config), in.inCap)
	}
	in.mem.Write(in.in, config)
	in.stack[0] = uint64(len(config))
	in.begin(lim.FuelPerInit)
	err = mod.ExportedFunction("rewind_init").CallWithStack(ctx, in.stack[:])
	in.flushLogs()
	if err != nil {
		in.close(ctx)
		return nil, in.classify(err, "rewind_init", lim.FuelPerInit)
	}
	if rc := int32(in.stack[0]); rc != 0 {
		in.close(ctx)
		return nil, errorf(KindConfig, m.sha, "rewind_init returned %d: the module refused its config: %s", rc, in.message())
	}
	return in, nil
}

// begin resets the per-call state and the fuel.
func (in *instance) begin(fuel int64) {
	in.clock, in.abort, in.last, in.crash = 0, "", in.last[:0], in.crash[:0]
	in.fuel.Set(uint64(fuel))
}

// MaxGuestMessageBytes bounds the guest's message that a KindGuest or
// KindConfig error carries (its last log line, truncated).
const MaxGuestMessageBytes = 256

// note records p as the guest's last log line of the call.
func (in *instance) note(p []byte) {
	in.last = append(in.last[:0], p[:min(len(p), MaxGuestMessageBytes+1)]...)
}

// noteOutput notes a line of the guest's stdout or stderr: as its last
// log line, and as the call's crash report if it is the first to start one.
func (in *instance) noteOutput(p []byte) {
	in.note(p)
	if len(in.crash) == 0 && crashLine(p) {
		in.crash = append(in.crash[:0], p[:min(len(p), MaxGuestMessageBytes+1)]...)
	}
}

// crashPrefixes start the line that says why a language runtime stops a
// guest, before any stack dump: Go's "runtime: out of memory: cannot
// allocate ..." (followed by "fatal error: out of memory"), "fatal error:
// ..." and "panic: ..." (also TinyGo's), and Rust's "thread '...'
// panicked at ..." or "panicked at ...".
var crashPrefixes = []string{"runtime: ", "fatal error: ", "panic: ", "panicked at ", "thread '"}

func crashLine(p []byte) bool {
	for _, pre := range crashPrefixes {
		if bytes.HasPrefix(p, []byte(pre)) {
			return pre != "thread '" || bytes.Contains(p, []byte("panicked at"))
		}
	}
	return false
}

// bounded returns p printable and at most MaxGuestMessageBytes, cut at a
// character.
func bounded(p []byte) string {
	if len(p) > MaxGuestMessageBytes {
		n := MaxGuestMessageBytes
		for n > 0 && !utf8.RuneStart(p[n]) {
			n-- // cut at a character
		}
		return printable(p[:n]) + "…"
	}
	return printable(p)
}

// message is the guest's last log line of the call, printable and
// bounded, for an error's Reason.
func (in *instance) message() string {
	if len(in.last) == 0 {
		return "(the module logged no reason)"
	}
	return bounded(in.last)
}

// call runs f with no arguments and the given fuel.
func (in *instance) call(ctx context.Context, f api.Function, fuel int64) ([]uint64, error) {
	in.begin(fuel)
	res, err := f.Call(ctx)
	in.flushLogs()
	return res, err
}

func (in *instance) flushLogs() {
	in.stdout.flush()
	in.stderr.flush()
}

// fuelLeft is the fuel the last call did not burn (negative: it ran out).
func (in *instance) fuelLeft() int64 { return int64(in.fuel.Get()) }

// classify turns a failed call into a sandbox error. A trap's reason is
// the guest's crash report when it printed one (the wasm error says only
// "unreachable"), and the wasm error's first line follows in Error(); the
// wasm stack trace stays in Err and goes to the server log, rate-limited
// with the guest's own lines.
func (in *instance) classify(err error, what string, budget int64) *Error {
	sha := in.m.sha
	var exit *sys.ExitError
	switch {
	case in.abort != "":
		return &Error{Kind: KindTrap, Module: sha, Reason: fmt.Sprintf("%s: %s", what, in.abort)}
	case in.fuel != nil && in.fuelLeft() < 0:
		return &Error{Kind: KindFuel, Module: sha, Reason: fmt.Sprintf("%s ran out of fuel (%d per call): an endless loop or too much work per call", what, budget)}
	case errors.As(err, &exit):
		return &Error{Kind: KindTrap, Module: sha, Reason: fmt.Sprintf("%s: the module exited (proc_exit %d)", what, exit.ExitCode())}
	}
	in.m.log.line("trap", []byte(err.Error()))
	reason := what
	if len(in.crash) > 0 {
		reason += ": " + bounded(in.crash)
	}
	if in.mem != nil && uint64(in.mem.Size()) >= uint64(in.m.r.lim.MaxMemoryPages)*65536 {
		reason += fmt.Sprintf(" (memory at its limit of %d pages)", in.m.r.lim.MaxMemoryPages)
	}
	return &Error{Kind: KindTrap, Module: sha, Reason: reason, Err: err}
}

func (in *instance) close(ctx context.Context) {
	if in.mod != nil {
		_ = in.mod.Close(ctx)
	}
}

// walltime and nanotime are the guest's clocks: fixed at the start of every
// call and advancing 1 µs per reading, so a call sees the same times
// whatever ran before it.
func (in *instance) walltime() (int64, int32) {
	in.clock++
	t := fixedEpoch + in.clock*1000
	return t / 1e9, int32(t % 1e9)
}

func (in *instance) nanotime() int64 {
	in.clock++
	return in.clock * 1000
}

// fixedEpoch is the guest's wall clock at the start of every call:
// 2000-01-01T00:00:00Z.
const fixedEpoch = 946684800 * 1e9

// fixedRand is the guest's random_get: every read returns the same bytes,
// so output never depends on what an instance read before.
type fixedRand struct{}

func (fixedRand) Read(p []byte) (int, error) {
	x := uint64(0x9e3779b97f4a7c15)
	for i := range p {
		if i%8 == 0 {
			x += 0x9e3779b97f4a7c15
			z := x
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
			z = (z ^ (z >> 27)) * 0x94d049bb133111eb
			x = z ^ (z >> 31)
		}
		p[i] = byte(x >> (8 * (i % 8)))
	}
	return len(p), nil
}

func instanceFrom(ctx context.Context) *instance {
	in, _ := ctx.Value(instanceKey{}).(*instance)
	return in
}

// hostLog is rewind.log(ptr, len).
func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		return
	}
	ptr, n := uint32(stack[0]), uint32(stack[1])
	n = min(n, uint32(in.m.r.lim.MaxLogLineBytes+1))
	p, ok := mod.Memory().Read(ptr, n)
	if !ok {
		in.m.log.line("log", []byte("<rewind.log called with a range outside memory>"))
		return
	}
	in.note(p)
	in.m.log.line("log", p)
}

// hostAbort is AssemblyScript's env.abort(msg, file, line, column): a trap
// that says where.
func hostAbort(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	msg := asString(mod.Memory(), uint32(stack[0]))
	file := asString(mod.Memory(), uint32(stack[1]))
	what := fmt.Sprintf("abort: %q at %s:%d:%d", msg, file, uint32(stack[2]), uint32(stack[3]))
	if in != nil {
		in.abort = what
	}
	panic(errors.New(what))
}

// asString reads an AssemblyScript string (UTF-16, byte length at ptr-4),
// at most 256 characters; "" when the pointer is bad.
func asString(mem api.Memory, ptr uint32) string {
	if ptr < 4 || mem == nil {
		return ""
	}
	n, ok := mem.ReadUint32Le(ptr - 4)
	if !ok {
		return ""
	}
	n = min(n, 512) &^ 1
	p, ok := mem.Read(ptr, n)
	if !ok {
		return ""
	}
	u := make([]uint16, len(p)/2)
	for i := range u {
		u[i] = uint16(p[2*i]) | uint16(p[2*i+1])<<8
	}
	return string(utf16.Decode(u))
}
