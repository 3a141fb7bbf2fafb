package sandbox_test

import (
	"context"
	"testing"

	. "github.com/rewind-io/rewind/internal/wasmgen"
	"github.com/rewind-io/rewind/sandbox"
)

// TestStatsCountCallsFuelAndFailures checks Runtime.Stats, which the
// node's /metrics exposes: every guest call is counted with the fuel it
// burned (a call that runs out counts its whole budget), and every failed
// run once, by kind.
func TestStatsCountCallsFuelAndFailures(t *testing.T) {
	const fuel = 100_000
	r := newRuntime(t, sandbox.Limits{FuelPerCall: fuel, MaxRecordsPerCall: 10})
	run := func(wasm []byte) error {
		t.Helper()
		_, err := compile(t, r, wasm).NewFilter(nil).Run(context.Background(), batchOf(corpus(25, 1)), nil)
		return err
	}
	if st := r.Stats(); st.Calls != 0 || st.Fuel != 0 || st.Failures != [len(st.Failures)]uint64{} {
		t.Fatalf("stats of a new runtime: %+v", st)
	}

	// 25 records, 10 a call: 3 calls, each burning a little fuel.
	if err := run(abiModule(dropAll, nil)); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.Calls != 3 || st.Fuel == 0 || st.Fuel >= 3*fuel || st.Failures != [len(st.Failures)]uint64{} {
		t.Fatalf("after 3 successful calls: %+v", st)
	}

	// A trap: one call, three more that find the record it failed on
	// (records 0-4, 0-1, 0: Filter.Run's narrowing, which burns fuel as
	// any call does), and one failure of kind trap.
	if err := run(abiModule(Body(OpUnreachable, OpEnd), nil)); sandbox.KindOf(err) != sandbox.KindTrap {
		t.Fatalf("unreachable: %v", err)
	}
	// An endless loop: one call that burns its whole budget, one failure
	// of kind fuel.
	before := r.Stats().Fuel
	if err := run(abiModule(Body(OpLoop, BlockEmpty, OpBr, 0, OpEnd, I32Const(0), OpEnd), nil)); sandbox.KindOf(err) != sandbox.KindFuel {
		t.Fatalf("endless loop: %v", err)
	}
	st = r.Stats()
	if st.Calls != 8 || st.Fuel-before != fuel {
		t.Errorf("after a trap and an endless loop: %d calls (want 8), %d fuel for the loop (want its budget, %d)", st.Calls, st.Fuel-before, fuel)
	}
	for k := range st.Failures {
		want := uint64(0)
		if k == int(sandbox.KindTrap) || k == int(sandbox.KindFuel) {
			want = 1
		}
		if st.Failures[k] != want {
			t.Errorf("failures of kind %v: %d, want %d", sandbox.Kind(k), st.Failures[k], want)
		}
	}
}
