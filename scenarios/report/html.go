package report

import (
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rewind-io/rewind/scenarios/history"
)

//go:embed report.tmpl
var pageText string

var pageTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"n": num,
}).Parse(pageText))

// What the page shows of a verdict's violations; report.json has all.
const (
	maxViolationsShown = 10
	maxRowsShown       = 20  // records or publishes per violation
	maxTextShown       = 120 // runes of a key, value or error
)

// HTML writes report.html's content for r to w: one self-contained page
// (see the package documentation). It is also well-formed XML.
func HTML(w io.Writer, r *Report) error {
	if r == nil {
		return errors.New("report: nil report")
	}
	if err := pageTmpl.Execute(w, newPage(r)); err != nil {
		return fmt.Errorf("report: rendering report.html: %w", err)
	}
	return nil
}

// page is what the template shows: every text and figure formatted, every
// coordinate computed.
type page struct {
	Scenario string
	Seed     int64
	Command  string
	Started  string
	Duration string
	Nodes    string
	Passed   bool
	Summary  []figure
	Bounds   []figure
	Verdicts []verdictView
	Chart    *chart
	Faults   []faultRow
}

type figure struct{ Name, Value string }

type verdictView struct {
	Checker, Description string
	Status               string // OK, FAIL, skipped
	Class                string // ok, fail, skip
	Reason               string
	Count                int
	Stats                string
	Shown                []violationView
	More                 int // violations not shown
}

type violationView struct {
	What          string
	Records       []recordRow
	MoreRecords   int
	Publishes     []publishRow
	MorePublishes int
}

type recordRow struct {
	Partition, Offset    string
	Key, Value, IdemKey  text
	AppendTime, FullTime string
}

type publishRow struct {
	Publisher, Seq                    string
	Topic, Key, IdemKey, Value, Err   text
	Outcome, Partition, Offset, MsgID string
	Start, End                        string
	Duplicate                         bool
}

// text is a user-supplied string, shortened for a table cell, with the
// full string for the cell's tooltip.
type text struct{ Short, Full string }

type faultRow struct {
	Name, Kind, Targets string
	Start, End, Length  string
	// Failover is the liveness checker's failover time of the fault's
	// worst partition, and which partition ("–": not measured).
	Failover string
}

func newPage(r *Report) *page {
	h := historyOf(r)
	origin, end := span(h)
	p := &page{
		Scenario: clean(h.Scenario),
		Seed:     h.Seed,
		Command:  clean(r.Command),
		Duration: end.Sub(origin).Round(100 * time.Millisecond).String(),
		Nodes:    joinIDs(h.Nodes),
		Passed:   r.Passed,
		Summary:  figures(r.Summary),
	}
	if !origin.IsZero() {
		p.Started = origin.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	b := h.Bounds
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"failover within", b.FailoverWithin}, {"recover within", b.RecoverWithin}, {"publish p99 during a fault", b.PublishP99During}, {"publish p99 after a fault", b.PublishP99After}} {
		if f.d != 0 {
			p.Bounds = append(p.Bounds, figure{f.name, f.d.String()})
		}
	}
	for _, v := range r.Verdicts {
		p.Verdicts = append(p.Verdicts, newVerdictView(v, origin))
	}
	spans := faultSpans(h, origin, end)
	live := livenessStats(r)
	for i, f := range spans {
		p.Faults = append(p.Faults, faultRow{
			Name: clean(f.Name), Kind: clean(f.Kind), Targets: joinIDs(f.Targets),
			Start: seconds(f.Start), End: seconds(f.End), Length: seconds(f.End - f.Start),
			Failover: failoverOf(live, i),
		})
	}
	p.Chart = newChart(h, origin, end, spans)
	return p
}

func newVerdictView(v Verdict, origin time.Time) verdictView {
	vv := verdictView{Checker: clean(v.Checker), Description: clean(v.Description), Count: len(v.Violations)}
	switch {
	case v.Skipped != "":
		vv.Status, vv.Class, vv.Reason = "skipped", "skip", clean(v.Skipped)
	case v.OK:
		vv.Status, vv.Class = "OK", "ok"
	default:
		vv.Status, vv.Class = "FAIL", "fail"
	}
	var stats []string
	for _, k := range sortedKeys(v.Stats) {
		stats = append(stats, clean(label(k))+" "+formatFigure(k, v.Stats[k]))
	}
	vv.Stats = strings.Join(stats, " · ")
	for i, x := range v.Violations {
		if i == maxViolationsShown {
			vv.More = len(v.Violations) - i
			break
		}
		vv.Shown = append(vv.Shown, newViolationView(x, origin))
	}
	return vv
}

