package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/scenarios/check"
	"github.com/rewind-io/rewind/scenarios/history"
)

// readRun reads the history a scenario run wrote into dir and judges it.
func readRun(t *testing.T, r result, dir string) (result, *history.History, []check.Verdict) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "history.json"))
	if err != nil {
		t.Fatalf("no history written (exit %d)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var h history.History
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return r, &h, check.All(&h)
}

// TestScenarioSmoke is the short subset of the scenario library that the
// suite runs: real nodes, the workload and the faults of each scenario for
// 12 s (lost-update, whose writers conflict from the first second, for 6 s),
// a fixed seed, every safety checker. Liveness bounds are left out
// (--skip-bounds): they depend on the machine's speed, and the suite must
// pass on a busy machine.
func TestScenarioSmoke(t *testing.T) {
	for _, tc := range []struct {
		name, duration string
		// positive are checker figures ("checker.stat") that must be
		// above 0: the checker judged what the scenario is about.
		positive []string
	}{
		{"leader-kill-loop", "12s", nil},
		{"isolate-leader", "12s", nil},
		{"group-reset", "12s", nil},
		{"malformed-gauntlet", "12s", nil},
		{"lost-update", "6s", []string{"appends.acked", "appends.conflicts", "appends.records"}},
	} {
		name := tc.name
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			r, h, verdicts := readRun(t, runCLI(t, nil, nil, "scenario", "run", name, "--duration", tc.duration, "--seed", "1", "--skip-bounds", "--report", dir), dir)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "PASS") {
				t.Errorf("stdout says no PASS:\n%s", r.stdout)
			}
			for _, v := range verdicts {
				if !v.OK {
					t.Errorf("%s: %+v", v.Checker, v.Violations)
				}
				for _, st := range tc.positive {
					if c, stat, _ := strings.Cut(st, "."); c == v.Checker && v.Stats[stat] <= 0 {
						t.Errorf("%s: %s is %v (skipped %q)", v.Checker, stat, v.Stats[stat], v.Skipped)
					}
				}
			}
			// The run did what the scenario says: it published and
			// acknowledged, its fault happened, every replica was read.
			st := check.Summary(h)
			if st.Acked == 0 || len(h.Faults) == 0 || len(h.Replicas) == 0 {
				t.Errorf("%d acked, %d faults, %d replicas", st.Acked, len(h.Faults), len(h.Replicas))
			}
			// The report: the page and the figures, the same verdict.
			doc, err := os.ReadFile(filepath.Join(dir, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			var rep struct{ Passed bool }
			if err := json.Unmarshal(doc, &rep); err != nil || !rep.Passed {
				t.Errorf("report.json: passed %v, %v", rep.Passed, err)
			}
			if page, err := os.ReadFile(filepath.Join(dir, "report.html")); err != nil || !strings.Contains(string(page), name) {
				t.Errorf("report.html: %v", err)
			}
		})
	}
}

// TestScenarioThroughClients: the publishers of a scenario publish through
// the CLI (a `rewind publish` run per record) and through the Go client
// with its own defaults (--client); the run passes every safety checker,
// records which client published, and prints each fault's failover.
// sdk/ts's tests run the TypeScript client the same way.
func TestScenarioThroughClients(t *testing.T) {
	for _, kind := range []string{"cli", "go"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			r, h, verdicts := readRun(t, runCLI(t, nil, nil, "scenario", "run", "pause-leader", "--duration", "10s", "--seed", "1",
				"--skip-bounds", "--client", kind, "--report", dir), dir)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			for _, v := range verdicts {
				if !v.OK {
					t.Errorf("%s: %+v", v.Checker, v.Violations)
				}
			}
			if st := check.Summary(h); h.Client != kind || st.Acked == 0 || len(h.Faults) == 0 {
				t.Errorf("client %q, %d acked, %d faults; want %s, some, some", h.Client, st.Acked, len(h.Faults), kind)
			}
			if !strings.Contains(r.stdout, "publishing through "+kind) || !strings.Contains(r.stdout, "fault 0 pause") {
				t.Errorf("stdout names neither the client nor the fault's failover:\n%s", r.stdout)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		r := runCLI(t, nil, nil, "scenario", "run", "pause-leader", "--duration", "1s", "--client", "carrier-pigeon", "--report", t.TempDir())
		if r.code == 0 || !strings.Contains(r.stderr, `unknown client "carrier-pigeon"`) {
			t.Errorf("exit %d, stderr %q: want a refusal naming the client", r.code, r.stderr)
		}
	})
}

