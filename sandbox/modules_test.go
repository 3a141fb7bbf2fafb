package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/rewind-io/rewind/sandbox"
	"github.com/rewind-io/rewind/sdk/guest/build"
)

// The modules the tests run are built from source: the Go examples with
// the go command, the AssemblyScript examples and hostile modules with npm.
var (
	goDir = filepath.Join("..", "sdk", "guest", "examples", "go")
	asDir = filepath.Join("..", "sdk", "guest", "assemblyscript")
)

var built sync.Map // "go/name" or "as/name" -> []byte

func goModule(tb testing.TB, name string) []byte {
	tb.Helper()
	return buildOnce(tb, "go/"+name, func() ([]byte, error) {
		return build.Go(context.Background(), filepath.Join(goDir, name))
	})
}

func asModule(tb testing.TB, name string) []byte {
	tb.Helper()
	return buildOnce(tb, "as/"+name, func() ([]byte, error) {
		return build.AssemblyScript(asDir, name)
	})
}

func buildOnce(tb testing.TB, key string, fn func() ([]byte, error)) []byte {
	tb.Helper()
	if b, ok := built.Load(key); ok {
		return b.([]byte)
	}
	b, err := fn()
	if err != nil {
		tb.Fatalf("build %s: %v", key, err)
	}
	built.Store(key, b)
	return b
}

// module builds one example in a language ("go" or "as").
func module(tb testing.TB, lang, name string) []byte {
	if lang == "go" {
		return goModule(tb, name)
	}
	return asModule(tb, name)
}

// cacheDir is a compilation cache shared by the runtimes of the test
// binaries (the client's end-to-end tests, internal/cliente2e, use it
// too), kept between runs, so a module compiles once: compiling a Go
// module takes seconds, and 5-8x longer under the race detector (.ci/run
// fills it without). wazero keys entries by the module's bytes and the
// CPU, and writes them atomically. It would key them by its version too,
// read from the binary's build information, but test binaries lack that
// ("dev"): so the directory is per wazero version in go.mod, and entries
// of another version are never loaded.
var cacheDir = filepath.Join(os.TempDir(), "rewind-wasm-test-cache", wazeroVersion(filepath.Join("..", "go.mod")))

// wazeroVersion is the wazero version go.mod requires, or "unknown".
func wazeroVersion(gomod string) string {
	b, _ := os.ReadFile(gomod)
	if m := regexp.MustCompile(`github\.com/tetratelabs/wazero (v\S+)`).FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return "unknown"
}

// newRuntime is a runtime with the shared cache and lim. The compile
// bounds default to an hour: a test's outcome must not depend on how fast
// the machine compiles (the bounds are tested with a compiler held back,
// in compile_test.go).
func newRuntime(tb testing.TB, lim sandbox.Limits) *sandbox.Runtime {
	tb.Helper()
	if lim.CompileTimeoutMillis == 0 {
		lim.CompileTimeoutMillis = 3_600_000
	}
	if lim.CompileWaitMillis == 0 {
		lim.CompileWaitMillis = 3_600_000
	}
	r, err := sandbox.New(context.Background(), sandbox.Config{Limits: lim, CacheDir: cacheDir})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func compile(tb testing.TB, r *sandbox.Runtime, wasm []byte) *sandbox.Module {
	tb.Helper()
	m, err := r.Compile(context.Background(), wasm)
	if err != nil {
		tb.Fatalf("compile: %v", err)
	}
	tb.Cleanup(m.Release)
	return m
}

// rec is a test record.
type rec struct {
	offset  uint64
	time    int64
	key     string
	value   string
	headers []sandbox.Header
}

func batchOf(recs []rec) *sandbox.Batch {
	b := new(sandbox.Batch)
	for _, r := range recs {
		b.Add(r.offset, r.time, []byte(r.key), []byte(r.value), len(r.headers))
		for _, h := range r.headers {
			b.AddHeader(h.Key, h.Value)
		}
	}
	return b
}
