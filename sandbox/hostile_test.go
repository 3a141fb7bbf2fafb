package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	. "github.com/rewind-io/rewind/internal/wasmgen"
	"github.com/rewind-io/rewind/sandbox"
)

// abiModule is a minimal hand-built ABI v1 module: one exported memory of
// two pages (input at 0, output at 64 KiB, 64 KiB each) and rewind_filter
// with the given body (locals 0 = count, 1 = len). extra, run first, may
// add to it.
func abiModule(filterBody []byte, extra func(m *Module)) []byte {
	return abiModulePages(2, filterBody, extra)
}

func abiModulePages(pages uint32, filterBody []byte, extra func(m *Module)) []byte {
	return ABIModule(pages, filterBody, extra)
}

// dropAll is a rewind_filter body that returns 0 bytes (drops everything).
var dropAll = Body(I32Const(0), OpEnd)

type hostile struct {
	name   string
	wasm   func(t *testing.T) []byte
	kind   sandbox.Kind
	reason string // a part of the error text
	atRun  bool   // refused when it runs, not at compile
}

func hostileModules() []hostile {
	as := func(name string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return asModule(t, name) }
	}
	gen := func(b []byte) func(t *testing.T) []byte { return func(*testing.T) []byte { return b } }
	return []hostile{
		// Refused at upload.
		{name: "garbage", wasm: gen([]byte("this is not a module at all")), kind: sandbox.KindInvalid, reason: "does not parse"},
		{name: "garbage after header", wasm: gen(append(Header(), 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3)), kind: sandbox.KindInvalid, reason: "does not parse"},
		{name: "empty", wasm: gen(nil), kind: sandbox.KindInvalid, reason: "does not parse"},
		{name: "huge module", wasm: gen(abiModule(dropAll, func(m *Module) { m.Custom("padding", make([]byte, 17<<20)) })), kind: sandbox.KindInvalid, reason: "over the limit"},
		{name: "table bomb (growable without maximum)", wasm: gen(abiModule(dropAll, func(m *Module) {
			tab := m.Table(FuncRef, 1, 0, false)
			grow := m.Type(nil, []ValType{I32})
			m.ExportFunc("grow", m.Func(grow, nil, Body(OpRefNull, FuncRef, I32Const(1<<30), FC(FCTableGrow), tab, OpEnd)))
		})), kind: sandbox.KindInvalid, reason: "must declare its maximum"},
		{name: "table bomb (declared)", wasm: gen(abiModule(dropAll, func(m *Module) { m.Table(FuncRef, 1<<28, 0, false) })), kind: sandbox.KindInvalid, reason: "over the limit"},
		{name: "memory bomb (declared)", wasm: gen(abiModulePages(1<<14, dropAll, nil)), kind: sandbox.KindInvalid, reason: "pages"},
		{name: "compile bomb (functions)", wasm: gen(abiModule(dropAll, func(m *Module) {
			void := m.Type(nil, nil)
			for range 100_001 {
				m.Func(void, nil, []byte{OpEnd})
			}
		})), kind: sandbox.KindInvalid, reason: "functions"},
		{name: "forbidden import (file)", wasm: as("pathopen"), kind: sandbox.KindInvalid, reason: "no filesystem"},
		{name: "forbidden import (socket)", wasm: as("socket"), kind: sandbox.KindInvalid, reason: "no network"},
		{name: "forbidden import (host function)", wasm: gen(abiModule(dropAll, func(m *Module) { m.ImportFunc("env", "system", m.Type(nil, nil)) })), kind: sandbox.KindInvalid, reason: "not allowed"},
		{name: "forbidden import (global)", wasm: gen(abiModule(dropAll, func(m *Module) { m.ImportGlobal("env", "secret", I64, false) })), kind: sandbox.KindInvalid, reason: "not allowed"},
		{name: "wrong ABI version", wasm: as("wrongabi"), kind: sandbox.KindInvalid, reason: "rewind_abi_v1"},
		{name: "no ABI", wasm: as("noabi"), kind: sandbox.KindInvalid, reason: "not a Rewind filter module"},
		// Refused when they run.
		{name: "infinite loop", wasm: as("loop"), kind: sandbox.KindFuel, reason: "ran out of fuel", atRun: true},
		{name: "slow filter", wasm: as("slow"), kind: sandbox.KindFuel, reason: "ran out of fuel", atRun: true},
		{name: "deep recursion", wasm: as("recursion"), kind: sandbox.KindTrap, reason: "stack", atRun: true},
		{name: "memory bomb (grown)", wasm: as("membomb"), kind: sandbox.KindTrap, reason: "membomb: memory exhausted", atRun: true},
		{name: "abort", wasm: as("abort"), kind: sandbox.KindTrap, reason: "hostile: abort in rewind_filter", atRun: true},
		{name: "output amplification", wasm: as("amplify"), kind: sandbox.KindLimit, reason: "outputs", atRun: true},
		{name: "output length past the buffer", wasm: as("bigoutput"), kind: sandbox.KindOutput, reason: "output buffer holds", atRun: true},
		{name: "output index out of range", wasm: as("badindex"), kind: sandbox.KindOutput, atRun: true},
		{name: "output out of order", wasm: as("outoforder"), kind: sandbox.KindOutput, atRun: true},
		{name: "unknown action", wasm: as("badaction"), kind: sandbox.KindOutput, atRun: true},
		{name: "guest failure", wasm: as("negative"), kind: sandbox.KindGuest, reason: "returned -1: (the module logged no reason)", atRun: true},
		{name: "init failure", wasm: as("initfail"), kind: sandbox.KindConfig, reason: "rewind_init returned 1: the module refused its config: ", atRun: true},
		{name: "bulk memory loop", wasm: gen(abiModule(Body(
			OpLoop, BlockEmpty,
			I32Const(0), I32Const(0), I32Const(131072), FC(FCMemoryFill), byte(0),
			OpBr, 0, OpEnd,
			I32Const(0), OpEnd), nil)), kind: sandbox.KindFuel, reason: "ran out of fuel", atRun: true},
	}
}

