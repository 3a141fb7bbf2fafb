package report

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// The timeline chart: three panels (acked per second, latency p50/p99 on
// a log scale, a leader lane per raft group) sharing one time axis, with
// each fault shaded across all three. All coordinates are in SVG user
// units; the SVG scales to the page's width.
const (
	chartW      = 1000.0
	plotLeft    = 130.0
	plotRight   = 16.0
	plotW       = chartW - plotLeft - plotRight
	labelRowH   = 14.0
	maxLabelRow = 4
	panelH      = 130.0
	panelGap    = 26.0
	laneH       = 14.0
	laneStep    = 18.0
	// maxChartPoints bounds the points of a series: more than the plot
	// has pixels shows nothing more and only makes the page bigger. A
	// longer run is drawn with wider buckets (report.json keeps 1 s).
	maxChartPoints = 1000
)

// palette colours nodes in the leader lanes (the Tableau 10 colours).
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac"}

const noLeaderColour = "#e4e4e4"

type chart struct {
	H                   float64 // total height
	Left, Right, PlotW  float64
	Bucket              string // "1 s"
	XTicks              []tick
	Faults              []shade
	Through, Latency    panel
	Lanes               []laneView
	LanesTop, LanesBot  float64
	AxisY               float64
	Legend              []legendItem
	NoPublishes         bool
	NoLeaders           bool
	FaultsTop, PlotsBot float64
}

type tick struct {
	X, Y  float64 // X for time ticks, Y for value ticks
	Label string
}

type panel struct {
	Left, Right float64
	Top, Bottom float64
	Width       float64
	Height      float64
	Title       string
	YTicks      []tick
	Series      []series
}

type series struct {
	Class, Name string
	D           string // SVG path data
}

type shade struct {
	X, W, Y, H     float64
	LabelX, LabelY float64
	Label, Title   string
}

type laneView struct {
	Y, TextY     float64
	Label, Title string
	Rects        []laneRect
	Empty        bool
}

type laneRect struct {
	X, Y, W float64
	Colour  string
	Title   string
}

type legendItem struct {
	X, Y   float64
	Colour string
	Label  string
}

