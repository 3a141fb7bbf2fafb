package meter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

var ctx = context.Background()

// ample is the fuel the tests give a call that should not run out.
const ample = int64(1) << 40

func newRuntime(tb testing.TB, features api.CoreFeatures) wazero.Runtime {
	tb.Helper()
	cfg := wazero.NewRuntimeConfig()
	if features != 0 {
		cfg = cfg.WithCoreFeatures(features)
	}
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	tb.Cleanup(func() { _ = r.Close(ctx) })
	return r
}

func instantiate(tb testing.TB, r wazero.Runtime, wasm []byte, name string) api.Module {
	tb.Helper()
	mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(name))
	if err != nil {
		tb.Fatalf("instantiate %s: %v", name, err)
	}
	return mod
}

func fuelOf(tb testing.TB, mod api.Module) api.MutableGlobal {
	tb.Helper()
	g, ok := mod.ExportedGlobal(FuelExport).(api.MutableGlobal)
	if !ok {
		tb.Fatalf("%s: no mutable global %q", mod.Name(), FuelExport)
	}
	if g.Type() != api.ValueTypeI64 {
		tb.Fatalf("%s has type %v, want i64", FuelExport, g.Type())
	}
	return g
}

func mustInstrument(tb testing.TB, wasm []byte, opts Options) []byte {
	tb.Helper()
	out, err := InstrumentWithOptions(wasm, opts)
	if err != nil {
		tb.Fatalf("Instrument: %v", err)
	}
	return out
}

// metered instantiates the instrumented module in a fresh runtime.
func metered(tb testing.TB, wasm []byte, features api.CoreFeatures) (api.Module, api.MutableGlobal) {
	tb.Helper()
	mod := instantiate(tb, newRuntime(tb, features), mustInstrument(tb, wasm, Options{}), "metered")
	return mod, fuelOf(tb, mod)
}

// spend calls fn with the given fuel and returns the results, the fuel left
// and the error.
func spend(tb testing.TB, mod api.Module, fuel api.MutableGlobal, budget int64, fn string, a ...uint64) ([]uint64, int64, error) {
	tb.Helper()
	f := mod.ExportedFunction(fn)
	if f == nil {
		tb.Fatalf("no function %q", fn)
	}
	fuel.Set(uint64(budget))
	res, err := f.Call(ctx, a...)
	return res, int64(fuel.Get()), err
}

// TestEquivalence runs every hand-built module and its instrumented copy on
// the same calls, with ample fuel, and compares the results.
func TestEquivalence(t *testing.T) {
	for _, tm := range testModules() {
		t.Run(tm.name, func(t *testing.T) {
			out := mustInstrument(t, tm.wasm, tm.opts)
			var mods [2]api.Module
			for i, bin := range [][]byte{tm.wasm, out} {
				r := newRuntime(t, tm.features)
				if tm.env {
					instantiate(t, r, envModule(), "env")
				}
				mods[i] = instantiate(t, r, bin, fmt.Sprint("m", i))
			}
			fuel := fuelOf(t, mods[1])
			if mods[0].ExportedGlobal(FuelExport) != nil {
				t.Fatal("the original exports the fuel global")
			}
			for _, c := range tm.calls {
				want, wantErr := mods[0].ExportedFunction(c.fn).Call(ctx, c.args...)
				if (wantErr != nil) != c.traps {
					t.Fatalf("original %s%v: err = %v, want trap %v", c.fn, c.args, wantErr, c.traps)
				}
				got, left, gotErr := spend(t, mods[1], fuel, ample, c.fn, c.args...)
				if (gotErr != nil) != (wantErr != nil) {
					t.Fatalf("%s%v: metered err = %v, original err = %v", c.fn, c.args, gotErr, wantErr)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s%v: results differ (-original +metered):\n%s", c.fn, c.args, diff)
				}
				// After a trap that is not fuel's, the global holds what
				// the last store left: not negative, at most the budget.
				if left < 0 || left > ample || (gotErr == nil && left == ample) {
					t.Errorf("%s%v: fuel left %d, want in [0, %d)", c.fn, c.args, left, ample)
				}
				t.Logf("%s%v = %v (err %v), %d fuel", c.fn, c.args, got, gotErr, ample-left)
			}
		})
	}
}

