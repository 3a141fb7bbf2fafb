package build_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rewind-io/rewind/sdk/guest/build"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// The Go examples, built by the tests from source.
var goExamples = []string{"keyprefix", "jsonfield", "header", "sample", "redact", "project"}

var goBuilt struct {
	sync.Mutex
	modules map[string][]byte
}

// goModule builds sdk/guest/examples/go/<name>, once per test binary.
func goModule(tb testing.TB, name string) []byte {
	tb.Helper()
	goBuilt.Lock()
	defer goBuilt.Unlock()
	if b, ok := goBuilt.modules[name]; ok {
		return b
	}
	b, err := build.Go(context.Background(), filepath.Join("..", "examples", "go", name))
	if err != nil {
		tb.Fatal(err)
	}
	if goBuilt.modules == nil {
		goBuilt.modules = map[string][]byte{}
	}
	goBuilt.modules[name] = b
	return b
}

// goAllowedWASI is ABI v1's allow-list of WASI functions (sdk/guest/ABI.md,
// "Imports a module may use").
var goAllowedWASI = []string{
	"args_get", "args_sizes_get", "environ_get", "environ_sizes_get", "clock_time_get", "clock_res_get",
	"random_get", "fd_write", "fd_close", "fd_fdstat_get", "fd_seek", "poll_oneoff", "sched_yield", "proc_exit",
}

func TestGoExamplesExportsAndImports(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	i32 := api.ValueTypeI32
	wantExports := map[string][2][]api.ValueType{
		"_initialize":       {nil, nil},
		"rewind_abi_v1":     {nil, nil},
		"rewind_input":      {nil, {i32}},
		"rewind_input_cap":  {nil, {i32}},
		"rewind_output":     {nil, {i32}},
		"rewind_output_cap": {nil, {i32}},
		"rewind_init":       {{i32}, {i32}},
		"rewind_filter":     {{i32, i32}, {i32}},
	}
	for _, name := range goExamples {
		t.Run(name, func(t *testing.T) {
			wasm := goModule(t, name)
			t.Logf("%s: %d bytes", name, len(wasm))
			m, err := r.CompileModule(ctx, wasm)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m.ExportedMemories()["memory"]; !ok {
				t.Error("no memory export")
			}
			exports := m.ExportedFunctions()
			for fn, sig := range wantExports {
				f, ok := exports[fn]
				if !ok {
					t.Errorf("no export %s", fn)
					continue
				}
				if !slices.Equal(f.ParamTypes(), sig[0]) || !slices.Equal(f.ResultTypes(), sig[1]) {
					t.Errorf("%s: type %v -> %v, want %v -> %v", fn, f.ParamTypes(), f.ResultTypes(), sig[0], sig[1])
				}
			}
			for _, f := range m.ImportedFunctions() {
				mod, fn, _ := f.Import()
				switch {
				case mod == "wasi_snapshot_preview1" && slices.Contains(goAllowedWASI, fn):
				case mod == "rewind" && fn == "log":
					if !slices.Equal(f.ParamTypes(), []api.ValueType{i32, i32}) || len(f.ResultTypes()) != 0 {
						t.Errorf("rewind.log: type %v -> %v, want (i32, i32) -> ()", f.ParamTypes(), f.ResultTypes())
					}
				default:
					t.Errorf("import %s.%s is not on ABI v1's allow-list", mod, fn)
				}
			}
		})
	}
}

// goGuest is one instance of a module, driven as the host drives it.
type goGuest struct {
	mod                    api.Module
	mem                    api.Memory
	in, inCap, out, outCap uint32
	initFn, filterFn       api.Function
	logs                   *[]string
}

// goInstantiate instantiates wasm in r (which has WASI and a rewind.log
// appending to logs), calls _initialize and reads the buffers.
func goInstantiate(tb testing.TB, r wazero.Runtime, wasm []byte, logs *[]string) *goGuest {
	tb.Helper()
	ctx := context.Background()
	mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { mod.Close(ctx) })
	call := func(name string) uint32 {
		res, err := mod.ExportedFunction(name).Call(ctx)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		if len(res) == 0 {
			return 0
		}
		return uint32(res[0])
	}
	call("_initialize")
	return &goGuest{
		mod: mod, mem: mod.Memory(), logs: logs,
		in: call("rewind_input"), inCap: call("rewind_input_cap"),
		out: call("rewind_output"), outCap: call("rewind_output_cap"),
		initFn: mod.ExportedFunction("rewind_init"), filterFn: mod.ExportedFunction("rewind_filter"),
	}
}