func newChart(h *history.History, origin, end time.Time, faults []FaultSpan) *chart {
	total := end.Sub(origin)
	bucket := time.Second
	if total > maxChartPoints*time.Second {
		bucket = (total + maxChartPoints*time.Second - 1) / (maxChartPoints * time.Second) * time.Second
	}
	pts := Timeline(h, bucket)
	total = max(total, time.Duration(len(pts))*bucket)
	lanes := Leaders(h)
	for _, l := range lanes {
		if n := len(l.Segments); n > 0 {
			total = max(total, l.Segments[n-1].End)
		}
	}
	for _, f := range faults {
		total = max(total, f.End)
	}
	if total <= 0 {
		total = time.Second
	}
	x := func(d time.Duration) float64 { return plotLeft + plotW*float64(d)/float64(total) }

	c := &chart{Left: plotLeft, Right: chartW - plotRight, PlotW: plotW, Bucket: strconv.FormatInt(int64(bucket/time.Second), 10) + " s"}
	// Fault labels sit in rows above the plots; a label goes in the first
	// row where it does not run into the previous one.
	rowEnd := make([]float64, maxLabelRow)
	for i := range rowEnd {
		rowEnd[i] = math.Inf(-1)
	}
	rows := make([]int, len(faults))
	used := 1
	for i, f := range faults {
		lx := x(f.Start) + 2
		w := 6.5 * float64(len([]rune(faultLabel(f))))
		row := 0
		for row < maxLabelRow && rowEnd[row] > lx {
			row++
		}
		if row == maxLabelRow {
			row = i % maxLabelRow
		}
		rowEnd[row] = lx + w + 6
		rows[i] = row
		used = max(used, row+1)
	}
	c.FaultsTop = 4
	top := c.FaultsTop + float64(used)*labelRowH + 4

	c.Through = newPanel(top, "acked publishes per second")
	c.Latency = newPanel(c.Through.Bottom+panelGap, "publish latency (log scale)")
	c.PlotsBot = c.Latency.Bottom
	c.NoPublishes = len(pts) == 0 || !anyPublish(pts)
	throughput(&c.Through, pts, bucket, x)
	latency(&c.Latency, pts, bucket, x)

	c.LanesTop = c.Latency.Bottom + panelGap
	colours := nodeColours(h, lanes)
	y := c.LanesTop
	for _, l := range lanes {
		lv := laneView{Y: y, TextY: y + laneH - 3, Label: laneLabel(l), Empty: len(l.Segments) == 0}
		lv.Title = lv.Label
		if len([]rune(lv.Label)) > 18 {
			lv.Label = string([]rune(lv.Label)[:17]) + "…"
		}
		for _, s := range l.Segments {
			r := laneRect{X: x(s.Start), Y: y, W: max(x(s.End)-x(s.Start), 0.5), Colour: noLeaderColour}
			who := "no leader"
			if s.Leader != 0 {
				r.Colour = colours[s.Leader]
				who = "leader node " + strconv.FormatUint(s.Leader, 10)
			}
			r.Title = who + ", term " + strconv.FormatUint(s.Term, 10) + ", " + seconds(s.Start) + " – " + seconds(s.End)
			lv.Rects = append(lv.Rects, r)
		}
		c.Lanes = append(c.Lanes, lv)
		y += laneStep
	}
	c.NoLeaders = len(lanes) == 0
	if c.NoLeaders {
		y += laneStep
	}
	c.LanesBot = y
	c.AxisY = y + 12
	ticks, step := timeTicks(total)
	for _, t := range ticks {
		l := clock(t)
		if step < time.Second { // a run of under ten seconds
			l = strconv.FormatFloat(t.Seconds(), 'f', 1, 64) + "s"
		}
		c.XTicks = append(c.XTicks, tick{X: x(t), Label: l})
	}

	for i, f := range faults {
		sx, ex := x(f.Start), x(f.End)
		c.Faults = append(c.Faults, shade{
			X: sx, W: max(ex-sx, 2), Y: c.FaultsTop + float64(rows[i])*labelRowH, H: c.LanesBot - c.FaultsTop - float64(rows[i])*labelRowH,
			LabelX: sx + 2, LabelY: c.FaultsTop + float64(rows[i])*labelRowH + 10,
			Label: faultLabel(f),
			Title: clean(f.Kind) + " on " + targets(f.Targets) + ", " + seconds(f.Start) + " – " + seconds(f.End),
		})
	}

	// The legend: a colour per node, ten to a row.
	lx, ly := plotLeft, c.AxisY+22
	item := func(colour, label string) {
		if lx+80 > chartW {
			lx, ly = plotLeft, ly+16
		}
		c.Legend = append(c.Legend, legendItem{X: lx, Y: ly, Colour: colour, Label: label})
		lx += 80
	}
	for _, id := range sortedIDs(colours) {
		item(colours[id], "node "+strconv.FormatUint(id, 10))
	}
	item(noLeaderColour, "no leader")
	c.H = ly + 10
	return c
}

func newPanel(top float64, title string) panel {
	return panel{Left: plotLeft, Right: chartW - plotRight, Width: plotW, Top: top, Bottom: top + panelH, Height: panelH, Title: title}
}

func anyPublish(pts []Point) bool {
	for _, p := range pts {
		if p.Acked+p.Failed+p.Unknown > 0 {
			return true
		}
	}
	return false
}

func throughput(p *panel, pts []Point, bucket time.Duration, x func(time.Duration) float64) {
	top := 0.0
	for _, pt := range pts {
		top = max(top, float64(pt.Acked), float64(pt.Failed+pt.Unknown))
	}
	top /= bucket.Seconds()
	step := niceStep(top / 4)
	top = max(step, math.Ceil(top/step)*step)
	y := func(v float64) float64 { return p.Bottom - (p.Bottom-p.Top)*v/top }
	for v := 0.0; v <= top+step/2; v += step {
		p.YTicks = append(p.YTicks, tick{Y: y(v), Label: strconv.FormatFloat(v, 'g', 4, 64)})
	}
	var acked, bad path
	for _, pt := range pts {
		cx := x(pt.T + bucket/2)
		acked.to(cx, y(float64(pt.Acked)/bucket.Seconds()))
		bad.to(cx, y(float64(pt.Failed+pt.Unknown)/bucket.Seconds()))
	}
	p.Series = []series{{"acked", "acked", acked.String()}, {"bad", "failed or unknown", bad.String()}}
}