// TestHostile checks that each hostile module gets its specified error, and
// that the runtime keeps working afterwards.
func TestHostile(t *testing.T) {
	r := newRuntime(t, sandbox.Limits{FuelPerCall: 20_000_000})
	recs := corpus(64, 2)
	good := compile(t, r, goModule(t, "keyprefix"))
	for _, h := range hostileModules() {
		t.Run(h.name, func(t *testing.T) {
			m, err := r.Compile(context.Background(), h.wasm(t))
			if !h.atRun {
				if sandbox.KindOf(err) != h.kind || !strings.Contains(err.Error(), h.reason) {
					t.Fatalf("compile: %v; want %v containing %q", err, h.kind, h.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			defer m.Release()
			outs, err := m.NewFilter(nil).Run(context.Background(), batchOf(recs), nil)
			var e *sandbox.Error
			if !errors.As(err, &e) || e.Kind != h.kind || !strings.Contains(err.Error(), h.reason) {
				t.Fatalf("run: %v; want %v containing %q", err, h.kind, h.reason)
			}
			if e.Module != m.SHA256() || e.Index != 0 || len(outs) != 0 {
				t.Errorf("error names module %q at index %d with %d outputs; want %q, 0, 0", e.Module, e.Index, len(outs), m.SHA256())
			}
			// The runtime is healthy: a good filter still runs.
			outs, err = good.NewFilter([]byte(`{"prefix":"user-1"}`)).Run(context.Background(), batchOf(recs), nil)
			if err != nil || len(outs) == 0 {
				t.Fatalf("keyprefix after %s: %d outputs, %v", h.name, len(outs), err)
			}
		})
	}
}

// TestFailureIndex checks that a failure in a later call of one Run
// reports the first record of that call and returns the outputs before it.
func TestFailureIndex(t *testing.T) {
	r := newRuntime(t, sandbox.Limits{MaxRecordsPerCall: 10})
	// Keeps record 0 of each call; traps when the first record's offset is
	// 25 or more (offset is the u64 at input byte 4).
	body := Body(
		I32Const(4), OpI64Load, MemArg(3, 0), I64Const(25), byte(0x5a), // i64.ge_u
		OpIf, BlockEmpty, OpUnreachable, OpEnd,
		I32Const(65536), I32Const(0), OpI32Store, MemArg(2, 0),
		I32Const(65536), I32Const(0), OpI32Store8, MemArg(0, 4),
		I32Const(5), OpEnd)
	m := compile(t, r, abiModule(body, nil))
	recs := make([]rec, 35)
	for i := range recs {
		recs[i].offset = uint64(i)
	}
	outs, err := m.NewFilter(nil).Run(context.Background(), batchOf(recs), nil)
	var e *sandbox.Error
	if !errors.As(err, &e) || e.Kind != sandbox.KindTrap || e.Index != 30 {
		t.Fatalf("Run: %v; want a trap at index 30", err)
	}
	if got := normalize(outs); len(got) != 3 || got[0].Index != 0 || got[1].Index != 10 || got[2].Index != 20 {
		t.Errorf("outputs before the failure: %+v; want indexes 0, 10, 20", got)
	}
}

// TestLogFlood checks that guest log lines are rate-limited and truncated,
// and that the drops are reported.
func TestLogFlood(t *testing.T) {
	var buf syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	now := time.Unix(1_800_000_000, 0)
	r, err := sandbox.New(context.Background(), sandbox.Config{Logger: logger, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	m := compile(t, r, asModule(t, "logflood"))
	outs, err := m.NewFilter(nil).Run(context.Background(), batchOf(corpus(3, 3)), nil)
	if err != nil || len(outs) != 3 {
		t.Fatalf("logflood: %d outputs, %v; want 3 kept", len(outs), err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	lim := r.Limits()
	burst := 10 * lim.LogLinesPerSecond
	if len(lines) > burst+1 || len(lines) < burst {
		t.Errorf("%d log lines for 15000 guest lines; want the burst of %d (+1 drop report)", len(lines), burst)
	}
	for _, l := range lines {
		if len(l) > lim.MaxLogLineBytes+200 {
			t.Fatalf("a log line of %d bytes; guest lines are truncated to %d", len(l), lim.MaxLogLineBytes)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConcurrencyCap checks that guest calls beyond MaxConcurrentCalls
// wait, and that a waiting Run gives up with its context.
func TestConcurrencyCap(t *testing.T) {
	r := newRuntime(t, sandbox.Limits{MaxConcurrentCalls: 1})
	// rewind_filter spins until the word at input byte 60000 is non-zero
	// (never: fuel is what ends it), so it holds the only slot a while.
	spin := Body(OpLoop, BlockEmpty, I32Const(60000), OpI32Load, MemArg(2, 0), OpI32Eqz, OpBrIf, 0, OpEnd, I32Const(0), OpEnd)
	m := compile(t, r, abiModule(spin, nil))
	good := compile(t, r, goModule(t, "keyprefix"))
	done := make(chan error, 1)
	go func() {
		_, err := m.NewFilter(nil).Run(context.Background(), batchOf(corpus(1, 4)), nil)
		done <- err
	}()
	// Whether the spinning call holds the slot yet or not, a Run with an
	// expired context never runs the guest.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := good.NewFilter([]byte(`{"prefix":""}`)).Run(ctx, batchOf(corpus(1, 5)), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context: %v", err)
	}
	// A Run that waits gets the slot once the spinner is stopped by fuel.
	outs, err := good.NewFilter([]byte(`{"prefix":""}`)).Run(context.Background(), batchOf(corpus(1, 5)), nil)
	if err != nil || len(outs) != 1 {
		t.Fatalf("Run after waiting: %d outputs, %v", len(outs), err)
	}
	if err := <-done; sandbox.KindOf(err) != sandbox.KindFuel {
		t.Fatalf("spinner: %v, want out of fuel", err)
	}
}

// TestRandomOutputs feeds modules that write random output bytes:
// every result is an error or a valid decode, never a panic.
func TestRandomOutputs(t *testing.T) {
	r := newRuntime(t, sandbox.Limits{})
	rnd := rand.New(rand.NewPCG(9, 9))
	for i := range 200 {
		out := make([]byte, rnd.IntN(64))
		for j := range out {
			out[j] = byte(rnd.IntN(4)) // small values: plausible indexes, actions and lengths
		}
		body := Body(I32Const(int32(len(out))), OpEnd)
		wasm := abiModule(body, func(m *Module) { m.Data(0, 65536, out) })
		mod, err := r.Compile(context.Background(), wasm)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		_, err = mod.NewFilter(nil).Run(context.Background(), batchOf(corpus(3, uint64(i))), nil)
		if err != nil && sandbox.KindOf(err) == 0 {
			t.Fatalf("%d: error without a kind: %v", i, err)
		}
		mod.Release()
	}
}