// TestFuelCounts checks the exact fuel the scheme implies: one unit per
// function entry plus one per entry into a loop body (every iteration,
// including the first).
func TestFuelCounts(t *testing.T) {
	loops, fuel := metered(t, loopsModule(), 0)
	mv, mvFuel := metered(t, multiValueModule(), 0)
	tc, tcFuel := metered(t, tailCallModule(), allFeatures)
	for _, c := range []struct {
		mod  api.Module
		fuel api.MutableGlobal
		fn   string
		args []uint64
		want int64
	}{
		{loops, fuel, "count", args(0), 1},       // the loop is skipped
		{loops, fuel, "count", args(1), 1 + 1},   // entry + one iteration
		{loops, fuel, "count", args(1000), 1001}, // entry + 1000 iterations
		{loops, fuel, "depth", args(0), 1},
		{loops, fuel, "depth", args(50), 51},            // one unit per call
		{loops, fuel, "nested", args(3, 4), 1 + 3 + 12}, // entry + outer + inner iterations
		{mv, mvFuel, "sum", args(0), 2},
		{mv, mvFuel, "sum", args(10), 11},
		{mv, mvFuel, "swap", args(1, 2), 1},
		{tc, tcFuel, "tc", args(100000, 0), 100001}, // return_call enters the callee
		{tc, tcFuel, "tci", args(10, 0), 1 + 11},
	} {
		_, left, err := spend(t, c.mod, c.fuel, ample, c.fn, c.args...)
		if err != nil {
			t.Fatalf("%s%v: %v", c.fn, c.args, err)
		}
		if got := ample - left; got != c.want {
			t.Errorf("%s%v used %d fuel, want %d", c.fn, c.args, got, c.want)
		}
	}

	// An exact budget is enough; one unit less traps, leaving -1.
	if res, left, err := spend(t, loops, fuel, 11, "count", 10); err != nil || left != 0 || res[0] != 10 {
		t.Errorf("count(10) with 11 fuel = %v, %v, %d left; want 10, nil, 0", res, err, left)
	}
	if _, left, err := spend(t, loops, fuel, 10, "count", 10); err == nil || left != -1 {
		t.Errorf("count(10) with 10 fuel: err %v, %d left; want a trap and -1", err, left)
	}
	const n = 5000
	if res, left, err := spend(t, loops, fuel, n+1, "depth", n); err != nil || left != 0 || res[0] != n {
		t.Errorf("depth(%d) with %d fuel = %v, %v, %d left", n, n+1, res, err, left)
	}
	if _, left, err := spend(t, loops, fuel, n, "depth", n); err == nil || left != -1 {
		t.Errorf("depth(%d) with %d fuel: err %v, %d left; want a trap and -1", n, n, err, left)
	}
	// With no fuel at all, even the entry check traps.
	if _, left, err := spend(t, loops, fuel, 0, "depth", 0); err == nil || left != -1 {
		t.Errorf("depth(0) with 0 fuel: err %v, %d left", err, left)
	}
}

// TestEndlessLoop checks that a loop that never ends traps once the fuel is
// spent, that the fuel reads negative, and that the instance stays usable.
func TestEndlessLoop(t *testing.T) {
	mod, fuel := metered(t, loopsModule(), 0)
	for _, budget := range []int64{0, 1, 2, 1000, 50_000_000} {
		_, left, err := spend(t, mod, fuel, budget, "spin")
		if err == nil {
			t.Fatalf("spin with %d fuel returned", budget)
		}
		if !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("spin: error %q is not the unreachable trap", err)
		}
		if left != -1 {
			t.Errorf("spin with %d fuel left %d, want -1", budget, left)
		}
	}
	if res, _, err := spend(t, mod, fuel, ample, "count", 7); err != nil || res[0] != 7 {
		t.Errorf("count(7) after the traps = %v, %v", res, err)
	}
}

// TestOtherTraps checks that a trap that is not fuel exhaustion leaves the
// fuel non-negative, so the host can tell the two apart.
func TestOtherTraps(t *testing.T) {
	ctl, fuel := metered(t, controlModule(), 0)
	// The function keeps its fuel in a local and stores it at calls,
	// returns and fuel traps, so after another trap the global holds the
	// value of the last store: here, the budget.
	if _, left, err := spend(t, ctl, fuel, 1000, "trap", 99); err == nil || left != 1000 {
		t.Errorf("trap(99): err %v, %d fuel left; want a trap and 1000", err, left)
	}
	mem, mfuel := metered(t, memoryModule(), 0)
	if _, left, err := spend(t, mem, mfuel, 1000, "oob"); err == nil || left != 1000 {
		t.Errorf("oob: err %v, %d fuel left; want a trap and 1000", err, left)
	}
}

// TestGlobalsAndStart checks that imported and defined globals keep their
// indexes and values, and that the start function runs on the initial fuel.
func TestGlobalsAndStart(t *testing.T) {
	wasm := globalsModule()

	// With the default initial fuel of 0 the start function traps.
	r := newRuntime(t, 0)
	instantiate(t, r, envModule(), "env")
	if _, err := r.Instantiate(ctx, mustInstrument(t, wasm, Options{})); err == nil {
		t.Fatal("a start function with no fuel did not trap")
	}

	r = newRuntime(t, 0)
	env := instantiate(t, r, envModule(), "env")
	mod := instantiate(t, r, mustInstrument(t, wasm, Options{InitialFuel: 100}), "m")
	fuel := fuelOf(t, mod)
	check := func(when string, wantG3 float64, wantG4, wantGi64 uint64, wantFuel int64) {
		t.Helper()
		if got := api.DecodeF64(mod.ExportedGlobal("g3").Get()); got != wantG3 {
			t.Errorf("%s: g3 = %v, want %v", when, got, wantG3)
		}
		if got := mod.ExportedGlobal("g4").Get(); got != wantG4 {
			t.Errorf("%s: g4 = %v, want %v", when, got, wantG4)
		}
		if got := env.ExportedGlobal("gi64").Get(); got != wantGi64 {
			t.Errorf("%s: env.gi64 = %v, want %v", when, got, wantGi64)
		}
		if got := int64(fuel.Get()); got != wantFuel {
			t.Errorf("%s: fuel = %d, want %d", when, got, wantFuel)
		}
	}
	check("after start", 0.5, 42, 101, 99)
	// read and twice (an imported function, itself not metered) cost 1.
	if res, left, err := spend(t, mod, fuel, 10, "read"); err != nil || res[0] != 5+101+5+0+42+2 || left != 9 {
		t.Errorf("read = %v, %v, %d left", res, err, left)
	}
	if _, _, err := spend(t, mod, fuel, 10, "bump", api.EncodeF64(2.25)); err != nil {
		t.Fatal(err)
	}
	check("after bump", 2.75, 43, 102, 9)
	if res, _, _ := spend(t, mod, fuel, 10, "read"); res[0] != 5+102+5+2+43+2 {
		t.Errorf("read after bump = %v", res)
	}
}

