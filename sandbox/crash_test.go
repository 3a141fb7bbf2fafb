package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/sandbox"
	"github.com/rewind-io/rewind/sdk/guest/build"
)

// crashModule is testdata/goguest/crash, a Go guest that crashes its
// runtime on chosen records (see its source).
func crashModule(tb testing.TB) []byte {
	tb.Helper()
	return buildOnce(tb, "testdata/crash", func() ([]byte, error) {
		return build.Go(context.Background(), filepath.Join("testdata", "goguest", "crash"))
	})
}

// TestGoGuestCrashSaysWhyAndWhere: a Go guest that runs out of memory
// traps with a bare "unreachable" after printing why on stderr; one that
// panics reports it. The error says why in one line (no stack), and names
// the record it failed on although the call held 40 records; Index stays
// the call's first record, where a stream resumes.
func TestGoGuestCrashSaysWhyAndWhere(t *testing.T) {
	r := newRuntime(t, sandbox.Limits{})
	m := compile(t, r, crashModule(t))
	for _, c := range []struct {
		key, value string
		kind       sandbox.Kind
		want       string
	}{
		{"oom", "", sandbox.KindTrap, "trap: rewind_filter: runtime: out of memory: cannot allocate 4294967296-byte block ("},
		// The filter package recovers a panic and reports it.
		{"panic", "poison record 27", sandbox.KindGuest, "guest failure: rewind_filter returned -1: filter: panic: poison record 27"},
	} {
		t.Run(c.key, func(t *testing.T) {
			var recs []rec
			for i := range 40 {
				r := rec{offset: 1000 + uint64(i), key: fmt.Sprint("k", i)}
				if i == 27 {
					r.key, r.value = c.key, c.value
				}
				recs = append(recs, r)
			}
			outs, err := m.NewFilter(nil).Run(context.Background(), batchOf(recs), nil)
			var e *sandbox.Error
			if !errors.As(err, &e) || e.Kind != c.kind {
				t.Fatalf("Run: %v; want %v", err, c.kind)
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q; want one line containing %q", msg, c.want)
			}
			if e.Index != 0 || !e.Located || e.Record != 27 || e.Offset != 1027 || len(outs) != 0 {
				t.Errorf("Index %d, Located %v, Record %d, Offset %d, %d outputs; want 0, true, 27, 1027, 0", e.Index, e.Located, e.Record, e.Offset, len(outs))
			}
			if c.kind == sandbox.KindTrap && !strings.Contains(fmt.Sprint(e.Err), "wasm stack trace") {
				t.Errorf("Err %q lost the wasm stack trace (for the server log)", e.Err)
			}
		})
	}
}

// TestGoGuestCrashThatDoesNotRecur: a crash that depends on what the
// instance ran before (here, records seen in earlier calls) does not
// happen again when the failed call is narrowed down on a fresh instance:
// the error still says why, and names no record rather than a wrong one.
func TestGoGuestCrashThatDoesNotRecur(t *testing.T) {
	r := newRuntime(t, sandbox.Limits{})
	f := compile(t, r, crashModule(t)).NewFilter(nil)
	var warm []rec
	for i := range 99 {
		warm = append(warm, rec{offset: uint64(i), key: "w"})
	}
	if _, err := f.Run(context.Background(), batchOf(warm), nil); err != nil {
		t.Fatal(err)
	}
	// The instance that ran warm (idle now) sees record 101 at index 2.
	_, err := f.Run(context.Background(), batchOf([]rec{{offset: 99, key: "a"}, {offset: 100, key: "b"}, {offset: 101, key: "late"}, {offset: 102, key: "c"}}), nil)
	var e *sandbox.Error
	if !errors.As(err, &e) || e.Kind != sandbox.KindGuest || !strings.Contains(err.Error(), "panic: late") {
		t.Fatalf("Run: %v; want a guest failure saying panic: late", err)
	}
	if e.Index != 0 || e.Located {
		t.Errorf("Index %d, Located %v (record %d); want 0, false", e.Index, e.Located, e.Record)
	}
}
