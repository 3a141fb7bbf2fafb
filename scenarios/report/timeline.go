package report

import (
	"cmp"
	"slices"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// Point is one bucket of a run's publish timeline.
type Point struct {
	// T is the offset of the bucket's start from the start of the run.
	T time.Duration
	// Acked, Failed and Unknown count the publishes that ended in the
	// bucket, by outcome.
	Acked, Failed, Unknown int
	// P50 and P99 are percentiles (nearest rank) of the latency, End -
	// Start, of the acknowledged publishes that ended in the bucket; zero
	// when Acked is zero.
	P50, P99 time.Duration
}

// maxPoints bounds the length of a timeline, so a run whose recorded end
// is far off (or a tiny bucket) cannot make Timeline allocate without
// limit.
const maxPoints = 1 << 14

// Timeline buckets h's publishes by the time each ended, from the start of
// the run to its end (or the last publish's end, if later). A bucket of
// zero or less means one second. When the run would take more than 2^14
// buckets (4.5 hours of seconds), the bucket is doubled until it fits: Point.T tells the width.
// A publish without an end time is left out; one that ended before the
// start of the run counts in the first bucket. Nil or empty histories give
// an empty timeline. The returned slice is the caller's.
func Timeline(h *history.History, bucket time.Duration) []Point {
	if h == nil {
		return nil
	}
	if bucket <= 0 {
		bucket = time.Second
	}
	origin, end := span(h)
	last := end.Sub(origin)
	for _, p := range h.Publishes {
		if !p.End.IsZero() && p.End.Sub(origin) > last {
			last = p.End.Sub(origin)
		}
	}
	if last <= 0 && !hasEnded(h.Publishes) {
		return nil
	}
	n := int64(last/bucket) + 1
	for n > maxPoints {
		bucket *= 2
		n = int64(last/bucket) + 1
	}
	// A run that ends exactly on a bucket boundary has no publish in the
	// bucket that starts there unless one ended at that very instant.
	if last > 0 && last%bucket == 0 && !endsAt(h.Publishes, origin.Add(last)) {
		n--
	}
	pts := make([]Point, n)
	lat := make([][]time.Duration, n)
	for i := range pts {
		pts[i].T = time.Duration(i) * bucket
	}
	for _, p := range h.Publishes {
		if p.End.IsZero() {
			continue
		}
		// At most n-1, even where Sub saturates (times centuries apart).
		i := min(int64(max(p.End.Sub(origin), 0)/bucket), n-1)
		switch p.Outcome {
		case history.Acked:
			pts[i].Acked++
			lat[i] = append(lat[i], max(p.End.Sub(p.Start), 0))
		case history.Failed:
			pts[i].Failed++
		default:
			pts[i].Unknown++
		}
	}
	for i, l := range lat {
		if len(l) == 0 {
			continue
		}
		slices.Sort(l)
		pts[i].P50 = percentile(l, 50)
		pts[i].P99 = percentile(l, 99)
	}
	return pts
}

func hasEnded(ps []history.Publish) bool {
	for _, p := range ps {
		if !p.End.IsZero() {
			return true
		}
	}
	return false
}

func endsAt(ps []history.Publish, t time.Time) bool {
	for _, p := range ps {
		if p.End.Equal(t) {
			return true
		}
	}
	return false
}

// percentile returns the nearest-rank q-th percentile of sorted, which is
// not empty.
func percentile(sorted []time.Duration, q int) time.Duration {
	rank := (q*len(sorted) + 99) / 100 // ceil(q/100 * n)
	return sorted[max(rank, 1)-1]
}

// span returns the start and end of h's run: its recorded Start and End,
// or, when those are missing, the earliest and latest times in what it
// observed. End is never before start.
func span(h *history.History) (start, end time.Time) {
	var first, last time.Time
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if last.IsZero() || t.After(last) {
			last = t
		}
	}
	for _, p := range h.Publishes {
		see(p.Start)
		see(p.End)
	}
	for _, f := range h.Faults {
		see(f.Start)
		see(f.End)
	}
	for _, o := range h.Leaders {
		see(o.At)
	}
	start, end = h.Start, h.End
	if start.IsZero() {
		start = first
	}
	if !end.After(start) {
		end = last
	}
	if end.Before(start) {
		end = start
	}
	return start, end
}