// TestInjectedCode pins the exact bytes of an instrumented function: the
// fuel local (index 1: after the declared i32) loaded on entry, checked at
// entry and at each loop body, stored before the final end.
func TestInjectedCode(t *testing.T) {
	for _, imported := range []int{0, 2} {
		m := newMod()
		for i := range imported {
			m.importGlobal("env", fmt.Sprint("g", i), tI32, false)
		}
		m.global(tI64, true, i64c(5))
		m.global(tF32, false, f32c(1))
		m.global(tI32, false, i32c(1))
		v := m.typ(nil, nil)
		m.fn(v, op(tI32), loop(tVoid), block(tVoid), loop(tI32), i32c(3), end_, op(0x1a), end_, end_)
		out := mustInstrument(t, m.encode(), Options{})
		idx := byte(imported + 3)
		check := []byte{
			0x20, 1, // local.get $l
			0x42, 1, // i64.const 1
			0x7d,    // i64.sub
			0x22, 1, // local.tee $l
			0x42, 0, // i64.const 0
			0x53,       // i64.lt_s
			0x04, 0x40, // if
			0x20, 1, 0x24, idx, // local.get $l, global.set $fuel
			0x00, // unreachable
			0x0b, // end
		}
		wantBody := cat(
			op(2, 1, tI32, 1, tI64), // locals: the declared one and the fuel
			op(0x23, idx, 0x21, 1),  // global.get $fuel, local.set $l
			check,
			op(0x03, 0x40), check,
			op(0x02, 0x40),
			op(0x03, 0x7f), check,
			op(0x41, 3, 0x0b, 0x1a, 0x0b, 0x0b),
			op(0x20, 1, 0x24, idx), // the store before the final end
			op(0x0b))
		secs := splitSections(t, out)
		code := secs[len(secs)-1]
		if code.id != secCode {
			t.Fatalf("last section is %d, want code", code.id)
		}
		wantCode := cat(u(1), u(uint32(len(wantBody))), wantBody)
		if diff := cmp.Diff(wantCode, code.content); diff != "" {
			t.Errorf("%d imported globals: code section (-want +got):\n%s", imported, diff)
		}
		var glob, exp []byte
		for _, s := range secs {
			switch s.id {
			case secGlobal:
				glob = s.content
			case secExport:
				exp = s.content
			}
		}
		wantGlobals := cat(u(5), op(tI64, 1), i64c(5), end_, op(tF32, 0), f32c(1), end_, op(tI32, 0), i32c(1), end_,
			op(tI64, 1, 0x42, 0x00, 0x0b), op(tI32, 1, 0x41, 0x00, 0x0b))
		if diff := cmp.Diff(wantGlobals, glob); diff != "" {
			t.Errorf("global section (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(cat(u(1), str(FuelExport), op(0x03, idx)), exp); diff != "" {
			t.Errorf("export section (-want +got):\n%s", diff)
		}
		if _, err := newRuntime(t, 0).CompileModule(ctx, out); err != nil {
			t.Errorf("compile: %v", err)
		}
	}
}

type rawSection struct {
	id      byte
	name    string // of a custom section
	content []byte
}

// splitSections splits a module into its sections (a minimal independent
// reader for the tests).
func splitSections(tb testing.TB, wasm []byte) []rawSection {
	tb.Helper()
	var out []rawSection
	r := reader{buf: wasm, pos: 8, end: len(wasm)}
	for r.pos < r.end {
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil || int(size) > r.remaining() {
			tb.Fatalf("bad section header at %d", r.pos)
		}
		s := rawSection{id: id, content: wasm[r.pos : r.pos+int(size)]}
		if id == 0 {
			cr := reader{buf: s.content, end: len(s.content)}
			name, _ := cr.name("name")
			s.name = string(name)
		}
		out = append(out, s)
		r.pos += int(size)
	}
	return out
}

// TestSectionsPreserved checks that every section other than global, export
// and code is kept byte for byte, in order, except DWARF.
func TestSectionsPreserved(t *testing.T) {
	mods := testModules()
	m := newMod()
	v := m.typ(nil, nil)
	m.exportFn("f", m.fn(v, nil))
	m.custom("name", cat(op(1), u(uint32(len(cat(u(1), u(0), str("the_f"))))), u(1), u(0), str("the_f")))
	m.custom(".debug_info", []byte("stale"))
	m.custom("producers", []byte{0})
	mods = append(mods, testModule{name: "custom", wasm: m.encode()})
	for _, tm := range mods {
		t.Run(tm.name, func(t *testing.T) {
			out := mustInstrument(t, tm.wasm, Options{})
			keep := func(wasm []byte) (kept []rawSection) {
				for _, s := range splitSections(t, wasm) {
					if s.id != secGlobal && s.id != secExport && s.id != secCode && !strings.HasPrefix(s.name, ".debug_") {
						kept = append(kept, s)
					}
				}
				return kept
			}
			if diff := cmp.Diff(keep(tm.wasm), keep(out), cmp.AllowUnexported(rawSection{})); diff != "" {
				t.Errorf("sections changed (-in +out):\n%s", diff)
			}
			for _, s := range splitSections(t, out) {
				if strings.HasPrefix(s.name, ".debug_") {
					t.Errorf("DWARF section %q kept", s.name)
				}
			}
		})
	}
	// The name section still names the right function.
	cm, err := newRuntime(t, 0).CompileModule(ctx, mustInstrument(t, m.encode(), Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.ExportedFunctions()["f"].Name(); got != "the_f" {
		t.Errorf("function name %q, want the_f", got)
	}
}

// TestMissingSections instruments modules without global, export or code
// sections.
func TestMissingSections(t *testing.T) {
	onlyCode := newMod()
	onlyCode.fn(onlyCode.typ(nil, nil), nil, loop(tVoid), end_)
	withStart := newMod()
	withStart.start = int(withStart.fn(withStart.typ(nil, nil), nil, loop(tVoid), end_))
	withStart.datas = append(withStart.datas, cat(u(1), str("x")))
	custom := newMod()
	custom.custom("a", []byte{1})
	for name, wasm := range map[string][]byte{
		"empty":     []byte("\x00asm\x01\x00\x00\x00"),
		"only code": onlyCode.encode(),
		"start":     withStart.encode(),
		"custom":    custom.encode(),
	} {
		out, err := InstrumentWithOptions(wasm, Options{InitialFuel: 7})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mod := instantiate(t, newRuntime(t, 0), out, name)
		want := int64(7)
		if name == "start" {
			want = 5 // the entry and one loop iteration
		}
		if got := int64(fuelOf(t, mod).Get()); got != want {
			t.Errorf("%s: fuel %d, want %d", name, got, want)
		}
	}
}

// TestTrailingEmptyCustomSection: wazero rejects a module whose last section
// is a custom section with an empty payload (it reads the payload at EOF),
// and accepts the same section anywhere else; the instrumented module must
// keep that section last. (Found by FuzzInstrument.)
func TestTrailingEmptyCustomSection(t *testing.T) {
	emptyAtEnd := rawModule(sec(0, str("000000000")))
	dwarfAtEnd := newMod()
	dwarfAtEnd.exportFn("f", dwarfAtEnd.fn(dwarfAtEnd.typ(nil, nil), nil))
	dwarfAtEnd.custom("x", nil)
	dwarfAtEnd.custom(".debug_line", []byte{1, 2, 3})
	atEnd := dwarfAtEnd.encode()
	dwarfAtEnd.custom("y", []byte{1})
	for _, in := range [][]byte{emptyAtEnd, atEnd, dwarfAtEnd.encode()} {
		checkProperty(t, in)
		out := mustInstrument(t, in, Options{})
		inSecs, outSecs := splitSections(t, in), splitSections(t, out)
		if diff := cmp.Diff(inSecs[len(inSecs)-1], outSecs[len(outSecs)-1], cmp.AllowUnexported(rawSection{})); diff != "" {
			t.Errorf("last section changed (-in +out):\n%s", diff)
		}
	}
}

// TestInitialFuel checks the encoding of extreme initial values.
func TestInitialFuel(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, math.MaxInt64, math.MinInt64} {
		mod := instantiate(t, newRuntime(t, 0), mustInstrument(t, envModule(), Options{InitialFuel: v}), "m")
		if got := int64(fuelOf(t, mod).Get()); got != v {
			t.Errorf("initial fuel %d reads %d", v, got)
		}
	}
}

// rawModule builds a module from raw sections (id, content).
func rawModule(secs ...[]byte) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range secs {
		out = append(out, s[0])
		out = append(out, u(uint32(len(s)-1))...)
		out = append(out, s[1:]...)
	}
	return out
}

func sec(id byte, content ...[]byte) []byte { return cat(op(id), cat(content...)) }

// withBody is a module with one function () -> () of the given body (locals
// included, final end not added).
func withBody(body ...[]byte) []byte {
	b := cat(body...)
	return rawModule(sec(1, u(1), op(0x60, 0, 0)), sec(3, u(1), u(0)), sec(10, u(1), u(uint32(len(b))), b))
}

// TestErrors checks that bad and unsupported input gives the right error.
func TestErrors(t *testing.T) {
	var format *FormatError
	var unsup *UnsupportedError
	valid := loopsModule()
	instrumented := mustInstrument(t, valid, Options{})
	mem := sec(5, u(1), op(0, 1))
	for _, c := range []struct {
		name string
		in   []byte
		want any // *FormatError, *UnsupportedError or ErrFuelExportExists
	}{
		{"nil", nil, format},
		{"magic only", []byte("\x00asm"), format},
		{"bad magic", []byte("\x00wasm\x01\x00\x00"), format},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), format},
		{"component", []byte("\x00asm\x0d\x00\x01\x00"), format},
		{"garbage", []byte("hello, world, this is not wasm"), format},
		{"unknown section", rawModule(sec(14, u(0))), format},
		{"section past the end", append([]byte("\x00asm\x01\x00\x00\x00"), 1, 10, 0), format},
		{"section size LEB too long", append([]byte("\x00asm\x01\x00\x00\x00"), 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), format},
		{"section left over", rawModule(sec(1, u(0), op(0))), format},
		{"out of order", rawModule(sec(3, u(0)), sec(1, u(0))), format},
		{"repeated", rawModule(sec(1, u(0)), sec(1, u(0))), format},
		{"datacount after code", rawModule(sec(10, u(0)), sec(12, u(0))), format},
		{"huge import count", rawModule(sec(2, u(math.MaxUint32))), format},
		{"huge type count", rawModule(sec(1, u(math.MaxUint32))), format},
		{"huge param count", rawModule(sec(1, u(1), op(0x60), u(math.MaxUint32))), format},
		{"huge code count", rawModule(sec(10, u(math.MaxUint32))), format},
		{"huge body size", rawModule(sec(1, u(1), op(0x60, 0, 0)), sec(3, u(1), u(0)), sec(10, u(1), u(math.MaxUint32))), format},
		{"huge data length", rawModule(mem, sec(11, u(1), u(0), i32c(0), end_, u(math.MaxUint32))), format},
		{"huge name count", rawModule(sec(0, str("name"), op(1, 5), u(math.MaxUint32))), format},
		{"second name section", rawModule(sec(0, str("name")), sec(0, str("name"))), format},
		{"bad custom name", rawModule(sec(0, op(2, 0xff, 0xfe))), format},
		{"functions without bodies", rawModule(sec(1, u(1), op(0x60, 0, 0)), sec(3, u(1), u(0))), format},
		{"bodies without functions", rawModule(sec(10, u(1), u(2), op(0, 0x0b))), format},
		{"no end", withBody(op(0), op(0x01)), format},
		{"bytes after end", withBody(op(0), end_, op(0x01)), format},
		{"unclosed block", withBody(op(0), block(tVoid), end_), format},
		{"unknown opcode", withBody(op(0), op(0x27), end_), format},
		{"truncated i32.const", withBody(op(0), op(0x41, 0x80)), format},
		{"i32.const overflow", withBody(op(0), op(0x41, 0xff, 0xff, 0xff, 0xff, 0x0f), op(0x1a), end_), format},
		{"i64.const too long", withBody(op(0), op(0x42), bytes.Repeat([]byte{0x80}, 10), op(0), op(0x1a), end_), format},
		{"bad local type", withBody(op(1, 1, 0x55), end_), format},
		{"huge br_table", withBody(op(0), op(0x0e), u(math.MaxUint32), end_), format},
		{"truncated v128.const", withBody(op(0), simd(0x0c, 1, 2, 3)), format},
		{"unknown SIMD opcode", withBody(op(0), simd(0x9a), end_), format},
		{"too many locals", withBody(u(2), u(MaxLocals), op(tI32), u(1), op(tI64), end_), unsup},
		{"four billion locals", withBody(u(1), u(math.MaxUint32), op(tI32), end_), unsup},
		{"legacy try", withBody(op(0), op(0x06, 0x40), end_, end_), unsup},
		{"legacy catch_all", withBody(op(0), op(0x19), end_), unsup},
		{"multi-memory memarg", withBody(op(0), i32c(0), op(0x28, 0x42, 0, 0), op(0x1a), end_), unsup},
		{"memory.size of memory 1", withBody(op(0), op(0x3f, 1), op(0x1a), end_), unsup},
		{"two memories", rawModule(sec(5, u(2), op(0, 1), op(0, 1))), unsup},
		{"memory64", rawModule(sec(5, u(1), op(0x04, 1))), unsup},
		{"relaxed SIMD", withBody(op(0), simd(0x100), end_), unsup},
		{"non-canonical SIMD opcode", withBody(op(0), op(0xfd, 0x8c, 0x00), end_), unsup},
		{"atomic wait", withBody(op(0), i32c(0), i32c(0), i64c(-1), op(0xfe, 0x01, 2, 0), op(0x1a), end_), unsup},
		{"unknown misc opcode", withBody(op(0), misc(18), end_), unsup},
		{"GC type", rawModule(sec(1, u(1), op(0x5f, 0))), unsup},
		{"GC instruction", withBody(op(0), op(0xfb, 0), end_), unsup},
		{"exports rewind_fuel", rawModule(sec(7, u(1), str(FuelExport), op(0, 0))), ErrFuelExportExists},
		{"instrumented twice", instrumented, ErrFuelExportExists},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := Instrument(c.in)
			if err == nil {
				t.Fatalf("no error (output %d bytes)", len(out))
			}
			if out != nil {
				t.Errorf("output with error %v", err)
			}
			switch c.want.(type) {
			case *FormatError:
				if !errors.As(err, &format) {
					t.Errorf("error %v (%T), want a FormatError", err, err)
				}
			case *UnsupportedError:
				if !errors.As(err, &unsup) {
					t.Errorf("error %v (%T), want an UnsupportedError", err, err)
				}
			default:
				if !errors.Is(err, ErrFuelExportExists) {
					t.Errorf("error %v, want ErrFuelExportExists", err)
				}
			}
			t.Log(err)
		})
	}
}

