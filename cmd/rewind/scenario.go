package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/scenarios"
	"github.com/rewind-io/rewind/scenarios/check"
	"github.com/rewind-io/rewind/scenarios/history"
	"github.com/rewind-io/rewind/scenarios/report"
	"github.com/rewind-io/rewind/scenarios/runner"
	"github.com/rewind-io/rewind/scenarios/spec"
)

func newScenario() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Run chaos scenarios: real nodes, a workload, faults, and checkers of every guarantee",
		Long: `A scenario starts real rewind serve processes on loopback, drives a workload
(publishers with idempotency keys, live followers, replays from random
positions, subscriber groups), injects faults on a schedule (kills, pauses,
restarts, cut links, partitions, failpoints) and then checks that nothing
acknowledged was lost, nothing was duplicated or reordered, replays return
exactly the history they name and groups stay fenced. The built-in scenarios
are listed by 'rewind scenario list'; the file format is in docs/scenarios.md.`,
	}
	cmd.AddCommand(newScenarioList(), newScenarioRun())
	return cmd
}

func newScenarioList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tFAULTS\tDURATION (SHORT)\tDESCRIPTION")
			for _, name := range scenarios.Names() {
				s, err := builtin(name)
				if err != nil {
					return err
				}
				var faults []string
				for _, f := range s.Faults {
					faults = append(faults, f.Action)
				}
				if len(faults) == 0 {
					faults = []string{"none"}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s\n", s.Name, strings.Join(faults, ","), s.Duration, s.Short, s.Description)
			}
			return tw.Flush()
		},
	}
}

// builtin parses a built-in scenario.
func builtin(name string) (*spec.Scenario, error) {
	fn, src, ok := scenarios.File(name)
	if !ok {
		return nil, fmt.Errorf("no built-in scenario %q (rewind scenario list shows them)", name)
	}
	return spec.Parse(fn, src)
}

// loadScenario reads NAME (built in) or FILE (a path ending in .hcl).
func loadScenario(arg string) (*spec.Scenario, error) {
	if strings.HasSuffix(arg, ".hcl") || strings.ContainsRune(arg, os.PathSeparator) {
		src, err := os.ReadFile(arg)
		if err != nil {
			return nil, err
		}
		return spec.Parse(arg, src)
	}
	return builtin(arg)
}