// faultSpans returns h's faults as offsets from origin, clamped to the
// run: one that never ended ends at end, one that ended before it began
// ends when it began.
func faultSpans(h *history.History, origin, end time.Time) []FaultSpan {
	out := make([]FaultSpan, 0, len(h.Faults))
	for _, f := range h.Faults {
		s := FaultSpan{Name: f.Name, Kind: f.Kind, Targets: f.Targets}
		s.Start = max(f.Start.Sub(origin), 0)
		if f.Start.IsZero() {
			s.Start = 0
		}
		s.End = max(f.End.Sub(origin), s.Start)
		if f.End.IsZero() {
			s.End = max(end.Sub(origin), s.Start)
		}
		out = append(out, s)
	}
	return out
}

// Lane is the leader of one raft group over the run.
type Lane struct {
	Topic     string // empty: the metadata group
	Partition uint32
	// Segments are in time order and do not overlap; between the start of
	// the run and the first observation there is none.
	Segments []Segment
}

// Segment is a stretch of time with one leader in one term.
type Segment struct {
	Start, End time.Duration // offsets from the start of the run
	Leader     uint64        // 0: no leader known
	Term       uint64
}

type group struct {
	topic     string
	partition uint32
}

// maxDeclaredLanes bounds the lanes made for a topic's declared partitions
// that nobody reported a leader for.
const maxDeclaredLanes = 1024

// Leaders returns a lane per raft group: the metadata group if any node
// reported on it, then every partition of h.Topics in order, then any
// other group a node reported on. At each moment a lane shows the view
// with the highest term among the latest view of every node (a node that
// lags or was cut off holds an older term); in a tie, a view that names a
// leader wins over one that names none, and a later view over an earlier
// one. A lane with no observations has no segments. The returned slices
// are the caller's.
func Leaders(h *history.History) []Lane {
	if h == nil {
		return nil
	}
	origin, end := span(h)
	byGroup := map[group][]history.LeaderObs{}
	for _, o := range h.Leaders {
		g := group{o.Topic, o.Partition}
		byGroup[g] = append(byGroup[g], o)
	}
	var order []group
	seen := map[group]bool{}
	add := func(g group) {
		if !seen[g] {
			seen[g] = true
			order = append(order, g)
		}
	}
	if _, ok := byGroup[group{}]; ok {
		add(group{})
	}
	for _, t := range h.Topics {
		for p := range min(t.Partitions, maxDeclaredLanes) {
			add(group{t.Name, p})
		}
	}
	var rest []group
	for g := range byGroup {
		if !seen[g] {
			rest = append(rest, g)
		}
	}
	slices.SortFunc(rest, func(a, b group) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	for _, g := range rest {
		add(g)
	}
	lanes := make([]Lane, len(order))
	for i, g := range order {
		lanes[i] = Lane{Topic: g.topic, Partition: g.partition, Segments: segments(byGroup[g], origin, end)}
	}
	return lanes
}

// segments folds one group's observations into segments of one leader
// and term.
func segments(obs []history.LeaderObs, origin, end time.Time) []Segment {
	if len(obs) == 0 {
		return nil
	}
	obs = slices.Clone(obs)
	slices.SortStableFunc(obs, func(a, b history.LeaderObs) int { return a.At.Compare(b.At) })
	latest := map[uint64]history.LeaderObs{} // node -> its latest view
	var segs []Segment
	for _, o := range obs {
		latest[o.Node] = o
		var best history.LeaderObs
		first := true
		for _, v := range latest {
			if first || better(v, best) {
				best, first = v, false
			}
		}
		at := max(o.At.Sub(origin), 0)
		if n := len(segs); n > 0 {
			cur := segs[n-1]
			if cur.Leader == best.Leader && cur.Term == best.Term {
				continue
			}
			if cur.Start == at { // a change at the same instant replaces it
				segs = segs[:n-1]
				if n > 1 && segs[n-2].Leader == best.Leader && segs[n-2].Term == best.Term {
					continue
				}
			}
		}
		segs = append(segs, Segment{Start: at, Leader: best.Leader, Term: best.Term})
	}
	stop := end.Sub(origin)
	for i := range segs {
		if i+1 < len(segs) {
			segs[i].End = segs[i+1].Start
		} else {
			segs[i].End = max(stop, segs[i].Start)
		}
	}
	return segs
}

// better reports whether view a beats view b: a higher term, then a known
// leader, then a later observation, then (for a deterministic answer) the
// lower node.
func better(a, b history.LeaderObs) bool {
	if a.Term != b.Term {
		return a.Term > b.Term
	}
	if (a.Leader != 0) != (b.Leader != 0) {
		return a.Leader != 0
	}
	if !a.At.Equal(b.At) {
		return a.At.After(b.At)
	}
	return a.Node < b.Node
}
