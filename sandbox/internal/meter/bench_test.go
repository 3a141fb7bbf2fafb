package meter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The benchmarks compare three ways to run the same loop-heavy call:
//
//   - plain: the original module, no bound at all (the baseline);
//   - metered: the instrumented module, the host setting the fuel before
//     every call, as the sandbox will;
//   - close-on-done: the original module compiled with
//     RuntimeConfig.WithCloseOnContextDone(true) and called with a context
//     that has a deadline, wazero's own way to stop a guest (it also inserts
//     checks at function entries and loop headers). "shared-deadline" uses
//     one context for all calls; "per-call-deadline" makes a new
//     context.WithTimeout for each call, as a host bounding each call would.
//
// Each variant makes the same call and checks its result once before timing.

type benchVariant struct {
	name     string
	metered  bool
	closeCfg bool
	perCall  bool
}

var benchVariants = []benchVariant{
	{name: "plain"},
	{name: "metered", metered: true},
	{name: "close-on-done/shared-deadline", closeCfg: true},
	{name: "close-on-done/per-call-deadline", closeCfg: true, perCall: true},
}

// benchCountModule is a memory and the countbytes function of memoryModule.
func benchCountModule() []byte {
	m := newMod()
	m.mems = append(m.mems, op(0x00, 2))
	m.export("memory", 0x02, 0)
	m.exportFn("countbytes", m.fn(m.typ(op(tI32, tI32, tI32), op(tI32)), op(tI32, tI32), countBytesCode...))
	return m.encode()
}

// runVariant times fn.Call(args) for one variant; setup prepares an
// instance (fills memory) and returns the function and the expected result.
func runVariant(b *testing.B, v benchVariant, wasm []byte, instance func(b *testing.B, cfg wazero.RuntimeConfig, wasm []byte, metered bool) (api.Module, api.MutableGlobal),
	fn string, want uint64, args ...uint64) {
	cfg := wazero.NewRuntimeConfig().WithCloseOnContextDone(v.closeCfg)
	bin := wasm
	if v.metered {
		bin = mustInstrument(b, wasm, Options{})
	}
	mod, fuel := instance(b, cfg, bin, v.metered)
	f := mod.ExportedFunction(fn)
	callCtx := context.Background()
	if v.closeCfg && !v.perCall {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(callCtx, time.Hour)
		defer cancel()
	}
	call := func() []uint64 {
		if v.metered {
			fuel.Set(uint64(ample))
		}
		c, cancel := callCtx, context.CancelFunc(nil)
		if v.perCall {
			c, cancel = context.WithTimeout(callCtx, time.Second)
		}
		res, err := f.Call(c, args...)
		if cancel != nil {
			cancel()
		}
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	if got := call(); got[0] != want {
		b.Fatalf("%s = %d, want %d", fn, got[0], want)
	}
	b.ResetTimer()
	for b.Loop() {
		call()
	}
}

// BenchmarkCountBytes: a hand-written loop over a buffer in linear memory
// (one load, compare and add per byte), 200 bytes and 64 KiB per call.
func BenchmarkCountBytes(b *testing.B) {
	wasm := benchCountModule()
	for _, size := range []int{200, 64 << 10} {
		data := make([]byte, size)
		want := uint64(0)
		for i := range data {
			data[i] = byte(i * 13)
			if data[i] == 'a' {
				want++
			}
		}
		instance := func(b *testing.B, cfg wazero.RuntimeConfig, wasm []byte, metered bool) (api.Module, api.MutableGlobal) {
			r := wazero.NewRuntimeWithConfig(ctx, cfg)
			b.Cleanup(func() { _ = r.Close(ctx) })
			mod := instantiate(b, r, wasm, "bench")
			mod.Memory().Write(0, data)
			var fuel api.MutableGlobal
			if metered {
				fuel = fuelOf(b, mod)
			}
			return mod, fuel
		}
		for _, v := range benchVariants {
			b.Run(fmt.Sprintf("%dB/%s", size, v.name), func(b *testing.B) {
				runVariant(b, v, wasm, instance, "countbytes", want, 0, uint64(size), 'a')
				b.SetBytes(int64(size))
			})
		}
	}
}

// BenchmarkGoCountByte: the same work in a function compiled by the Go
// toolchain (count_byte over 200 bytes of its buffer).
func BenchmarkGoCountByte(b *testing.B) {
	wasm := buildGoModule(b)
	data := make([]byte, 200)
	want := uint64(0)
	for i := range data {
		data[i] = byte(i * 13)
		if data[i] == 'a' {
			want++
		}
	}
	instance := func(b *testing.B, cfg wazero.RuntimeConfig, wasm []byte, metered bool) (api.Module, api.MutableGlobal) {
		mod, fuel := goInstance(b, cfg, wasm, metered)
		fillGoBuffer(b, mod, data)
		return mod, fuel
	}
	for _, v := range benchVariants {
		b.Run(v.name, func(b *testing.B) {
			runVariant(b, v, wasm, instance, "count_byte", want, 200, 'a')
		})
	}
}

// BenchmarkInstrument: the cost of instrumenting the Go module at upload.
func BenchmarkInstrument(b *testing.B) {
	wasm := buildGoModule(b)
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := Instrument(wasm); err != nil {
			b.Fatal(err)
		}
	}
}