// goRuntime is a runtime with WASI and a rewind.log that collects lines.
func goRuntime(tb testing.TB, cfg wazero.RuntimeConfig) (wazero.Runtime, *[]string) {
	tb.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	tb.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	logs := new([]string)
	_, err := r.NewHostModuleBuilder("rewind").NewFunctionBuilder().
		WithFunc(func(_ context.Context, m api.Module, ptr, n uint32) {
			b, _ := m.Memory().Read(ptr, n)
			*logs = append(*logs, string(b))
		}).Export("log").Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return r, logs
}

func (g *goGuest) init(tb testing.TB, config string) uint32 {
	tb.Helper()
	if !g.mem.Write(g.in, []byte(config)) {
		tb.Fatal("config does not fit memory")
	}
	res, err := g.initFn.Call(context.Background(), uint64(len(config)))
	if err != nil {
		tb.Fatal(err)
	}
	return uint32(res[0])
}

// filter writes the encoded records and calls rewind_filter; it returns
// the output bytes (a copy) or fails on a negative code.
func (g *goGuest) filter(tb testing.TB, count int, enc []byte) []byte {
	tb.Helper()
	if uint32(len(enc)) > g.inCap || !g.mem.Write(g.in, enc) {
		tb.Fatal("input does not fit")
	}
	res, err := g.filterFn.Call(context.Background(), uint64(count), uint64(len(enc)))
	if err != nil {
		tb.Fatal(err)
	}
	n := int32(res[0])
	if n < 0 {
		tb.Fatalf("rewind_filter = %d; logs %q", n, *g.logs)
	}
	b, ok := g.mem.Read(g.out, uint32(n))
	if !ok || uint32(n) > g.outCap {
		tb.Fatalf("output of %d bytes outside the buffer", n)
	}
	return bytes.Clone(b)
}

// goRecord is a record for goEncode.
type goRecord struct {
	offset     uint64
	key, value string
	headers    []string // key, value, ...
}

// goEncode encodes records in ABI v1's input layout.
func goEncode(dst []byte, recs ...goRecord) []byte {
	le := binary.LittleEndian
	for _, r := range recs {
		body := le.AppendUint64(nil, r.offset)
		body = le.AppendUint64(body, 1_700_000_000_000_000_000)
		for _, s := range []string{r.key, r.value} {
			body = append(le.AppendUint32(body, uint32(len(s))), s...)
		}
		body = le.AppendUint32(body, uint32(len(r.headers)/2))
		for _, s := range r.headers {
			body = append(le.AppendUint32(body, uint32(len(s))), s...)
		}
		dst = append(le.AppendUint32(dst, uint32(len(body))), body...)
	}
	return dst
}

// TestGoEndToEnd runs built examples under wazero the way the sandbox
// does, and checks the exact output bytes: keyprefix's (index, 0) for the
// kept record, redact's (index, 1, replacement) and the unchanged (index,
// 0), and a bad config failing rewind_init with a log line.
func TestGoEndToEnd(t *testing.T) {
	r, logs := goRuntime(t, wazero.NewRuntimeConfig())
	le := binary.LittleEndian

	g := goInstantiate(t, r, goModule(t, "keyprefix"), logs)
	if g.inCap != 2<<20 || g.outCap != 2<<20 || g.in == 0 || g.out == 0 {
		t.Fatalf("buffers at %d (%d bytes) and %d (%d bytes)", g.in, g.inCap, g.out, g.outCap)
	}
	if code := g.init(t, `{"prefix":"user-1"}`); code != 0 {
		t.Fatalf("rewind_init = %d; logs %q", code, *logs)
	}
	out := g.filter(t, 2, goEncode(nil,
		goRecord{offset: 41, key: "user-2", value: "a"},
		goRecord{offset: 42, key: "user-17", value: "b", headers: []string{"h", "v"}}))
	if want := []byte{1, 0, 0, 0, 0}; !bytes.Equal(out, want) {
		t.Fatalf("keyprefix output %v, want %v", out, want)
	}

	g = goInstantiate(t, r, goModule(t, "redact"), logs)
	if code := g.init(t, `{"field":"email"}`); code != 0 {
		t.Fatalf("rewind_init = %d; logs %q", code, *logs)
	}
	out = g.filter(t, 2, goEncode(nil,
		goRecord{offset: 7, key: "k", value: `{"email":"a@b.c","id":1}`, headers: []string{"h", "v"}},
		goRecord{offset: 8, key: "k2", value: `{"id":2}`}))
	want := le.AppendUint32(nil, 0)
	want = append(want, 1)
	for _, s := range []string{"k", `{"email":"***","id":1}`} {
		want = append(le.AppendUint32(want, uint32(len(s))), s...)
	}
	want = le.AppendUint32(want, 1)
	for _, s := range []string{"h", "v"} {
		want = append(le.AppendUint32(want, uint32(len(s))), s...)
	}
	want = append(le.AppendUint32(want, 1), 0)
	if !bytes.Equal(out, want) {
		t.Fatalf("redact output\n%q, want\n%q", out, want)
	}

	g = goInstantiate(t, r, goModule(t, "keyprefix"), logs)
	*logs = nil
	if code := g.init(t, `{"prefix":7}`); code == 0 {
		t.Fatal("rewind_init accepted a bad config")
	}
	if len(*logs) != 1 || !strings.Contains((*logs)[0], `"prefix" must be a JSON string`) {
		t.Fatalf("logs %q", *logs)
	}
}

