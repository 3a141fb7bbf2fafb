// Package report writes what a scenario run found into a directory: a
// report.json with every figure and every violation with the records
// involved, and a report.html that opens in a browser without a network
// (inline CSS and SVG, no scripts, no fonts or images fetched from
// anywhere).
//
// The page shows, from top to bottom:
//
//  1. a header: the scenario, its seed, the run's duration and nodes, and
//     the verdict, PASS or FAIL;
//  2. the summary figures (operations, acked, failed, unknown, lost,
//     duplicated, reordered, failover max and p50, recovery p50 and max,
//     and any others given);
//  3. the checkers' verdicts: OK, FAIL or skipped (with the reason), the
//     number of violations, and the first violations with their records;
//  4. a timeline: acknowledged publishes per second, publish latency p50
//     and p99 per bucket, and the leader of each partition over time, with
//     every fault window shaded and labelled across all three;
//  5. the faults: name, kind, targets, start and end relative to the start
//     of the run, and the failover time of the fault's worst partition
//     (from the liveness verdict's Stats).
//
// The caller (the runner) fills a Report with the run's history, the
// checkers' verdicts, the summary figures and the overall verdict, and
// calls Write. Everything a user supplied (scenario and topic names,
// record keys and values, error texts) is escaped: it shows as text and
// never becomes markup. The report computes its series (Timeline, the
// leader lanes) from the history itself.
//
// Nothing here holds state between calls; every function is safe to call
// from several goroutines at once on Reports nobody modifies meanwhile.
package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rewind-io/rewind/internal/atomicfile"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// Verdict is one checker's judgement of a run. It has the fields of
// scenarios/check's verdict, so converting one is a field-by-field copy.
type Verdict struct {
	Checker     string // short name, e.g. "log"
	Description string // what the checker promises, one sentence
	// OK: the checker ran and found nothing wrong. A verdict with Skipped
	// set shows as skipped whatever OK says.
	OK bool
	// Skipped, when not empty, says why the checker did not run (e.g. "no
	// group events in this run").
	Skipped    string
	Violations []Violation
	// Stats are the checker's own figures (e.g. "records_checked"). A
	// NaN or infinite figure means "not applicable": report.json leaves
	// it out and the page shows a dash.
	Stats map[string]float64
}

// Violation is one broken promise, with the stored records and the
// publishes that show it.
type Violation struct {
	What      string
	Records   []history.Record
	Publishes []history.Publish
}

// Summary holds a run's headline figures by name: "operations", "acked",
// "failed", "unknown", "lost", "duplicated", "reordered",
// "failover_max_s", "failover_p50_s", "recovery_p50_s", "recovery_max_s",
// and any others. A name ending in
// "_s" is in seconds and one ending in "_ms" in milliseconds; the page
// formats them so. A NaN or infinite figure means "not applicable": it is
// left out of report.json and shown as a dash.
type Summary map[string]float64

// Report is everything written for one run. The report reads it and never
// modifies it.
type Report struct {
	// History is what the run observed. Nil is taken as an empty history.
	History  *history.History
	Verdicts []Verdict
	Summary  Summary
	// Passed is the run's verdict as the runner decided it (normally: no
	// checker failed). The page shows it as given.
	Passed bool
	// Command, when not empty, is the command line that reproduces the
	// run; the page shows it under the header.
	Command string
}

// Doc is the content of report.json. Durations are Go durations
// (integers of nanoseconds); times are RFC 3339 with nanoseconds.
type Doc struct {
	Scenario string
	Seed     int64
	Command  string `json:",omitempty"`
	Start    time.Time
	End      time.Time
	Duration time.Duration
	Nodes    []uint64
	Topics   []history.Topic
	Bounds   history.Bounds
	Passed   bool
	Summary  Summary
	// Verdicts carry every violation with all its records and publishes.
	Verdicts []Verdict
	Faults   []FaultSpan
	// Timeline is Timeline(History, TimelineBucket).
	TimelineBucket time.Duration
	Timeline       []Point
	Leaders        []Lane
}

// FaultSpan is a fault with its start and end as offsets from the start
// of the run.
type FaultSpan struct {
	Name    string
	Kind    string
	Targets []uint64
	Start   time.Duration
	// End is the offset at which the fault was healed. A fault the runner
	// did not record an end for ends with the run.
	End time.Duration
}

// NewDoc computes the content of report.json from r. The returned Doc
// shares r's slices of violations, records and publishes.
func NewDoc(r *Report) (*Doc, error) {
	if r == nil {
		return nil, errors.New("report: nil report")
	}
	h := historyOf(r)
	origin, end := span(h)
	d := &Doc{
		Scenario:       h.Scenario,
		Seed:           h.Seed,
		Command:        r.Command,
		Start:          h.Start,
		End:            h.End,
		Duration:       end.Sub(origin),
		Nodes:          h.Nodes,
		Topics:         h.Topics,
		Bounds:         h.Bounds,
		Passed:         r.Passed,
		Summary:        finite(r.Summary),
		Faults:         faultSpans(h, origin, end),
		TimelineBucket: time.Second,
		Timeline:       Timeline(h, time.Second),
		Leaders:        Leaders(h),
	}
	d.Verdicts = make([]Verdict, len(r.Verdicts))
	for i, v := range r.Verdicts {
		v.Stats = finite(v.Stats)
		d.Verdicts[i] = v
	}
	return d, nil
}

// JSON writes report.json's content for r to w, indented.
func JSON(w io.Writer, r *Report) error {
	d, err := NewDoc(r)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("report: encoding report.json: %w", err)
	}
	return nil
}

// ReadJSON decodes a report.json written by JSON or Write.
func ReadJSON(rd io.Reader) (*Doc, error) {
	var d Doc
	if err := json.NewDecoder(rd).Decode(&d); err != nil {
		return nil, fmt.Errorf("report: decoding report.json: %w", err)
	}
	return &d, nil
}

// Write writes report.json and report.html for r into dir, creating dir
// (and its parents) when missing. Each file is rendered in memory, written
// to a temporary file in dir, synced, and renamed over the old one, so a
// reader sees either the old file or the new one whole. On an error
// nothing is left behind but, possibly, report.json without the new
// report.html.
func Write(dir string, r *Report) error {
	if r == nil {
		return errors.New("report: nil report")
	}
	var js, page bytes.Buffer
	if err := JSON(&js, r); err != nil {
		return err
	}
	if err := HTML(&page, r); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := writeFile(dir, "report.json", js.Bytes()); err != nil {
		return err
	}
	return writeFile(dir, "report.html", page.Bytes())
}

func writeFile(dir, name string, data []byte) error {
	if err := atomicfile.Write(filepath.Join(dir, name), data, 0o644); err != nil {
		return fmt.Errorf("report: writing %s: %w", name, err)
	}
	return nil
}

// historyOf returns r's history, or an empty one.
func historyOf(r *Report) *history.History {
	if r.History == nil {
		return &history.History{}
	}
	return r.History
}

// finite returns m without its NaN and infinite values (JSON has none);
// m itself when it has none.
func finite(m map[string]float64) map[string]float64 {
	clean := true
	for _, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			clean = false
			break
		}
	}
	if clean {
		return m
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out[k] = v
		}
	}
	return out
}