// TestScenarioRefusesABadFile: a scenario file with a mistake is refused
// before anything starts, with its line and column.
func TestScenarioRefusesABadFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.hcl")
	if err := os.WriteFile(f, []byte("scenario \"x\" {\n  fault \"f\" {\n    action = \"explode\"\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, nil, "scenario", "run", f)
	if r.code == 0 || !strings.Contains(r.stderr, "bad.hcl:3:14") || !strings.Contains(r.stderr, "unknown action") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, nil, "scenario", "run", "no-such-scenario")
	if r.code == 0 || !strings.Contains(r.stderr, "rewind scenario list") {
		t.Fatalf("unknown name: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestCheckersCatchInjectedBugs is the mutation test of the checkers: each
// scenario runs against nodes with a deliberate bug (a bug-* failpoint:
// the mutant), and the checker that guards the broken promise must fail
// the run. A checker that never failed would let them all survive. Each
// mutant runs a few seconds of the scenario meant to catch it; a control
// run of each scenario written for a mutant shows that the unmodified
// build passes it, so the failure is the mutant's.
//
// It takes about 4 minutes, too long for every run of the suite: it runs
// with REWIND_MUTANTS=1 (the mutants stage of .ci/run).
func TestCheckersCatchInjectedBugs(t *testing.T) {
	if os.Getenv("REWIND_MUTANTS") == "" {
		t.Skip("the mutation test of the checkers runs with REWIND_MUTANTS=1 (about 4 minutes)")
	}
	bin := enginetest.Binary(t, "failpoints")
	for _, tc := range []struct {
		bug, scenario string // bug "": a control run, which must pass
		duration      string
		// bounds: check the scenario's liveness bounds (the bug is a slow
		// failover). Otherwise they are skipped: they depend on the
		// machine's speed.
		bounds   bool
		caughtBy []string // one of these checkers must fail
		notBy    []string // none of these may: the bug is not theirs
	}{
		{"bug-skip-dedupe", "leader-kill-loop", "8s", false, []string{"log"}, nil},
		{"bug-deliver-twice", "leader-kill-loop", "8s", false, []string{"reads", "follows"}, nil},
		{"bug-swap-records", "leader-kill-loop", "8s", false, []string{"reads", "follows"}, nil},
		// A read-path bug is a read bug: the replicas are read from the
		// stopped nodes' stores, so the log checker sees the data intact.
		{"bug-skip-replayed-record", "leader-kill-loop", "8s", false, []string{"reads", "follows"}, []string{"log"}},
		{"bug-accept-fenced-commit", "rebalance-storm", "12s", false, []string{"groups"}, nil},
		{"bug-ack-before-fsync", "power-loss-all", "10s", false, []string{"log"}, nil},
		{"bug-follower-no-fsync", "power-loss-followers", "10s", false, []string{"log"}, nil},
		{"", "power-loss-followers", "10s", false, nil, nil},
		{"bug-skip-conditions", "lost-update", "6s", false, []string{"appends"}, nil},
		// 30 s: four pauses. With the failure detector (failover in
		// about half a second) the race fires less often per pause: 12 s
		// (two pauses) let seed 1's mutant through once; 20 s caught it
		// with 5 to 16 duplicates on a quiet machine, but let it through
		// once in CI after the clients' hedges began to end attempts a
		// member refuses (session 37).
		{"bug-skip-apply-dedupe", "resend-new-leader", "30s", false, []string{"log"}, nil},
		{"", "resend-new-leader", "30s", false, nil, nil},
		// Elections five times slower: the leader killed at 5 s leaves
		// its partitions without an acknowledgement past the 1 s bound.
		{"bug-slow-elections", "leader-kill-loop", "10s", true, []string{"liveness"}, nil},
	} {
		name := tc.bug
		if name == "" {
			name = "control-" + tc.scenario
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"scenario", "run", tc.scenario, "--binary", bin, "--duration", tc.duration, "--seed", "1",
				"--converge-within", "15s", "--report", dir}
			if tc.bug != "" {
				args = append(args, "--failpoints", tc.bug)
			}
			if !tc.bounds {
				args = append(args, "--skip-bounds")
			}
			r, _, verdicts := readRun(t, runCLI(t, nil, nil, args...), dir)
			var failed []string
			for _, v := range verdicts {
				if !v.OK {
					failed = append(failed, fmt.Sprintf("%s (%s)", v.Checker, v.Violations[0].What))
				}
			}
			if tc.bug == "" {
				if r.code != 0 || len(failed) > 0 {
					t.Fatalf("the unmodified build failed %s: exit %d, %v\nstdout:\n%s", tc.scenario, r.code, failed, r.stdout)
				}
				return
			}
			if r.code == 0 {
				t.Errorf("the run passed with %s: the mutant survived\nstdout:\n%s", tc.bug, r.stdout)
			}
			caught := false
			for _, v := range verdicts {
				caught = caught || (!v.OK && slices.Contains(tc.caughtBy, v.Checker))
				if !v.OK && slices.Contains(tc.notBy, v.Checker) {
					t.Errorf("%s: the %s checker failed, but the bug is not its: %s", tc.bug, v.Checker, v.Violations[0].What)
				}
			}
			if !caught {
				t.Errorf("%s: failing checkers %v, want one of %v\nstdout:\n%s", tc.bug, failed, tc.caughtBy, r.stdout)
			}
		})
	}
}