func TestGoBuildError(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module broken\n\ngo 1.24\n",
		"main.go": "package main\n\nfunc main() { undefinedThing() }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := build.Go(context.Background(), dir)
	var exit *exec.ExitError
	if err == nil || !strings.Contains(err.Error(), "undefined: undefinedThing") || !errors.As(err, &exit) {
		t.Fatalf("err %v; want the compiler's output and an *exec.ExitError", err)
	}
	if _, err := build.Go(context.Background(), filepath.Join(dir, "missing")); err == nil {
		t.Fatal("no error for a missing directory")
	}
}

func TestGoToolMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := build.Go(context.Background(), "."); !errors.Is(err, build.ErrToolMissing) {
		t.Fatalf("err %v; want ErrToolMissing", err)
	}
}

func TestGoCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := build.Go(ctx, filepath.Join("..", "examples", "go", "keyprefix")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v; want context.Canceled", err)
	}
}

// BenchmarkGoWasm measures keyprefix and jsonfield built to WebAssembly and
// run under wazero's compiler, per record, at several batch sizes: each
// iteration writes one encoded batch of ~100-byte records into the guest
// and calls rewind_filter, as the host does per call.
func BenchmarkGoWasm(b *testing.B) {
	for _, tc := range []struct{ name, config string }{
		{"keyprefix", `{"prefix":"user-1"}`},
		{"jsonfield", `{"field":"type","equals":"order.created"}`},
	} {
		r, logs := goRuntime(b, wazero.NewRuntimeConfigCompiler())
		g := goInstantiate(b, r, goModule(b, tc.name), logs)
		if code := g.init(b, tc.config); code != 0 {
			b.Fatalf("rewind_init = %d; logs %q", code, *logs)
		}
		for _, size := range []int{1, 16, 128, 1024} {
			b.Run(tc.name+"/batch="+strconv.Itoa(size), func(b *testing.B) {
				enc := goEncode(nil, goBenchRecords(size)...)
				ctx := context.Background()
				stack := make([]uint64, 2)
				b.ReportAllocs()
				b.SetBytes(int64(len(enc)))
				for b.Loop() {
					g.mem.Write(g.in, enc)
					stack[0], stack[1] = uint64(size), uint64(len(enc))
					if err := g.filterFn.CallWithStack(ctx, stack); err != nil || int32(stack[0]) < 0 {
						b.Fatalf("rewind_filter: %d, %v", int32(stack[0]), err)
					}
				}
				perRecord := float64(b.Elapsed().Nanoseconds()) / float64(b.N*size)
				b.ReportMetric(perRecord, "ns/record")
				b.ReportMetric(1e9/perRecord, "records/s")
			})
		}
	}
}

// goBenchRecords are n records of about 100 bytes each (encoded with
// their lengths), a tenth with keys starting user-1 and a third with type
// order.created.
func goBenchRecords(n int) []goRecord {
	types := []string{"order.created", "order.paid", "user.signup"}
	recs := make([]goRecord, n)
	for i := range recs {
		recs[i] = goRecord{
			offset:  uint64(i),
			key:     "user-" + strconv.Itoa(i%10) + "-" + strconv.Itoa(100000+i),
			value:   `{"id":` + strconv.Itoa(100000+i) + `,"type":"` + types[i%3] + `","total":12.5}`,
			headers: []string{"source", "web"},
		}
	}
	return recs
}