func newScenarioRun() *cobra.Command {
	var (
		o         runner.Options
		reportDir string
		all, keep bool
		keepData  bool
	)
	cmd := &cobra.Command{
		Use:   "run NAME|FILE...",
		Short: "Run scenarios (or --all) and check their histories",
		Long: `Run a scenario: a built-in one by name, or a file. The same --seed gives
the same fault schedule and workload choices. The run's nodes keep their
data and logs in --report DIR (a temporary directory by default, removed
unless --keep), which also receives report.json and report.html. Exits
non-zero when a checker finds a violation.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if all {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.MinimumNArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var list []*spec.Scenario
			if all {
				for _, n := range scenarios.Names() {
					s, err := builtin(n)
					if err != nil {
						return err
					}
					list = append(list, s)
				}
			} else {
				for _, a := range args {
					s, err := loadScenario(a)
					if err != nil {
						return err
					}
					list = append(list, s)
				}
			}
			if o.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.Binary = exe
			}
			if !hasFailpoints(o.Binary) {
				var keep []*spec.Scenario
				for _, s := range list {
					if !s.Failpoints {
						keep = append(keep, s)
						continue
					}
					if !all {
						return fmt.Errorf("scenario %s needs a binary built with failpoints: go build -tags failpoints -o rewind-fp ./cmd/rewind, then --binary rewind-fp", s.Name)
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "skipping %s: it needs a binary built with -tags failpoints (--binary)\n", s.Name)
				}
				list = keep
			}
			if o.Seed == 0 {
				o.Seed = time.Now().UnixNano() % 1_000_000
			}
			o.Log = cmd.ErrOrStderr()
			failed := 0
			var rows []summaryRow
			defer func() {
				if len(rows) > 1 {
					printSummary(cmd.OutOrStdout(), rows)
				}
			}()
			for _, s := range list {
				dir := reportDir
				if dir == "" {
					tmp, err := os.MkdirTemp("", "rewind-scenario-")
					if err != nil {
						return err
					}
					dir = tmp
					if !keep {
						defer os.RemoveAll(tmp)
					}
				}
				if len(list) > 1 {
					dir = filepath.Join(dir, s.Name)
				}
				ro := o
				ro.Dir = filepath.Join(dir, "nodes")
				h, err := runner.Run(cmd.Context(), s, ro)
				if h == nil {
					if !all || cmd.Context().Err() != nil {
						return fmt.Errorf("scenario %s: %w", s.Name, err)
					}
					// The run itself could not be carried out: say so, go
					// on with the next one.
					fmt.Fprintf(cmd.OutOrStdout(), "\nscenario %s (seed %d): FAIL, the run could not be carried out: %v\n", s.Name, o.Seed, err)
					failed++
					rows = append(rows, summaryRow{s: s, h: &history.History{Scenario: s.Name, Seed: o.Seed}, passed: false})
					continue
				}
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "scenario %s: the run had trouble: %v\n", s.Name, err)
				}
				if err := writeHistory(filepath.Join(dir, "history.json"), h); err != nil {
					return err
				}
				verdicts := check.All(h)
				passed := err == nil
				for _, v := range verdicts {
					passed = passed && v.OK
				}
				st := check.Summary(h)
				if err := report.Write(dir, reportOf(h, verdicts, st, passed, reproduce(s, ro))); err != nil {
					return fmt.Errorf("write the report: %w", err)
				}
				printRun(cmd.OutOrStdout(), h, verdicts, st, passed, dir)
				if !passed {
					failed++
				} else if !keepData {
					// A passing run's node data (some hundreds of MB a
					// node) is not needed to understand it; the logs stay.
					removeNodeData(ro.Dir)
				}
				rows = append(rows, summaryRow{s: s, h: h, st: st, passed: passed})
			}
			if failed > 0 {
				return fmt.Errorf("%d scenario(s) failed", failed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&all, "all", false, "run every built-in scenario")
	f.BoolVar(&o.Short, "short", false, "run each scenario for its short duration")
	f.DurationVar(&o.Duration, "duration", 0, "run the workload this long (default: the scenario's)")
	f.IntVar(&o.Nodes, "nodes", 0, "number of nodes (default: the scenario's)")
	f.Int64Var(&o.Seed, "seed", 0, "seed of the random choices (default: a new one, printed)")
	f.StringVar(&reportDir, "report", "", "directory for the report, the nodes' data and logs (default: a temporary one)")
	f.StringVar(&o.Binary, "binary", "", "the rewind binary to run as nodes (default: this one; build with -tags failpoints for storage faults)")
	f.BoolVar(&keep, "keep", false, "keep the temporary directory")
	f.BoolVar(&keepData, "keep-data", false, "keep the nodes' data directories of passing runs too (a failed run's are always kept)")
	f.StringVar(&o.Failpoints, "failpoints", "", "set these failpoints on every node from its start, as NAME=VALUE;NAME (a binary built with -tags failpoints; the injected bugs prove the checkers)")
	f.StringVar(&o.Client, "client", "", "publish through a client with its own defaults, given every member: go (the Go client), ts (the TypeScript client in Node; needs --ts-client) or cli (a `rewind publish` run per record, sharing a node memory); default: one attempt per call, the publishers retrying (every attempt in the history)")
	f.StringVar(&o.TSClient, "ts-client", "", "with --client ts: the TypeScript client's directory, built (sdk/ts after npm ci && npm run build)")
	f.BoolVar(&o.SkipBounds, "skip-bounds", false, "do not check the scenario's liveness bounds (they depend on the machine's speed)")
	f.DurationVar(&o.ConvergeWithin, "converge-within", 0, "how long the replicas may take to agree after the faults healed (default 1m)")
	_ = f.MarkHidden("converge-within") // for the mutation tests: a broken build may never converge
	return cmd
}

func writeHistory(path string, h *history.History) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// printRun prints a run's verdicts and figures.
func printRun(w io.Writer, h *history.History, verdicts []check.Verdict, st check.Stats, passed bool, dir string) {
	verdict := "PASS"
	if !passed {
		verdict = "FAIL"
	}
	through := ""
	if h.Client != "" {
		through = ", publishing through " + h.Client
	}
	fmt.Fprintf(w, "\nscenario %s (seed %d%s): %s in %s\n", h.Scenario, h.Seed, through, verdict, h.End.Sub(h.Start).Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECKER\tVERDICT\tVIOLATIONS\tNOTE")
	for _, v := range verdicts {
		state, note := "ok", v.Skipped
		if !v.OK {
			state = "FAIL"
			if len(v.Violations) > 0 {
				note = v.Violations[0].What
			}
		} else if v.Skipped != "" {
			state = "skipped"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", v.Checker, state, int(v.Stats["violations"]), note)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d operations: %d publishes (%d acked, %d failed, %d unknown), %d reads, %d follows; lost %d, duplicated %d, reordered %d; %d faults, %s\n",
		st.Operations, st.Publishes, st.Acked, st.Failed, st.Unknown, len(h.Reads), len(h.Follows), st.Lost, st.Duplicated, st.Reordered,
		st.Faults, failoverText(st))
	printFailovers(w, h, verdicts)
	fmt.Fprintf(w, "report: %s (report.html, report.json, history.json, the nodes' logs)\n", dir)
}

// printFailovers prints a line per fault: its worst failover time, then
// each partition's (the liveness checker's figures). A fault
// healed only after the workload ended is marked: it was measured up to
// the workload's end.
func printFailovers(w io.Writer, h *history.History, verdicts []check.Verdict) {
	var stats map[string]float64
	for _, v := range verdicts {
		if v.Checker == "liveness" {
			stats = v.Stats
		}
	}
	for i, f := range h.Faults {
		worst, ok := stats[fmt.Sprintf("fault%d.failover_s", i)]
		if !ok {
			continue
		}
		var parts []string
		for _, t := range h.Topics[:min(1, len(h.Topics))] {
			for p := range t.Partitions {
				if d, ok := stats[fmt.Sprintf("fault%d.p%d.failover_s", i, p)]; ok {
					parts = append(parts, fmt.Sprintf("p%d %.3f", p, d))
				}
			}
		}
		cut := ""
		if !h.WorkloadEnd.IsZero() && !f.End.Before(h.WorkloadEnd) {
			cut = ", outlasted the workload"
		}
		fmt.Fprintf(w, "fault %d %s %v at %.1fs for %.1fs%s: failover %.3f s (%s)\n", i, f.Kind, f.Targets,
			f.Start.Sub(h.Start).Seconds(), f.End.Sub(f.Start).Seconds(), cut, worst, strings.Join(parts, ", "))
	}
}

// failoverText says how long publishers waited during the faults.
func failoverText(st check.Stats) string {
	if !st.Measured {
		return "no failover measured"
	}
	return fmt.Sprintf("failover max %s (the longest any partition went without an acknowledged publish during a fault), p50 %s",
		st.FailoverMax.Round(time.Millisecond), st.FailoverP50.Round(time.Millisecond))
}

// reportOf turns a run and its verdicts into the report's types.
func reportOf(h *history.History, verdicts []check.Verdict, st check.Stats, passed bool, command string) *report.Report {
	r := &report.Report{History: h, Passed: passed, Command: command, Summary: report.Summary{
		"operations": float64(st.Operations), "publishes": float64(st.Publishes), "acked": float64(st.Acked),
		"failed": float64(st.Failed), "unknown": float64(st.Unknown), "lost": float64(st.Lost),
		"duplicated": float64(st.Duplicated), "reordered": float64(st.Reordered), "faults": float64(st.Faults),
		"recovery_p50_s": st.RecoveryP50.Seconds(), "recovery_max_s": st.RecoveryMax.Seconds(), "unrecovered": float64(st.Unrecovered),
		"failover_p50_s": st.FailoverP50.Seconds(), "failover_max_s": st.FailoverMax.Seconds(),
	}}
	if !st.Measured {
		for _, k := range []string{"recovery_p50_s", "recovery_max_s", "failover_p50_s", "failover_max_s"} {
			r.Summary[k] = math.NaN() // not applicable: a dash
		}
	}
	for _, v := range verdicts {
		rv := report.Verdict{Checker: v.Checker, Description: v.Description, OK: v.OK, Skipped: v.Skipped, Stats: v.Stats}
		for _, x := range v.Violations {
			rv.Violations = append(rv.Violations, report.Violation{What: x.What, Records: x.Records, Publishes: x.Publishes})
		}
		r.Verdicts = append(r.Verdicts, rv)
	}
	return r
}

// reproduce is the command line that runs s again with the same choices.
func reproduce(s *spec.Scenario, o runner.Options) string {
	args := []string{"rewind", "scenario", "run", s.Name, "--seed", fmt.Sprint(o.Seed)}
	if o.Duration > 0 {
		args = append(args, "--duration", o.Duration.String())
	} else if o.Short {
		args = append(args, "--short")
	}
	if o.Nodes > 0 {
		args = append(args, "--nodes", fmt.Sprint(o.Nodes))
	}
	if o.Failpoints != "" {
		args = append(args, "--failpoints", o.Failpoints)
	}
	if o.SkipBounds {
		args = append(args, "--skip-bounds")
	}
	if o.Client != "" {
		args = append(args, "--client", o.Client)
		if o.TSClient != "" {
			args = append(args, "--ts-client", o.TSClient)
		}
	}
	if s.Failpoints {
		args = append(args, "--binary", "rewind-failpoints")
	}
	return strings.Join(args, " ")
}

// summaryRow is one scenario's line in the table after --all.
type summaryRow struct {
	s      *spec.Scenario
	h      *history.History
	st     check.Stats
	passed bool
}

// printSummary prints one line per scenario run, as a Markdown table
// (docs/reliability.md holds the latest one).
func printSummary(w io.Writer, rows []summaryRow) {
	fmt.Fprintln(w, "\n| scenario | faults | operations | acked | lost | duplicated | reordered | failover max (p50) | verdict | seed |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		var faults []string
		seen := map[string]bool{}
		for _, f := range r.s.Faults {
			name := f.Action
			if name == "failpoint" {
				name = f.Failpoint
			}
			if !seen[name] {
				seen[name] = true
				faults = append(faults, name)
			}
		}
		if r.s.Workload.Gauntlet {
			faults = append(faults, "malformed requests")
		}
		if r.s.Workload.Bombs {
			faults = append(faults, "filter bombs")
		}
		if len(r.s.Workload.Groups) > 0 && r.s.Workload.Groups[0].Churn > 0 {
			faults = append(faults, "group churn")
		}
		verdict := "pass"
		if !r.passed {
			verdict = "**FAIL**"
		}
		recovery := "–"
		if r.st.Measured {
			recovery = fmt.Sprintf("%s (%s; %d faults)", r.st.FailoverMax.Round(time.Millisecond), r.st.FailoverP50.Round(time.Millisecond), r.st.Faults)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %s | %s | %d |\n", r.s.Name, strings.Join(faults, ", "),
			r.st.Operations, r.st.Acked, r.st.Lost, r.st.Duplicated, r.st.Reordered, recovery, verdict, r.h.Seed)
	}
}

// hasFailpoints reports whether the rewind binary at path was built with
// -tags failpoints (its version says so).
func hasFailpoints(path string) bool {
	out, err := exec.Command(path, "version").Output()
	return err == nil && strings.Contains(string(out), failpointsLine)
}

// removeNodeData removes the nodes' data directories under dir, keeping
// their logs.
func removeNodeData(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}