// TestBoundedAllocation checks that absurd declared counts and sizes fail
// without allocating in proportion to them.
func TestBoundedAllocation(t *testing.T) {
	for _, in := range [][]byte{
		rawModule(sec(2, u(math.MaxUint32))),
		rawModule(sec(10, u(math.MaxUint32))),
		rawModule(sec(1, u(1), op(0x60), u(math.MaxUint32))),
		withBody(u(1), u(math.MaxUint32), op(tI32), end_),
		withBody(u(math.MaxUint32), u(1), op(tI32), end_),
		rawModule(sec(0, str("name"), op(2, 5), u(math.MaxUint32))),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Instrument(in)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("% x: no error", in)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("% x: allocated %d bytes", in, n)
		}
	}
}

// acceptance compiles modules with wazero, with its default features and
// with everything enabled.
type acceptance struct {
	once sync.Once
	rts  []wazero.Runtime
}

var accept acceptance

func (a *acceptance) runtimes() []wazero.Runtime {
	a.once.Do(func() {
		a.rts = []wazero.Runtime{
			wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig()),
			wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(allFeatures)),
		}
	})
	return a.rts
}

// Outcomes of compiling a module.
const (
	compiled = "compiled"
	rejected = "rejected"
	panicked = "wazero panicked"
)