func latency(p *panel, pts []Point, bucket time.Duration, x func(time.Duration) float64) {
	lo, hi := math.Inf(1), 0.0
	for _, pt := range pts {
		if pt.Acked == 0 {
			continue
		}
		if pt.P50 > 0 {
			lo = min(lo, ms(pt.P50))
		}
		hi = max(hi, ms(pt.P99))
	}
	if math.IsInf(lo, 1) {
		lo = min(1, max(hi, 0.1))
	}
	// Whole decades of milliseconds, from below the lowest p50 to above
	// the highest p99.
	loExp := max(int(math.Floor(math.Log10(lo))), -2) // 10 µs at least: lower only crowds the axis
	hiExp := max(int(math.Ceil(math.Log10(max(hi, lo)))), loExp+1)
	lo, hi = math.Pow10(loExp), math.Pow10(hiExp)
	y := func(v float64) float64 {
		v = min(max(v, lo), hi)
		return p.Bottom - (p.Bottom-p.Top)*math.Log10(v/lo)/float64(hiExp-loExp)
	}
	for e := loExp; e <= hiExp; e++ {
		p.YTicks = append(p.YTicks, tick{Y: y(math.Pow10(e)), Label: decade(e)})
	}
	var p50, p99 path
	for _, pt := range pts {
		if pt.Acked == 0 {
			p50.gap()
			p99.gap()
			continue
		}
		cx := x(pt.T + bucket/2)
		p50.to(cx, y(ms(pt.P50)))
		p99.to(cx, y(ms(pt.P99)))
	}
	p.Series = []series{{"p50", "p50", p50.String()}, {"p99", "p99", p99.String()}}
}

// decade names 10^e milliseconds: "0.1 ms", "10 ms", "1 s".
func decade(e int) string {
	if e >= 3 {
		return strconv.FormatFloat(math.Pow10(e-3), 'f', -1, 64) + " s"
	}
	return strconv.FormatFloat(math.Pow10(e), 'f', -1, 64) + " ms"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// path builds SVG path data; gap breaks the line.
type path struct {
	b    strings.Builder
	open bool
}

func (p *path) to(x, y float64) {
	if p.open {
		p.b.WriteString("L")
	} else {
		p.b.WriteString("M")
	}
	p.b.WriteString(num(x))
	p.b.WriteString(" ")
	p.b.WriteString(num(y))
	p.open = true
}

func (p *path) gap() { p.open = false }

func (p *path) String() string { return p.b.String() }

// niceStep rounds v up to 1, 2 or 5 times a power of ten (1 for v <= 0).
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= v*(1-1e-9) {
			return m * pow
		}
	}
	return 10 * pow
}

// timeTicks returns at most 11 round offsets from 0 to total, and the
// step between them.
func timeTicks(total time.Duration) ([]time.Duration, time.Duration) {
	steps := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if total/s <= 10 {
			step = s
			break
		}
	}
	for total/step > 10 { // runs of many hours
		step *= 2
	}
	var out []time.Duration
	for i := range total/step + 1 { // not t += step: it overflows near the longest duration
		out = append(out, i*step)
	}
	return out, step
}

// clock formats an offset as m:ss (h:mm:ss past an hour; seconds with a
// decimal when d is not whole seconds).
func clock(d time.Duration) string {
	if d%time.Second != 0 {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	s := int64(d / time.Second)
	if s >= 3600 {
		return strconv.FormatInt(s/3600, 10) + ":" + two(s/60%60) + ":" + two(s%60)
	}
	return strconv.FormatInt(s/60, 10) + ":" + two(s%60)
}

func two(v int64) string {
	if v < 10 {
		return "0" + strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10)
}

func faultLabel(f FaultSpan) string {
	l := f.Name
	if l == "" {
		l = f.Kind + " " + targets(f.Targets)
	}
	l = clean(l)
	if r := []rune(l); len(r) > 24 {
		l = string(r[:23]) + "…"
	}
	return l
}

func targets(ids []uint64) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = "n" + strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ",")
}

func laneLabel(l Lane) string {
	if l.Topic == "" {
		return "metadata"
	}
	return clean(l.Topic) + "/" + strconv.FormatUint(uint64(l.Partition), 10)
}

// nodeColours gives every node a colour: the run's nodes in their order,
// then any other node a lane names, by id.
func nodeColours(h *history.History, lanes []Lane) map[uint64]string {
	colours := map[uint64]string{}
	next := 0
	give := func(id uint64) {
		if _, ok := colours[id]; !ok && id != 0 {
			colours[id] = palette[next%len(palette)]
			next++
		}
	}
	for _, id := range h.Nodes {
		give(id)
	}
	var others []uint64
	for _, l := range lanes {
		for _, s := range l.Segments {
			if _, ok := colours[s.Leader]; !ok && s.Leader != 0 {
				others = append(others, s.Leader)
			}
		}
	}
	slices.Sort(others)
	for _, id := range others {
		give(id)
	}
	return colours
}

func sortedIDs(m map[uint64]string) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
