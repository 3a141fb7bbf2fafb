package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rewind-io/rewind/scenarios/history"
)

// TestJSONRoundTrip: report.json decodes to exactly the figures computed
// from the report: summary, verdicts with every violation and record,
// faults, timeline and leader lanes.
func TestJSONRoundTrip(t *testing.T) {
	r := synthetic()
	var b bytes.Buffer
	if err := JSON(&b, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewDoc(r)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("report.json round trip (-want +got):\n%s", d)
	}

	// The figures themselves, not only their agreement with NewDoc.
	if got.Scenario != "leader-kill" || got.Seed != 42 || got.Passed || got.Duration != time.Minute || len(got.Nodes) != 3 {
		t.Errorf("header: %q seed %d passed %v duration %v nodes %v", got.Scenario, got.Seed, got.Passed, got.Duration, got.Nodes)
	}
	if got.Summary["acked"] != 1770 || got.Summary["recovery_p50_s"] != 1.25 {
		t.Errorf("summary: %v", got.Summary)
	}
	if _, ok := got.Summary["not_applicable"]; ok {
		t.Error("a NaN figure is in report.json")
	}
	if _, ok := r.Summary["not_applicable"]; !ok {
		t.Error("JSON modified the caller's summary")
	}
	v := got.Verdicts[0]
	if v.Checker != "log" || v.OK || len(v.Violations) != 2 || len(v.Violations[0].Records) != 2 || v.Violations[0].Records[1].Value != "v-0-8" ||
		len(v.Violations[0].Publishes) != 1 || v.Violations[0].Publishes[0].IdemKey != "i-0-7" {
		t.Errorf("first verdict: %+v", v)
	}
	if got.Verdicts[2].Skipped != "no group events in this run" {
		t.Errorf("skipped verdict: %+v", got.Verdicts[2])
	}
	acked := 0
	for _, p := range got.Timeline {
		acked += p.Acked
	}
	if len(got.Timeline) != 60 || got.TimelineBucket != time.Second || acked != 1770 {
		t.Errorf("timeline: %d points of %v, %d acked; want 60 of 1s, 1770", len(got.Timeline), got.TimelineBucket, acked)
	}
	if p := got.Timeline[22]; p.P99 != 400*time.Millisecond || p.Failed != 3 || p.Unknown != 3 {
		t.Errorf("timeline during the kill: %+v", p)
	}
	if len(got.Faults) != 2 || got.Faults[0].Start != 20*time.Second || got.Faults[0].End != 25*time.Second || got.Faults[1].Kind != "split" {
		t.Errorf("faults: %+v", got.Faults)
	}
	if len(got.Leaders) != 4 || len(got.Leaders[1].Segments) != 2 || got.Leaders[1].Segments[1].Leader != 2 || got.Leaders[1].Segments[1].Start != 21*time.Second {
		t.Errorf("leaders: %+v", got.Leaders)
	}
}

func TestJSONEmptyAndNil(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, &Report{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := JSON(&b, nil); err == nil {
		t.Error("JSON(nil) succeeded")
	}
	if err := HTML(&b, nil); err == nil {
		t.Error("HTML(nil) succeeded")
	}
	if _, err := ReadJSON(strings.NewReader("{")); err == nil || !strings.Contains(err.Error(), "report.json") {
		t.Errorf("ReadJSON of a truncated file: %v", err)
	}
	// Infinite stats are left out too, and nothing else.
	r := &Report{Verdicts: []Verdict{{Checker: "c", Stats: map[string]float64{"inf": math.Inf(1), "n": 3}}}}
	b.Reset()
	if err := JSON(&b, r); err != nil {
		t.Fatal(err)
	}
	d, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]float64{"n": 3}, d.Verdicts[0].Stats); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	r := synthetic()
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	// Writing again replaces both files.
	r.History.Scenario = "second"
	r.Passed = true
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if d := cmp.Diff([]string{"report.html", "report.json"}, names); d != "" {
		t.Errorf("files in the report directory (-want +got):\n%s", d)
	}
	f, err := os.Open(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if d.Scenario != "second" || !d.Passed {
		t.Errorf("report.json not replaced: %q passed %v", d.Scenario, d.Passed)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if v := parse(t, page).byID("verdict"); v == nil || v.text != "PASS" {
		t.Errorf("report.html not replaced: verdict %+v", v)
	}
	if fi, err := os.Stat(filepath.Join(dir, "report.html")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("report.html mode: %v %v", fi.Mode(), err)
	}
}

func TestWriteErrors(t *testing.T) {
	if err := Write(t.TempDir(), nil); err == nil {
		t.Error("Write of a nil report succeeded")
	}
	// The directory is a file.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Write(file, &Report{History: &history.History{}})
	if err == nil || !strings.HasPrefix(err.Error(), "report: ") {
		t.Errorf("Write into a file: %v, want an error", err)
	}
	// report.html is a directory: the rename fails and no temporary file
	// is left behind.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "report.html"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.html", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = Write(dir, &Report{})
	if err == nil || !strings.Contains(err.Error(), "report.html") {
		t.Errorf("Write over a directory: %v, want an error naming report.html", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
