package report

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rewind-io/rewind/scenarios/history"
)

func pub(start, end time.Duration, o history.Outcome) history.Publish {
	return history.Publish{Start: at(start), End: at(end), Outcome: o}
}

func TestTimeline(t *testing.T) {
	const ms = time.Millisecond
	h := &history.History{Start: t0, End: at(3 * time.Second)}
	// Bucket 0: 100 acked with latencies 1..100 ms, ending in [0.5 s, 0.6 s).
	for i := range 100 {
		end := 500*ms + time.Duration(i)*ms/2
		h.Publishes = append(h.Publishes, pub(end-time.Duration(i+1)*ms, end, history.Acked))
	}
	h.Publishes = append(h.Publishes,
		pub(900*ms, 1500*ms, history.Failed),
		pub(900*ms, 1999*ms, history.Unknown),
		pub(1900*ms, 2*time.Second, history.Acked),              // ends on a boundary: bucket 2
		pub(-time.Second, -500*ms, history.Acked),               // ended before the start: bucket 0
		history.Publish{Start: at(0), Outcome: history.Unknown}, // never ended: left out
	)
	got := Timeline(h, time.Second)
	want := []Point{
		// 1..100 ms and 500 ms: nearest ranks 51 and 100 of 101.
		{T: 0, Acked: 101, P50: 51 * ms, P99: 100 * ms},
		{T: time.Second, Failed: 1, Unknown: 1},
		{T: 2 * time.Second, Acked: 1, P50: 100 * ms, P99: 100 * ms},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Timeline (-want +got):\n%s", d)
	}

	// Wider buckets fold the same publishes; a zero bucket means 1 s.
	if got := Timeline(h, 2*time.Second); len(got) != 2 || got[0].Acked != 101 || got[1].Acked != 1 || got[1].T != 2*time.Second {
		t.Errorf("2 s buckets: %+v", got)
	}
	if d := cmp.Diff(want, Timeline(h, 0)); d != "" {
		t.Errorf("zero bucket (-want +got):\n%s", d)
	}
}

func TestTimelineEdges(t *testing.T) {
	if got := Timeline(nil, time.Second); got != nil {
		t.Errorf("nil history: %v", got)
	}
	if got := Timeline(&history.History{}, time.Second); got != nil {
		t.Errorf("empty history: %v", got)
	}
	// No publishes: a bucket per second of the run, all empty.
	if got := Timeline(&history.History{Start: t0, End: at(5 * time.Second)}, time.Second); len(got) != 5 || got[4].T != 4*time.Second {
		t.Errorf("run without publishes: %+v", got)
	}
	// No recorded start or end: the run spans what was observed.
	h := &history.History{Publishes: []history.Publish{pub(10*time.Second, 10500*time.Millisecond, history.Acked), pub(12*time.Second, 13500*time.Millisecond, history.Acked)}}
	if got := Timeline(h, time.Second); len(got) != 4 || got[0].Acked != 1 || got[3].Acked != 1 {
		t.Errorf("run without start: %+v", got)
	}
	// A publish ending after the recorded end extends the timeline.
	h = &history.History{Start: t0, End: at(time.Second), Publishes: []history.Publish{pub(0, 2500*time.Millisecond, history.Acked)}}
	if got := Timeline(h, time.Second); len(got) != 3 || got[2].Acked != 1 {
		t.Errorf("publish after the end: %+v", got)
	}
	// An end far away widens the buckets instead of allocating without limit.
	h = &history.History{Start: t0, End: at(1000 * time.Hour)}
	got := Timeline(h, time.Millisecond)
	if len(got) > maxPoints || len(got) < maxPoints/2 {
		t.Errorf("1000 h in 1 ms buckets: %d points, want between %d and %d", len(got), maxPoints/2, maxPoints)
	}
}

func obs(at0 time.Duration, node, term, leader uint64) history.LeaderObs {
	return history.LeaderObs{At: at(at0), Node: node, Topic: "t", Term: term, Leader: leader}
}