// compiles reports, for each runtime, whether wazero compiles wasm. A panic
// in wazero (a wazero bug) is an outcome of its own.
func (a *acceptance) compiles(wasm []byte) (outcomes []string, errs []error) {
	for _, r := range a.runtimes() {
		outcome, err := func() (outcome string, err error) {
			defer func() {
				if p := recover(); p != nil {
					outcome, err = panicked, fmt.Errorf("panic: %v", p)
				}
			}()
			cm, err := r.CompileModule(ctx, wasm)
			if err != nil {
				return rejected, err
			}
			_ = cm.Close(ctx)
			return compiled, nil
		}()
		outcomes, errs = append(outcomes, outcome), append(errs, err)
	}
	return outcomes, errs
}

// checkProperty is the property the fuzz target checks: Instrument never
// panics, fails only with its documented errors, and when it succeeds wazero
// accepts the output exactly when it accepts the input, and the output is
// recognised as instrumented.
func checkProperty(t *testing.T, in []byte) {
	t.Helper()
	out, err := Instrument(in)
	if err != nil {
		var format *FormatError
		var unsup *UnsupportedError
		if !errors.As(err, &format) && !errors.As(err, &unsup) && !errors.Is(err, ErrFuelExportExists) {
			t.Fatalf("undocumented error %T: %v", err, err)
		}
		return
	}
	if _, err := Instrument(out); !errors.Is(err, ErrFuelExportExists) {
		t.Fatalf("re-instrumenting the output: %v, want ErrFuelExportExists", err)
	}
	inOK, inErrs := accept.compiles(in)
	outOK, outErrs := accept.compiles(out)
	for _, o := range inOK {
		if o == panicked {
			t.Logf("wazero panics on an input Instrument accepts: %v\ninput: %x", inErrs, in)
		}
	}
	if diff := cmp.Diff(inOK, outOK); diff != "" {
		t.Fatalf("wazero acceptance differs (-input +output):\n%s\ninput errors: %v\noutput errors: %v\ninput: %x", diff, inErrs, outErrs, in)
	}
	if outOK[len(outOK)-1] == compiled {
		checkTerminates(t, in)
	}
}