func newViolationView(x Violation, origin time.Time) violationView {
	vv := violationView{What: clean(x.What)}
	for i, rec := range x.Records {
		if i == maxRowsShown {
			vv.MoreRecords = len(x.Records) - i
			break
		}
		row := recordRow{
			Partition: strconv.FormatUint(uint64(rec.Partition), 10),
			Offset:    strconv.FormatUint(rec.Offset, 10),
			Key:       short(rec.Key), Value: short(rec.Value), IdemKey: short(rec.IdemKey),
		}
		if !rec.AppendTime.IsZero() {
			row.AppendTime = rec.AppendTime.UTC().Format("15:04:05.000000")
			row.FullTime = rec.AppendTime.UTC().Format(time.RFC3339Nano)
		}
		vv.Records = append(vv.Records, row)
	}
	for i, pb := range x.Publishes {
		if i == maxRowsShown {
			vv.MorePublishes = len(x.Publishes) - i
			break
		}
		row := publishRow{
			Publisher: strconv.Itoa(pb.Publisher), Seq: strconv.Itoa(pb.Seq),
			Topic: short(pb.Topic), Key: short(pb.Key), IdemKey: short(pb.IdemKey), Value: short(pb.Value),
			Err: short(pb.Err), Outcome: clean(string(pb.Outcome)), MsgID: clean(pb.MessageID), Duplicate: pb.Duplicate,
			Start: offset(pb.Start, origin), End: offset(pb.End, origin),
		}
		if pb.Outcome == history.Acked {
			row.Partition = strconv.FormatUint(uint64(pb.Partition), 10)
			row.Offset = strconv.FormatUint(pb.Offset, 10)
		}
		vv.Publishes = append(vv.Publishes, row)
	}
	return vv
}

// figureOrder is the order of the summary's well-known figures; the rest
// follow by name.
var figureOrder = []string{"operations", "acked", "failed", "unknown", "lost", "duplicated", "reordered", "failover_max_s", "failover_p50_s", "recovery_p50_s", "recovery_max_s"}

var figureLabels = map[string]string{
	"failover_max_s": "failover max", "failover_p50_s": "failover p50",
	"recovery_p50_s": "recovery p50", "recovery_max_s": "recovery max",
}

// livenessStats are the liveness checker's figures (nil: no such verdict).
func livenessStats(r *Report) map[string]float64 {
	for _, v := range r.Verdicts {
		if v.Checker == "liveness" {
			return v.Stats
		}
	}
	return nil
}

// failoverOf formats fault i's failover time and its worst partition from
// the liveness checker's figures (fault<i>.p<P>.failover_s).
func failoverOf(live map[string]float64, i int) string {
	prefix := fmt.Sprintf("fault%d.p", i)
	worst, at := -1.0, ""
	for _, k := range sortedKeys(live) {
		if p, ok := strings.CutPrefix(k, prefix); ok {
			if p, ok := strings.CutSuffix(p, ".failover_s"); ok && live[k] > worst {
				worst, at = live[k], p
			}
		}
	}
	if worst < 0 || math.IsNaN(worst) || math.IsInf(worst, 0) {
		return "–"
	}
	return fmt.Sprintf("%s (partition %s)", seconds(time.Duration(worst*float64(time.Second))), clean(at))
}

func figures(s Summary) []figure {
	var out []figure
	for _, k := range figureOrder {
		if v, ok := s[k]; ok {
			out = append(out, figure{label(k), formatFigure(k, v)})
		}
	}
	for _, k := range sortedKeys(s) {
		if !slices.Contains(figureOrder, k) {
			out = append(out, figure{clean(label(k)), formatFigure(k, s[k])})
		}
	}
	return out
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func label(k string) string {
	if l, ok := figureLabels[k]; ok {
		return l
	}
	k = strings.TrimSuffix(strings.TrimSuffix(k, "_ms"), "_s")
	return strings.ReplaceAll(k, "_", " ")
}

// formatFigure formats v by its name's unit suffix.
func formatFigure(k string, v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case strings.HasSuffix(k, "_ms"):
		return seconds(time.Duration(v * float64(time.Millisecond)))
	case strings.HasSuffix(k, "_s"):
		return seconds(time.Duration(v * float64(time.Second)))
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

// seconds formats d for a reader: "850 ms", "12.35 s".
func seconds(d time.Duration) string {
	if d > -time.Second && d < time.Second {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

// offset formats t as an offset from origin.
func offset(t, origin time.Time) string {
	if t.IsZero() {
		return ""
	}
	return "+" + strconv.FormatFloat(t.Sub(origin).Seconds(), 'f', 3, 64) + " s"
}

func joinIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ", ")
}

func short(s string) text {
	s = clean(s)
	r := []rune(s)
	if len(r) <= maxTextShown {
		return text{s, s}
	}
	return text{string(r[:maxTextShown]) + "…", s}
}

// num formats a coordinate with one decimal at most.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

// clean makes a user-supplied string safe to show in a page that must
// also be well-formed XML: invalid UTF-8 and the control characters XML
// forbids become U+FFFD. (Escaping markup is html/template's job.)
func clean(s string) string {
	ok := true
	for _, r := range s {
		if r == utf8.RuneError || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0xFFFE || r == 0xFFFF {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0xFFFE || r == 0xFFFF {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}
