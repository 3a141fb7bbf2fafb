package meter

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// goGuest is a reactor built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared.
const goGuest = `package main

import "unsafe"

var buf [1 << 16]byte

//go:wasmexport buf_ptr
func bufPtr() int32 { return int32(uintptr(unsafe.Pointer(&buf[0]))) }

// count_byte counts the bytes equal to c in buf[:n].
//
//go:wasmexport count_byte
func countByte(n, c int32) int32 {
	k := int32(0)
	for _, b := range buf[:n] {
		if b == byte(c) {
			k++
		}
	}
	return k
}

//go:wasmexport spin
func spin(n int64) int64 {
	x := int64(1)
	for i := int64(0); i < n; i++ {
		x = x*6364136223846793005 + i
	}
	return x
}

func fib(n int32) int32 {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

//go:wasmexport fib
func wasmFib(n int32) int32 { return fib(n) }

// words allocates: a map and strings, so the Go runtime (allocator, maps,
// maybe the garbage collector) runs under the meter.
//
//go:wasmexport words
func words(n int32) int64 {
	m := map[string]int64{}
	for i := int32(0); i < n; i++ {
		k := string(rune('a' + i%26)) + string(rune('a' + i%7))
		m[k] += int64(i)
	}
	var s int64
	for k, v := range m {
		s += v * int64(len(k))
	}
	return s
}

func main() {}
`

var goModule struct {
	once sync.Once
	wasm []byte
	err  error
}

// buildGoModule compiles goGuest once per test binary; it skips the test
// only when the go command is missing.
func buildGoModule(tb testing.TB) []byte {
	tb.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		if _, statErr := os.Stat("/usr/local/go/bin/go"); statErr != nil {
			tb.Skip("no go command to build a wasip1 module")
		}
		goCmd = "/usr/local/go/bin/go"
	}
	goModule.once.Do(func() {
		dir, err := os.MkdirTemp("", "meter-guest")
		if err != nil {
			goModule.err = err
			return
		}
		defer os.RemoveAll(dir)
		for name, content := range map[string]string{
			"go.mod":  "module guest\n\ngo 1.24\n",
			"main.go": goGuest,
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				goModule.err = err
				return
			}
		}
		cmd := exec.Command(goCmd, "build", "-buildmode=c-shared", "-o", "x.wasm", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			goModule.err = errors.New("go build: " + err.Error() + "\n" + string(out))
			return
		}
		goModule.wasm, goModule.err = os.ReadFile(filepath.Join(dir, "x.wasm"))
	})
	if goModule.err != nil {
		tb.Fatal(goModule.err)
	}
	return goModule.wasm
}

// goInstance instantiates a Go reactor with WASI and runs _initialize; with
// fuel it gives _initialize ample fuel.
func goInstance(tb testing.TB, cfg wazero.RuntimeConfig, wasm []byte, withFuel bool) (api.Module, api.MutableGlobal) {
	tb.Helper()
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	tb.Cleanup(func() { _ = r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		tb.Fatalf("instantiate: %v", err)
	}
	var fuel api.MutableGlobal
	if withFuel {
		fuel = fuelOf(tb, mod)
		fuel.Set(uint64(ample))
	}
	if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
		tb.Fatalf("_initialize: %v", err)
	}
	return mod, fuel
}

func fillGoBuffer(tb testing.TB, mod api.Module, data []byte) {
	tb.Helper()
	res, err := mod.ExportedFunction("buf_ptr").Call(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if !mod.Memory().Write(uint32(res[0]), data) {
		tb.Fatal("buffer out of memory")
	}
}

// TestGoModule instruments a module compiled by the Go toolchain and checks
// it behaves as the original with ample fuel, and traps when it runs out.
func TestGoModule(t *testing.T) {
	wasm := buildGoModule(t)
	out := mustInstrument(t, wasm, Options{})
	t.Logf("Go module: %d bytes, instrumented %d bytes (+%.1f%%)", len(wasm), len(out), 100*float64(len(out)-len(wasm))/float64(len(wasm)))
	secs := map[string]int{}
	for _, s := range splitSections(t, wasm) {
		if s.id == 0 {
			secs[s.name] = len(s.content)
		}
	}
	t.Logf("custom sections of the original: %v", secs)

	cfg := wazero.NewRuntimeConfig()
	orig, _ := goInstance(t, cfg, wasm, false)
	mod, fuel := goInstance(t, cfg, out, true)
	t.Logf("_initialize used %d fuel", ample-int64(fuel.Get()))

	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	fillGoBuffer(t, orig, data)
	fillGoBuffer(t, mod, data)
	for _, c := range []testCall{
		c("count_byte", 0, 5), c("count_byte", 200, 5), c("count_byte", 1<<16, 200),
		c("spin", 0), c("spin", 1000), c("fib", 20), c("words", 1000),
	} {
		want, err := orig.ExportedFunction(c.fn).Call(ctx, c.args...)
		if err != nil {
			t.Fatalf("original %s%v: %v", c.fn, c.args, err)
		}
		got, left, err := spend(t, mod, fuel, ample, c.fn, c.args...)
		if err != nil {
			t.Fatalf("metered %s%v: %v", c.fn, c.args, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s%v (-original +metered):\n%s", c.fn, c.args, diff)
		}
		t.Logf("%s%v = %v, %d fuel", c.fn, c.args, got, ample-left)
	}

	// The fuel grows with the work: count_byte over more bytes costs more.
	_, l200, _ := spend(t, mod, fuel, ample, "count_byte", 200, 5)
	_, l400, _ := spend(t, mod, fuel, ample, "count_byte", 400, 5)
	if per := float64(l200-l400) / 200; per < 1 {
		t.Errorf("count_byte: %.2f fuel per extra byte, want >= 1", per)
	}

	// A call that would run for ages traps once the fuel is gone, quickly.
	_, left, err := spend(t, mod, fuel, 1_000_000, "spin", 1<<62)
	if err == nil || left >= 0 {
		t.Fatalf("spin(1<<62) with 1e6 fuel: err %v, fuel %d; want a trap and negative fuel", err, left)
	}
	if !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("spin: %v", err)
	}
}

// TestGoModuleCustomSections checks what happens to the Go toolchain's
// custom sections: DWARF is dropped, the rest is kept.
func TestGoModuleCustomSections(t *testing.T) {
	wasm := buildGoModule(t)
	out := mustInstrument(t, wasm, Options{})
	names := func(wasm []byte) (n []string) {
		for _, s := range splitSections(t, wasm) {
			if s.id == 0 && !strings.HasPrefix(s.name, ".debug_") {
				n = append(n, s.name)
			}
		}
		return n
	}
	if diff := cmp.Diff(names(wasm), names(out)); diff != "" {
		t.Errorf("non-DWARF custom sections (-in +out):\n%s", diff)
	}
	// The magic and version are kept.
	if binary.LittleEndian.Uint32(out[4:8]) != 1 {
		t.Errorf("version %x", out[4:8])
	}
}