// execRuntime runs instrumented fuzz inputs: every feature, small memories,
// and close-on-context-done as a safety net that tells a call stopped by
// its deadline (a loop the meter missed) from one stopped by the fuel.
var execRuntime = sync.OnceValue(func() wazero.Runtime {
	return wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(allFeatures).
		WithMemoryLimitPages(64).WithCloseOnContextDone(true))
})

// checkTerminates instantiates the instrumented module (when it has no
// imports) and calls each of its exported functions with zero arguments and
// a small budget: every call, and the start function, must end by itself.
func checkTerminates(t *testing.T, in []byte) {
	t.Helper()
	const budget = 20000
	out, err := InstrumentWithOptions(in, Options{InitialFuel: budget})
	if err != nil {
		t.Fatalf("InitialFuel changes the outcome: %v", err)
	}
	r := execRuntime()
	cm, err := r.CompileModule(ctx, out)
	if err != nil {
		return // e.g. a memory above the limit
	}
	defer cm.Close(ctx)
	if len(cm.ImportedFunctions()) > 0 || len(cm.ImportedMemories()) > 0 || hasImports(in) {
		return
	}
	// A hang detector, not a budget: the calls take microseconds of fuel,
	// and a loaded machine must not turn slowness into a failure.
	c, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	mod, err := r.InstantiateModule(c, cm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if c.Err() != nil {
		t.Fatalf("the start function did not stop with %d fuel: %v\ninput: %x", budget, err, in)
	}
	if err != nil {
		return
	}
	defer mod.Close(ctx)
	fuel := mod.ExportedGlobal(FuelExport).(api.MutableGlobal)
	names := make([]string, 0, len(cm.ExportedFunctions()))
	for name := range cm.ExportedFunctions() {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names[:min(len(names), 8)] {
		fuel.Set(budget)
		params := make([]uint64, len(cm.ExportedFunctions()[name].ParamTypes()))
		_, err := mod.ExportedFunction(name).Call(c, params...)
		if c.Err() != nil {
			t.Fatalf("%s did not stop with %d fuel: %v\ninput: %x", name, budget, err, in)
		}
	}
}

// hasImports reports whether the module has an import section with entries.
func hasImports(wasm []byte) bool {
	r := reader{buf: wasm, pos: 8, end: len(wasm)}
	for r.pos < r.end {
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil || int(size) > r.remaining() {
			return false
		}
		if id == secImport {
			n, _ := (&reader{buf: wasm, pos: r.pos, end: r.pos + int(size)}).u32()
			return n > 0
		}
		r.pos += int(size)
	}
	return false
}

// TestTruncated cuts every test module at every length: a cut inside a
// section must fail; a cut between sections may give a smaller valid module,
// for which the property must hold.
func TestTruncated(t *testing.T) {
	for _, tm := range testModules() {
		boundaries := map[int]bool{8: true}
		pos := 8
		for _, s := range splitSections(t, tm.wasm) {
			pos += 1 + len(u(uint32(len(s.content)))) + len(s.content)
			boundaries[pos] = true
		}
		for n := range len(tm.wasm) {
			in := tm.wasm[:n]
			if !boundaries[n] {
				if _, err := Instrument(in); err == nil {
					t.Errorf("%s cut at %d/%d: no error", tm.name, n, len(tm.wasm))
				}
				continue
			}
			checkProperty(t, in)
		}
	}
}

// TestMutations flips bytes of the test modules one at a time and checks the
// property on each (a deterministic fuzz that runs with the unit tests).
func TestMutations(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	tried, ok := 0, 0
	for _, tm := range testModules() {
		for i := 8; i < len(tm.wasm); i++ {
			for _, b := range []byte{0x00, 0x01, 0x03, 0x0b, 0x40, 0x7f, 0x80, 0xff, tm.wasm[i] ^ 0x01} {
				if b == tm.wasm[i] {
					continue
				}
				in := bytes.Clone(tm.wasm)
				in[i] = b
				tried++
				if _, err := Instrument(in); err == nil {
					ok++
				}
				checkProperty(t, in)
			}
		}
	}
	t.Logf("%d mutants, %d instrumented", tried, ok)
}

// TestConcurrent instruments in parallel (for -race).
func TestConcurrent(t *testing.T) {
	mods := testModules()
	var wg sync.WaitGroup
	results := make([][]byte, len(mods))
	for i := range mods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = Instrument(mods[i].wasm)
		}()
	}
	wg.Wait()
	for i, tm := range mods {
		if want := mustInstrument(t, tm.wasm, Options{}); !bytes.Equal(want, results[i]) {
			t.Errorf("%s: concurrent result differs", tm.name)
		}
	}
}

