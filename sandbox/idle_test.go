package sandbox_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/rewind-io/rewind/internal/wasmgen"
	"github.com/rewind-io/rewind/sandbox"
)

// memoryFiller is an ABI v1 module whose rewind_filter grows its memory
// to the limit (halving its request whenever memory.grow refuses) and
// writes a byte to every 4 KiB of it, so the memory is resident, then
// drops its records: the guest of finding 6 of issue 24, whose idle
// instances pinned their full memory.
func memoryFiller() []byte {
	const n = 0 // local 0 (the record count) is reused as a scratch variable
	body := Body(
		I32Const(32768), OpLocalSet, n,
		OpBlock, BlockEmpty, OpLoop, BlockEmpty,
		OpLocalGet, n, OpI32Eqz, OpBrIf, 1,
		OpLocalGet, n, OpMemoryGrow, 0, I32Const(-1), OpI32Eq,
		OpIf, BlockEmpty, OpLocalGet, n, I32Const(1), OpI32ShrU, OpLocalSet, n, OpEnd,
		OpBr, 0,
		OpEnd, OpEnd,
		I32Const(0), OpLocalSet, n,
		OpBlock, BlockEmpty, OpLoop, BlockEmpty,
		OpLocalGet, n, OpMemorySize, 0, I32Const(16), OpI32Shl, OpI32GeU, OpBrIf, 1,
		OpLocalGet, n, I32Const(1), OpI32Store8, MemArg(0, 0),
		OpLocalGet, n, I32Const(4096), OpI32Add, OpLocalSet, n,
		OpBr, 0,
		OpEnd, OpEnd,
		I32Const(0), OpEnd,
	)
	return ABIModule(2, body, nil)
}

// runConfig runs f once over one record, failing the test on an error.
func runConfig(tb testing.TB, f *sandbox.Filter) {
	tb.Helper()
	if _, err := f.Run(context.Background(), batchOf([]rec{{offset: 1, value: "x"}}), nil); err != nil {
		tb.Fatalf("run: %v", err)
	}
}

// TestIdleMemoryCap is finding 6 of issue 24: idle instances pinned their
// memory (64 configs of a module that fills its 64 MiB left 3.3 GB
// resident after every stream ended). The idle pool's memory must stay
// within MaxIdleMemoryBytes, closing the least recently used instances;
// an instance larger than the bound is not kept; closing a module
// releases its idle instances' bytes.
func TestIdleMemoryCap(t *testing.T) {
	const pages = 16 // 1 MiB per instance once filled
	const size = pages * 65536
	r := newRuntime(t, sandbox.Limits{MaxMemoryPages: pages, MaxIdleMemoryBytes: 3*size + size/2, MaxIdleInstances: 32})
	wasm := memoryFiller()
	m, err := r.Compile(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	filters := make([]*sandbox.Filter, 8)
	for i := range filters {
		filters[i] = m.NewFilter(fmt.Appendf(nil, "config %d", i))
	}
	check := func(step string, idle int, evictions uint64) {
		t.Helper()
		st := r.Stats()
		if st.IdleInstances != idle || st.IdleBytes != int64(idle)*size || st.IdleEvictions != evictions {
			t.Fatalf("%s: %d idle instances of %d bytes, %d evictions; want %d of %d, %d evictions",
				step, st.IdleInstances, st.IdleBytes, st.IdleEvictions, idle, int64(idle)*size, evictions)
		}
		if st.IdleBytes > r.Limits().MaxIdleMemoryBytes {
			t.Fatalf("%s: idle bytes %d over the bound %d", step, st.IdleBytes, r.Limits().MaxIdleMemoryBytes)
		}
	}
	// Eight configs in turn: three fit, each further one closes the least
	// recently used.
	for i, f := range filters {
		runConfig(t, f)
		check(fmt.Sprintf("after config %d", i), min(i+1, 3), uint64(max(0, i+1-3)))
	}
	// Idle now, most recent first: 7, 6, 5. Running 5 and 6 reuses their
	// instances (nothing closed); 0 was closed, so running it makes an
	// instance and closes the least recently used, 7; running 7 then
	// closes 5, and 6 is still idle.
	for _, step := range []struct {
		config    int
		evictions uint64
	}{{5, 5}, {6, 5}, {0, 6}, {7, 7}, {6, 7}} {
		runConfig(t, filters[step.config])
		check(fmt.Sprintf("after config %d again", step.config), 3, step.evictions)
	}
	// Closing the module closes its idle instances.
	m.Release()
	r.Forget(m.SHA256())
	check("after the module was forgotten", 0, 7)
}

// TestIdleMemoryCapLargeInstance checks that an instance larger than
// MaxIdleMemoryBytes on its own is closed when its run ends, not kept.
func TestIdleMemoryCapLargeInstance(t *testing.T) {
	r := newRuntime(t, sandbox.Limits{MaxMemoryPages: 16, MaxIdleMemoryBytes: 8 * 65536})
	m := compile(t, r, memoryFiller())
	runConfig(t, m.NewFilter(nil))
	if st := r.Stats(); st.IdleInstances != 0 || st.IdleBytes != 0 || st.IdleEvictions != 1 {
		t.Fatalf("after a run of an instance over the bound: %d idle instances of %d bytes, %d evictions; want none and 1",
			st.IdleInstances, st.IdleBytes, st.IdleEvictions)
	}
}
