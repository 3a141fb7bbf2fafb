package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"

	g "github.com/rewind-io/rewind/internal/wasmgen"
)

// tinyModule is a minimal ABI v1 module (abi: false leaves out
// rewind_abi_v1). seed varies its bytes.
func tinyModule(abi bool, seed int32) []byte {
	m := new(g.Module)
	m.ExportMemory("memory", m.Memory(2, 0, false))
	void := m.Type(nil, nil)
	ret := m.Type(nil, []g.ValType{g.I32})
	if abi {
		m.ExportFunc("rewind_abi_v1", m.Func(void, nil, []byte{g.OpEnd}))
	}
	for name, v := range map[string]int32{"rewind_input": 0, "rewind_input_cap": 65536, "rewind_output": 65536, "rewind_output_cap": 65536} {
		m.ExportFunc(name, m.Func(ret, nil, g.Body(g.I32Const(v), g.OpEnd)))
	}
	m.ExportFunc("rewind_init", m.Func(m.Type([]g.ValType{g.I32}, []g.ValType{g.I32}), nil, g.Body(g.I32Const(0), g.OpEnd)))
	m.ExportFunc("rewind_filter", m.Func(m.Type([]g.ValType{g.I32, g.I32}, []g.ValType{g.I32}), nil, g.Body(g.I32Const(seed), g.OpDrop, g.I32Const(0), g.OpEnd)))
	return m.Bytes()
}

// gatedRuntime is a runtime whose compiler waits for a token on release
// (closed by open, which cleanup calls before the runtime closes) and
// counts its calls.
func gatedRuntime(t *testing.T, lim Limits) (r *Runtime, started, release chan struct{}, open func(), calls *atomic.Int32) {
	t.Helper()
	r, err := New(context.Background(), Config{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	started, release, calls = make(chan struct{}, 16), make(chan struct{}), new(atomic.Int32)
	open = sync.OnceFunc(func() { close(release) })
	t.Cleanup(open) // runs first
	compile := r.compileModule
	r.compileModule = func(ctx context.Context, b []byte) (wazero.CompiledModule, error) {
		calls.Add(1)
		started <- struct{}{}
		<-release
		return compile(ctx, b)
	}
	return r, started, release, open, calls
}

// TestCompileInBackground follows a module through Prepare, State and
// Compile while its compile is held, then let go.
func TestCompileInBackground(t *testing.T) {
	r, started, release, _, calls := gatedRuntime(t, Limits{CompileWaitMillis: 3_600_000})
	wasm := tinyModule(true, 1)
	sha := r.Prepare(wasm)
	<-started
	if s, err := r.State(sha); s != StateCompiling || err != nil {
		t.Fatalf("State while compiling: %v, %v", s, err)
	}
	// A Compile whose wait ends first says the module is compiling; the
	// compile goes on.
	r.lim.CompileWaitMillis = 1
	_, err := r.Compile(context.Background(), wasm)
	var ce *CompilingError
	if !errors.Is(err, ErrCompiling) || !errors.As(err, &ce) || ce.Module != sha || !strings.Contains(err.Error(), "still compiling") {
		t.Fatalf("Compile while compiling, 1 ms wait: %v; want a CompilingError", err)
	}
	r.lim.CompileWaitMillis = 3_600_000
	// A cancelled Compile gives up too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Compile(ctx, wasm); !errors.Is(err, context.Canceled) {
		t.Fatalf("Compile with a cancelled context: %v", err)
	}
	release <- struct{}{} // the compile goes on
	m, err := r.Compile(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
	if s, err := r.State(sha); s != StateCompiled || err != nil {
		t.Fatalf("State once compiled: %v, %v", s, err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("compiled %d times, want 1", n)
	}
	if s, _ := r.State(SHA256([]byte("other"))); s != StateNone {
		t.Errorf("State of an unknown module: %v", s)
	}
}

// TestCompileFailureKept checks that a module that does not compile is
// reported by State and refused again without compiling, until Forget.
func TestCompileFailureKept(t *testing.T) {
	r, _, _, open, calls := gatedRuntime(t, Limits{})
	open() // compiles pass
	wasm := tinyModule(false, 2)
	for range 2 {
		if _, err := r.Compile(context.Background(), wasm); KindOf(err) != KindInvalid || !strings.Contains(err.Error(), "rewind_abi_v1") {
			t.Fatalf("Compile of a module without the ABI: %v", err)
		}
	}
	sha := SHA256(wasm)
	if s, err := r.State(sha); s != StateFailed || KindOf(err) != KindInvalid {
		t.Fatalf("State: %v, %v; want failed", s, err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("compiled %d times, want 1", n)
	}
	r.Forget(sha)
	if s, _ := r.State(sha); s != StateNone {
		t.Errorf("State after Forget: %v", s)
	}
}

// TestCompileTimeout checks the compile-time bound with a compile that
// cannot finish before it.
func TestCompileTimeout(t *testing.T) {
	r, _, _, _, _ := gatedRuntime(t, Limits{CompileTimeoutMillis: 1})
	_, err := r.Compile(context.Background(), tinyModule(true, 3))
	if KindOf(err) != KindInvalid || !strings.Contains(err.Error(), "compiling took longer than 1ms") {
		t.Fatalf("compile with a 1 ms bound: %v", err)
	}
}
