package runner

import (
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/scenarios"
	"github.com/rewind-io/rewind/scenarios/spec"
)

// TestNotStoredIsCertain: only an answer that says nothing was stored (or
// a connection never made) makes a publish "failed"; anything else leaves
// its outcome unknown, and the log checker then allows it either way.
func TestNotStoredIsCertain(t *testing.T) {
	refused := connect.NewError(connect.CodeUnavailable, errors.New("no leader"))
	refused.Meta().Set("Rewind-Not-Stored", "1")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{connect.NewError(connect.CodeInvalidArgument, errors.New("bad")), true},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, true},
		{connect.NewError(connect.CodeUnavailable, errors.New("outcome unknown")), false},
		{connect.NewError(connect.CodeDeadlineExceeded, errors.New("no answer")), false},
		{errors.New("connection reset"), false},
	} {
		if got := notStored(tc.err); got != tc.want {
			t.Errorf("notStored(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestCompactKeepsValuesComparable: a long value becomes its start and a
// digest: equal values stay equal, values that differ anywhere differ.
func TestCompactKeepsValuesComparable(t *testing.T) {
	a := "pub-1-7." + strings.Repeat("x", 5000)
	b := a[:4000] + "y" + a[4001:]
	same := strings.Clone(a)
	if compact("short") != "short" || compact(a) != compact(same) || compact(a) == compact(b) || len(compact(a)) > 128 {
		t.Fatalf("compact: %q vs %q", compact(a), compact(b))
	}
}

// TestGauntletRequestsCoverEveryRPC: the gauntlet's requests, over a few
// hundred draws, reach every RPC and each kind of malformation.
func TestGauntletRequestsCoverEveryRPC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rpcs, kinds := map[string]bool{}, map[string]bool{}
	for k := range 2000 {
		rpc, body, ctype, what := gauntletRequest(rng, k)
		if body == nil || ctype == "" || what == "" {
			t.Fatalf("request %d: empty part", k)
		}
		rpcs[rpc] = true
		kinds[ctype] = true
	}
	for _, rpc := range gauntletRPCs {
		if !rpcs[rpc] {
			t.Errorf("%s never probed", rpc)
		}
	}
	if !kinds["application/json"] || !kinds["application/proto"] {
		t.Errorf("content types %v", kinds)
	}
}

// TestUploadBombsAreModules: the hand-built bombs are WebAssembly modules
// (the server must refuse them for what they are, not as garbage).
func TestUploadBombsAreModules(t *testing.T) {
	for _, b := range uploadBombs {
		if w := b.wasm(); len(w) < 8 || string(w[:4]) != "\x00asm" {
			t.Errorf("%s: not a module", b.what)
		}
	}
}

// TestBuiltinScenariosUseKnownTargets: every built-in scenario parses and
// names actions the runner implements.
func TestBuiltinScenariosUseKnownTargets(t *testing.T) {
	known := map[string]bool{"kill": true, "power-loss": true, "pause": true, "restart": true, "rolling-restart": true, "cut": true,
		"one-way": true, "isolate": true, "split": true, "bridge": true, "delay": true, "bandwidth": true, "replace": true, "failpoint": true, "replay-storm": true}
	for _, a := range spec.Actions {
		if !known[a] {
			t.Errorf("spec action %q has no case in the runner's inject", a)
		}
	}
	for _, n := range scenarios.Names() {
		fn, src, _ := scenarios.File(n)
		if _, err := spec.Parse(fn, src); err != nil {
			t.Error(err)
		}
	}
}