// TestErrorMessages checks that the errors name an offset and are readable.
func TestErrorMessages(t *testing.T) {
	_, err := Instrument(withBody(op(0), op(0x06, 0x40), end_, end_))
	var unsup *UnsupportedError
	if !errors.As(err, &unsup) || unsup.Offset != 23 || !strings.Contains(err.Error(), "legacy exception handling") {
		t.Errorf("legacy try: %v (offset %+v)", err, unsup)
	}
	_, err = Instrument([]byte("\x00asm\x01\x00\x00\x00\x01\x05"))
	var format *FormatError
	if !errors.As(err, &format) || format.Offset != 10 {
		t.Errorf("short section: %v", err)
	}
	names := []string{}
	for _, e := range []error{&FormatError{Offset: 16, Reason: "x"}, &UnsupportedError{Offset: 16, Feature: "y"}, ErrFuelExportExists} {
		names = append(names, e.Error())
	}
	sort.Strings(names)
	want := []string{
		"meter: malformed module at offset 0x10: x",
		"meter: module already exports rewind_fuel",
		"meter: unsupported at offset 0x10: y",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// TestBulkFuel checks that bulk memory and table instructions cost one unit
// plus their length (bytes >> 4, or elements), so a loop of large fills
// cannot run long on little fuel.
func TestBulkFuel(t *testing.T) {
	bulk, fuel := metered(t, bulkRefModule(), 0)
	for _, c := range []struct {
		fn   string
		want int64
	}{
		{"bulk", 1 + 1 + 1 + 1},                 // entry, init 6 B, copy 6 B, fill 4 B
		{"tables", 1 + (1 + 2) + 2 + 3 + 3 + 3}, // entry, grow 2, init 1, fill 2, copy 2, 3 callees
	} {
		_, left, err := spend(t, bulk, fuel, ample, c.fn)
		if err != nil {
			t.Fatalf("%s: %v", c.fn, err)
		}
		if got := ample - left; got != c.want {
			t.Errorf("%s used %d fuel, want %d", c.fn, got, c.want)
		}
	}

	m := newMod()
	m.mems = append(m.mems, op(0x00, 2))
	m.exportFn("fill", m.fn(m.typ(op(tI32, tI32), nil), nil, i32c(0), lget(1), lget(0), misc(11, 0)))
	mod, mfuel := metered(t, m.encode(), 0)
	for _, n := range []int64{0, 15, 16, 100, 65536, 131072} {
		_, left, err := spend(t, mod, mfuel, ample, "fill", uint64(n), 7)
		if err != nil {
			t.Fatalf("fill(%d): %v", n, err)
		}
		if got, want := ample-left, 1+1+n>>4; got != want {
			t.Errorf("fill(%d) used %d fuel, want %d", n, got, want)
		}
	}
	// Too little fuel for the length traps before the fill runs.
	if _, left, err := spend(t, mod, mfuel, 100, "fill", 65536, 9); err == nil || left >= 0 {
		t.Errorf("fill(65536) with 100 fuel: err %v, %d left; want a fuel trap", err, left)
	}
	if got, ok := mod.Memory().ReadByte(0); !ok || got != 7 {
		t.Errorf("memory[0] = %d after the trapped fill, want 7 (untouched)", got)
	}
}

// TestInfo checks what InstrumentModule reports about imports, tables and
// memories.
func TestInfo(t *testing.T) {
	m := newMod()
	m.importFunc("wasi_snapshot_preview1", "fd_write", m.typ(op(tI32, tI32, tI32, tI32), op(tI32)))
	m.importGlobal("env", "g", tI32, false)
	m.imports = append(m.imports, cat(str("env"), str("t"), op(0x01, tFuncref, 0x00, 3)))
	m.tables = append(m.tables, op(tFuncref, 0x01, 4, 10))
	m.mems = append(m.mems, op(0x00, 17))
	m.fn(m.typ(nil, nil), nil)
	res, err := InstrumentModule(m.encode(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := Info{
		Imports: []Import{
			{"wasi_snapshot_preview1", "fd_write", ImportFunc},
			{"env", "g", ImportGlobal},
			{"env", "t", ImportTable},
		},
		Tables:    []Limits{{Min: 3}, {Min: 4, Max: 10, HasMax: true}},
		Memories:  []Limits{{Min: 17}},
		Functions: 1,
	}
	if diff := cmp.Diff(want, res.Info); diff != "" {
		t.Errorf("info (-want +got):\n%s", diff)
	}
	res, err = InstrumentModule(bulkRefModule(), Options{})
	if err != nil || !res.Info.TableGrow {
		t.Errorf("bulkRefModule: TableGrow %v, err %v; want true", res != nil && res.Info.TableGrow, err)
	}
}

// TestExceptionsRefused checks that exception handling is refused: a throw
// leaves a function without storing its fuel local, so a catching caller
// would not see what the callee spent.
func TestExceptionsRefused(t *testing.T) {
	_, err := Instrument(exceptionModule())
	var ue *UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "exception handling") {
		t.Fatalf("Instrument(exceptions) = %v, want an UnsupportedError for exception handling", err)
	}
}

// TestCalleeSpendingCounts checks that fuel spent by callees is charged to
// the caller's budget: a loop calling a looping function runs out.
func TestCalleeSpendingCounts(t *testing.T) {
	mod, fuel := metered(t, loopsModule(), 0)
	// nested(3, 4) = entry + 3 outer + 12 inner; depth(n) recurses n times.
	_, left, err := spend(t, mod, fuel, 1000, "depth", 999)
	if err != nil || left != 0 {
		t.Fatalf("depth(999) with 1000 fuel: %d left, %v; want 0 and no error", left, err)
	}
	if _, left, err = spend(t, mod, fuel, 999, "depth", 999); err == nil || left != -1 {
		t.Fatalf("depth(999) with 999 fuel: %d left, %v; want a fuel trap", left, err)
	}
}
