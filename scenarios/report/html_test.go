package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// node is an element of a parsed page.
type node struct {
	name     string
	attr     map[string]string
	children []*node
	text     string // all text inside, concatenated
}

// parse parses page as XML (strictly: every element closed, every entity
// known), which a browser's HTML parser reads the same way.
func parse(t *testing.T, page []byte) *node {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	root := &node{name: "#document"}
	stack := []*node{root}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("report.html is not well-formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{name: tok.Name.Local, attr: map[string]string{}}
			for _, a := range tok.Attr {
				n.attr[a.Name.Local] = a.Value
			}
			top := stack[len(stack)-1]
			top.children = append(top.children, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			for _, n := range stack {
				n.text += string(tok)
			}
		}
	}
	if len(stack) != 1 {
		t.Fatalf("report.html leaves %d elements open", len(stack)-1)
	}
	return root
}

// all returns every element under n (n included) for which match holds.
func (n *node) all(match func(*node) bool) []*node {
	var out []*node
	if match(n) {
		out = append(out, n)
	}
	for _, c := range n.children {
		out = append(out, c.all(match)...)
	}
	return out
}

func (n *node) byID(id string) *node {
	found := n.all(func(m *node) bool { return m.attr["id"] == id })
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

func hasClass(name, class string) func(*node) bool {
	return func(n *node) bool {
		return (name == "" || n.name == name) && strings.Contains(" "+n.attr["class"]+" ", " "+class+" ")
	}
}

func render(t *testing.T, r *Report) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestHTMLShowsTheRun(t *testing.T) {
	r := synthetic()
	page := render(t, r)
	doc := parse(t, page)

	if v := doc.byID("verdict"); v == nil || strings.TrimSpace(v.text) != "FAIL" {
		t.Fatalf("verdict element: %+v, want FAIL", v)
	}
	if s := doc.byID("scenario"); s == nil || s.text != "leader-kill" {
		t.Errorf("scenario element: %+v", s)
	}
	if s := doc.byID("seed"); s == nil || s.text != "42" {
		t.Errorf("seed element: %+v", s)
	}

	rows := doc.all(hasClass("tr", "checker"))
	if len(rows) != len(r.Verdicts) {
		t.Fatalf("%d checker rows, want %d", len(rows), len(r.Verdicts))
	}
	wantStatus := []string{"FAIL", "OK", "skipped", "OK", "OK"}
	for i, row := range rows {
		name := row.all(hasClass("td", "name"))
		badge := row.all(hasClass("span", "badge"))
		if len(name) != 1 || name[0].text != r.Verdicts[i].Checker || len(badge) != 1 || badge[0].text != wantStatus[i] {
			t.Errorf("checker row %d: %q %q, want %q %q", i, name[0].text, badge[0].text, r.Verdicts[i].Checker, wantStatus[i])
		}
	}
	if !strings.Contains(rows[2].text, "no group events in this run") {
		t.Errorf("skipped row lacks its reason: %q", rows[2].text)
	}
	// The failing checker's violations, with their records.
	viol := doc.all(hasClass("div", "violation"))
	if len(viol) != 2 || !strings.Contains(viol[0].text, "record orders/0@7 is stored twice") || !strings.Contains(viol[0].text, "i-0-8") {
		t.Errorf("violations shown: %d, first %q", len(viol), viol[0].text)
	}

	svg := doc.all(func(n *node) bool { return n.name == "svg" })
	if len(svg) != 1 {
		t.Fatalf("%d svg elements, want 1", len(svg))
	}
	faults := svg[0].all(hasClass("rect", "fault"))
	if len(faults) != len(r.History.Faults) {
		t.Errorf("%d shaded fault rects, want %d", len(faults), len(r.History.Faults))
	}
	labels := svg[0].all(hasClass("text", "fault-label"))
	if len(labels) != 2 || !strings.Contains(labels[0].text, "kill leader") || !strings.Contains(labels[1].text, "split n3") {
		t.Errorf("fault labels: %v", labels)
	}
	// A lane per partition, and one for the metadata group.
	lanes := svg[0].all(hasClass("g", "lane"))
	wantLanes := []string{"metadata", "orders/0", "orders/1", "orders/2"}
	if len(lanes) != len(wantLanes) {
		t.Fatalf("%d leader lanes, want %d", len(lanes), len(wantLanes))
	}
	for i, l := range lanes {
		if !strings.Contains(l.text, wantLanes[i]) {
			t.Errorf("lane %d: %q, want %q", i, l.text, wantLanes[i])
		}
	}
	// orders/0 moves from node 1 to node 2: two rects of two colours.
	rects := lanes[1].all(func(n *node) bool { return n.name == "rect" })
	if len(rects) != 2 || rects[0].attr["fill"] == rects[1].attr["fill"] {
		t.Errorf("orders/0 lane: %d rects, want 2 of different colours", len(rects))
	}
	for _, class := range []string{"acked", "bad", "p50", "p99"} {
		if p := svg[0].all(hasClass("path", class)); len(p) != 1 || !strings.HasPrefix(p[0].attr["d"], "M") {
			t.Errorf("series %s: %v", class, p)
		}
	}

	faultRows := doc.all(hasClass("tr", "fault-row"))
	if len(faultRows) != 2 {
		t.Errorf("%d rows in the fault table, want 2", len(faultRows))
	} else if !strings.Contains(faultRows[0].text, "2.25 s (partition 1)") || !strings.Contains(faultRows[1].text, "–") {
		// The worst partition of fault 0; fault 1 was not measured.
		t.Errorf("fault table's failover: %q, %q", faultRows[0].text, faultRows[1].text)
	}
	summary := doc.byID("summary")
	for _, want := range []string{"1770", "acked", "failover max", "2.25 s", "recovery p50", "1.25 s", "2.50 s", "lost", "duplicated", "reordered", "–"} {
		if summary == nil || !strings.Contains(summary.text, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}

// TestHTMLLoadsNothing: the page fetches nothing and runs nothing: no
// scripts, no URLs but the SVG namespace, and a Content-Security-Policy
// that would block a load if one crept in.
func TestHTMLLoadsNothing(t *testing.T) {
	page := string(render(t, synthetic()))
	rest := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"http://", "https://", "<script", "<link", "<img", "<iframe", "@import", "url(", "src=", "href="} {
		if strings.Contains(strings.ToLower(rest), bad) {
			t.Errorf("report.html contains %q", bad)
		}
	}
	if n := strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`); n != 1 {
		t.Errorf("%d SVG namespace declarations, want 1", n)
	}
	if !strings.Contains(page, `content="default-src 'none'; style-src 'unsafe-inline'"`) {
		t.Error("report.html lacks its Content-Security-Policy")
	}
}

const hostile = `<script>alert("x")</script><img src=x onerror=alert(1)>&amp;'"`

// TestHTMLEscapes: whatever users named things shows as text.
func TestHTMLEscapes(t *testing.T) {
	r := synthetic()
	h := r.History
	h.Scenario = hostile
	h.Faults[0].Name = hostile
	h.Faults[0].Kind = hostile
	h.Topics[0].Name = hostile
	for i := range h.Leaders {
		if h.Leaders[i].Topic != "" {
			h.Leaders[i].Topic = hostile
		}
	}
	r.Command = hostile
	r.Summary[hostile] = 1
	r.Verdicts[0].Checker = hostile
	r.Verdicts[0].Description = hostile
	r.Verdicts[0].Stats[hostile] = 2
	r.Verdicts[0].Violations[0].What = hostile
	r.Verdicts[0].Violations[0].Records[0].Value = hostile
	r.Verdicts[0].Violations[0].Publishes[0].Err = hostile
	r.Verdicts[2].Skipped = hostile
	// Bytes that are not UTF-8 and characters XML forbids.
	r.Verdicts[0].Violations[1].Records[0].Key = "a\x00b\xff\x1bc"

	page := render(t, r)
	doc := parse(t, page)
	for _, name := range []string{"script", "img"} {
		if n := doc.all(func(n *node) bool { return n.name == name }); len(n) != 0 {
			t.Errorf("a user's text became a <%s> element", name)
		}
	}
	for _, n := range doc.all(func(*node) bool { return true }) {
		for a := range n.attr {
			if strings.HasPrefix(a, "on") || a == "src" {
				t.Errorf("a user's text became an attribute %s on <%s>", a, n.name)
			}
		}
	}
	if s := doc.byID("scenario"); s == nil || s.text != hostile {
		t.Errorf("scenario shows as %+v, want the text %q", s, hostile)
	}
	if title := doc.all(func(n *node) bool { return n.name == "title" }); !strings.Contains(title[0].text, hostile) {
		t.Errorf("page title %q lacks the scenario", title[0].text)
	}
	// Every place shows the text: count the escaped form's occurrences
	// among the texts (attributes hold the same, e.g. tooltips).
	if n := strings.Count(doc.text, hostile); n < 15 {
		t.Errorf("the hostile text shows %d times as text, want it everywhere it was put (at least 15)", n)
	}
	if !strings.Contains(doc.text, "a\uFFFDb\uFFFD\uFFFDc") {
		t.Error("invalid bytes and control characters are not replaced by U+FFFD")
	}
}

func TestHTMLEmptyHistories(t *testing.T) {
	for name, r := range map[string]*Report{
		"nil history":   {},
		"empty history": {History: &history.History{}, Passed: true},
		"no publishes": {History: &history.History{Scenario: "s", Start: t0, End: at(time.Minute),
			Topics: []history.Topic{{Name: "t", Partitions: 2}}}},
	} {
		t.Run(name, func(t *testing.T) {
			doc := parse(t, render(t, r))
			want := map[bool]string{true: "PASS", false: "FAIL"}[r.Passed]
			if v := doc.byID("verdict"); v == nil || v.text != want {
				t.Fatalf("verdict %+v, want %s", v, want)
			}
			if !strings.Contains(doc.text, "no publishes recorded") {
				t.Error("the chart does not say there were no publishes")
			}
			if !strings.Contains(doc.text, "No checker ran.") || !strings.Contains(doc.text, "No faults were injected.") {
				t.Error("empty tables are not explained")
			}
		})
	}
	// Declared partitions get a lane even without observations.
	doc := parse(t, render(t, &Report{History: &history.History{Start: t0, End: at(time.Minute), Topics: []history.Topic{{Name: "t", Partitions: 2}}}}))
	if lanes := doc.all(hasClass("g", "lane")); len(lanes) != 2 || !strings.Contains(lanes[0].text, "no leader reported") {
		t.Errorf("lanes without observations: %d", len(lanes))
	}
}

// TestHTMLSoak: a 30-minute run at 20 publishes per second keeps the page
// small: no series has more points than the plot has pixels.
func TestHTMLSoak(t *testing.T) {
	h := &history.History{Scenario: "soak", Start: t0, End: at(30 * time.Minute), Nodes: []uint64{1, 2, 3},
		Topics: []history.Topic{{Name: "t", Partitions: 4}}}
	for i := range 30 * 60 * 20 {
		s := at(time.Duration(i) * 50 * time.Millisecond)
		h.Publishes = append(h.Publishes, history.Publish{Seq: i, Start: s, End: s.Add(time.Duration(1+i%7) * time.Millisecond), Outcome: history.Acked})
	}
	for s := time.Duration(0); s < 30*time.Minute; s += time.Second {
		for p := range uint32(4) {
			leader := uint64(1 + (int(s/time.Minute)+int(p))%3) // a new leader every minute
			h.Leaders = append(h.Leaders, history.LeaderObs{At: at(s), Node: leader, Topic: "t", Partition: p, Term: uint64(s / time.Minute), Leader: leader})
		}
	}
	for i := range 30 {
		h.Faults = append(h.Faults, history.Fault{Kind: "kill", Targets: []uint64{uint64(1 + i%3)}, Start: at(time.Duration(i)*time.Minute + 10*time.Second), End: at(time.Duration(i)*time.Minute + 20*time.Second)})
	}
	page := render(t, &Report{History: h, Passed: true})
	doc := parse(t, page)
	for _, p := range doc.all(func(n *node) bool { return n.name == "path" }) {
		if n := strings.Count(p.attr["d"], "L") + strings.Count(p.attr["d"], "M"); n > maxChartPoints {
			t.Errorf("series %s has %d points, more than %d", p.attr["class"], n, maxChartPoints)
		}
	}
	if n := len(doc.all(hasClass("rect", "fault"))); n != 30 {
		t.Errorf("%d fault rects, want 30", n)
	}
	if n := len(doc.all(hasClass("g", "lane"))); n != 4 {
		t.Errorf("%d lanes, want 4", n)
	}
	if len(page) > 200<<10 {
		t.Errorf("report.html of a 30-minute run is %d KiB, want at most 200", len(page)>>10)
	}
	t.Logf("report.html of a 30-minute run: %d KiB", len(page)>>10)
}

func TestHTMLShowsFirstViolations(t *testing.T) {
	v := Verdict{Checker: "log"}
	for i := range 25 {
		x := Violation{What: fmt.Sprintf("violation %d", i)}
		for j := range 30 {
			x.Records = append(x.Records, history.Record{Offset: uint64(j)})
		}
		v.Violations = append(v.Violations, x)
	}
	doc := parse(t, render(t, &Report{Verdicts: []Verdict{v}}))
	shown := doc.all(hasClass("div", "violation"))
	if len(shown) != maxViolationsShown {
		t.Fatalf("%d violations shown, want %d", len(shown), maxViolationsShown)
	}
	if n := len(shown[0].all(func(n *node) bool { return n.name == "tr" })); n != maxRowsShown+1 {
		t.Errorf("%d record rows (with the header), want %d", n, maxRowsShown+1)
	}
	for _, want := range []string{"… and 15 more violations in report.json", "… and 10 more records in report.json", "first 10 of 25 violations"} {
		if !strings.Contains(doc.text, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if doc.all(func(n *node) bool { return n.name == "details" })[0].attr["open"] == "" {
		t.Error("a failing checker's violations are not open")
	}
}

func TestFormatFigure(t *testing.T) {
	for _, c := range []struct {
		k    string
		v    float64
		want string
	}{
		{"acked", 1770, "1770"},
		{"ratio", 0.123456, "0.1235"},
		{"recovery_p50_s", 1.25, "1.25 s"},
		{"recovery_p50_s", 0.0123, "12.3 ms"},
		{"p99_ms", 850, "850.0 ms"},
		{"p99_ms", 1500, "1.50 s"},
		{"x", 1e300, "1e+300"},
	} {
		if got := formatFigure(c.k, c.v); got != c.want {
			t.Errorf("formatFigure(%q, %v) = %q, want %q", c.k, c.v, got, c.want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0:00", 90 * time.Second: "1:30", 90 * time.Minute: "1:30:00", 1500 * time.Millisecond: "1.5s"} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
}
