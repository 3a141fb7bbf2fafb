package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/rewind-io/rewind/sandbox"
)

// BenchmarkIdleMemory runs 64 configs of a module that fills its memory
// (64 MiB by default), one after another as 64 streams that end, and
// reports what stays resident once they have: idle-MiB (the pool's bytes),
// rss-MiB after a garbage collection, rss-released-MiB once the runtime
// has returned free memory to the system (debug.FreeOSMemory; a server
// gets there through Go's background scavenger), and hwm-MiB, the peak.
// base-MiB is the resident memory before the runtime started. The
// sub-benchmark "uncapped" lifts MaxIdleMemoryBytes, as before issue 24.
// RSS figures are Linux-only; run each sub-benchmark in its own process
// (docs/benchmarks.md), the peak being per process.
func BenchmarkIdleMemory(b *testing.B) {
	for _, bc := range []struct {
		name string
		cap  int64
	}{{"capped", 0}, {"uncapped", 1 << 40}} {
		b.Run(bc.name, func(b *testing.B) {
			wasm := memoryFiller()
			runtime.GC()
			debug.FreeOSMemory()
			base := procStatusMiB(b, "VmRSS")
			var st sandbox.Stats
			var rss, released float64
			for b.Loop() {
				r := newRuntime(b, sandbox.Limits{MaxIdleMemoryBytes: bc.cap})
				m, err := r.Compile(context.Background(), wasm)
				if err != nil {
					b.Fatal(err)
				}
				for i := range 64 {
					runConfig(b, m.NewFilter(fmt.Appendf(nil, "config %d", i)))
				}
				st = r.Stats()
				runtime.GC()
				rss = procStatusMiB(b, "VmRSS")
				debug.FreeOSMemory()
				released = procStatusMiB(b, "VmRSS")
				m.Release()
				if err := r.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.IdleBytes)/(1<<20), "idle-MiB")
			b.ReportMetric(float64(st.IdleEvictions), "evictions")
			b.ReportMetric(base, "base-MiB")
			b.ReportMetric(rss, "rss-MiB")
			b.ReportMetric(released, "rss-released-MiB")
			b.ReportMetric(procStatusMiB(b, "VmHWM"), "hwm-MiB")
		})
	}
}

// procStatusMiB reads a field of /proc/self/status (kB) in MiB, or skips
// the benchmark where there is none.
func procStatusMiB(b *testing.B, field string) float64 {
	b.Helper()
	f, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || string(k) != field {
			continue
		}
		kb, err := strconv.ParseFloat(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 64)
		if err != nil {
			b.Fatalf("%s: %v", field, err)
		}
		return kb / 1024
	}
	b.Skipf("no %s in /proc/self/status", field)
	return 0
}