func TestLeaderSegments(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name string
		obs  []history.LeaderObs
		want []Segment
	}{{
		name: "one leader, reported by all",
		obs:  []history.LeaderObs{obs(0, 1, 1, 1), obs(0, 2, 1, 1), obs(1*s, 3, 1, 1)},
		want: []Segment{{0, 10 * s, 1, 1}},
	}, {
		name: "failover: an election without a leader, then node 2",
		obs:  []history.LeaderObs{obs(0, 2, 1, 1), obs(2*s, 2, 2, 0), obs(3*s, 3, 2, 2), obs(3*s, 2, 2, 2)},
		want: []Segment{{0, 2 * s, 1, 1}, {2 * s, 3 * s, 0, 2}, {3 * s, 10 * s, 2, 2}},
	}, {
		name: "a lagging node's older term does not count",
		obs:  []history.LeaderObs{obs(0, 2, 3, 2), obs(1*s, 1, 2, 1), obs(2*s, 1, 3, 2)},
		want: []Segment{{0, 10 * s, 2, 3}},
	}, {
		name: "a node without a leader in the same term loses to one with",
		obs:  []history.LeaderObs{obs(0, 2, 3, 2), obs(1*s, 1, 3, 0)},
		want: []Segment{{0, 10 * s, 2, 3}},
	}, {
		name: "changes at one instant leave no empty segment",
		obs:  []history.LeaderObs{obs(0, 1, 1, 1), obs(4*s, 2, 2, 0), obs(4*s, 3, 2, 3)},
		want: []Segment{{0, 4 * s, 1, 1}, {4 * s, 10 * s, 3, 2}},
	}, {
		name: "a change undone at the same instant leaves one segment",
		// Node 2's term goes back: it restarted from an old copy.
		obs:  []history.LeaderObs{obs(0, 1, 1, 1), obs(4*s, 2, 2, 0), obs(4*s, 2, 1, 1)},
		want: []Segment{{0, 10 * s, 1, 1}},
	}, {
		name: "same node re-elected in a new term",
		obs:  []history.LeaderObs{obs(0, 1, 1, 1), obs(5*s, 1, 2, 1)},
		want: []Segment{{0, 5 * s, 1, 1}, {5 * s, 10 * s, 1, 2}},
	}, {
		name: "observations out of order, one before the start",
		obs:  []history.LeaderObs{obs(6*s, 1, 2, 2), obs(-s, 1, 1, 1)},
		want: []Segment{{0, 6 * s, 1, 1}, {6 * s, 10 * s, 2, 2}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			h := &history.History{Start: t0, End: at(10 * s), Topics: []history.Topic{{Name: "t", Partitions: 1}}, Leaders: c.obs}
			lanes := Leaders(h)
			if len(lanes) != 1 {
				t.Fatalf("%d lanes, want 1", len(lanes))
			}
			if d := cmp.Diff(c.want, lanes[0].Segments); d != "" {
				t.Errorf("segments (-want +got):\n%s", d)
			}
		})
	}
}

func TestLeaderLanes(t *testing.T) {
	h := &history.History{
		Start: t0, End: at(time.Second),
		Topics: []history.Topic{{Name: "b", Partitions: 2}, {Name: "a", Partitions: 1}},
		Leaders: []history.LeaderObs{
			{Topic: "z", Partition: 1, Node: 1, Term: 1, Leader: 1, At: t0},
			{Topic: "b", Partition: 1, Node: 1, Term: 1, Leader: 1, At: t0},
			{Topic: "", Node: 1, Term: 1, Leader: 1, At: t0},
			{Topic: "z", Partition: 0, Node: 1, Term: 1, Leader: 1, At: t0},
		},
	}
	var got []string
	for _, l := range Leaders(h) {
		got = append(got, laneLabel(l))
	}
	// The metadata group, the declared partitions in order, then the rest.
	want := []string{"metadata", "b/0", "b/1", "a/0", "z/0", "z/1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lanes (-want +got):\n%s", d)
	}
	if Leaders(nil) != nil {
		t.Error("Leaders(nil) is not empty")
	}
}

func TestFaultSpans(t *testing.T) {
	h := &history.History{Start: t0, End: at(60 * time.Second), Faults: []history.Fault{
		{Kind: "kill", Start: at(10 * time.Second), End: at(20 * time.Second)},
		{Kind: "pause", Start: at(50 * time.Second)},                           // never healed: ends with the run
		{Kind: "cut", Start: at(30 * time.Second), End: at(29 * time.Second)},  // ended before it began
		{Kind: "skew", Start: at(-5 * time.Second), End: at(5 * time.Second)},  // began before the run
		{Kind: "late", Start: at(70 * time.Second), End: at(80 * time.Second)}, // after the recorded end
	}}
	origin, end := span(h)
	got := faultSpans(h, origin, end)
	want := []FaultSpan{
		{Kind: "kill", Start: 10 * time.Second, End: 20 * time.Second},
		{Kind: "pause", Start: 50 * time.Second, End: 60 * time.Second},
		{Kind: "cut", Start: 30 * time.Second, End: 30 * time.Second},
		{Kind: "skew", Start: 0, End: 5 * time.Second},
		{Kind: "late", Start: 70 * time.Second, End: 80 * time.Second},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("fault spans (-want +got):\n%s", d)
	}
}

// TestTimeTicksLongestRun: a run whose end is centuries after its start
// (a clock gone wrong) gets a few ticks; adding the step once overflowed
// and looped until memory ran out (found by FuzzReport).
func TestTimeTicksLongestRun(t *testing.T) {
	for _, total := range []time.Duration{0, time.Nanosecond, 9 * time.Second, time.Hour, 100 * time.Hour, math.MaxInt64 - 1, math.MaxInt64} {
		ticks, step := timeTicks(total)
		if len(ticks) < 1 || len(ticks) > 11 || ticks[len(ticks)-1] > total || total-ticks[len(ticks)-1] >= step {
			t.Errorf("timeTicks(%v): %d ticks, step %v, last %v", total, len(ticks), step, ticks[len(ticks)-1])
		}
	}
}
