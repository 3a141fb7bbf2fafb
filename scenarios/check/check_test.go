package check

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/scenarios/history"
)

// TestValidHistoriesPass is the property every checker must keep: a
// history a correct broker could produce (any seed of the generator:
// retention, ambiguous publishes, equal append times, reads that began
// before retention, failed reads, late commit answers, resets) is OK.
func TestValidHistoriesPass(t *testing.T) {
	totals := map[string]float64{}
	for seed := int64(1); seed <= 300; seed++ {
		h := generate(seed)
		for _, v := range All(h) {
			if !v.OK || v.Skipped != "" {
				t.Errorf("seed %d: %s: OK %v, skipped %q, violations:\n%s", seed, v.Checker, v.OK, v.Skipped, describe(v))
			}
			for k, x := range v.Stats {
				totals[v.Checker+"."+k] += x
			}
		}
	}
	// The generator must exercise what the checkers exempt or judge
	// specially, or the property says little.
	for _, stat := range []string{"log.retention_exempt", "reads.unverified", "reads.failed", "filters.judged",
		"follows.judged", "groups.required", "groups.retention_exempt", "groups.commits_refused",
		"appends.conflicts", "appends.unknown_stored", "appends.unknown"} {
		if totals[stat] == 0 {
			t.Errorf("no seed exercised %s", stat)
		}
	}
}

func describe(v Verdict) string {
	var b strings.Builder
	for _, x := range v.Violations {
		fmt.Fprintf(&b, "\t%s\n", x.What)
	}
	return b.String()
}

// corruption breaks a valid history in one way a checker must catch.
type corruption struct {
	name    string
	checker func(*history.History) Verdict
	want    string // in some violation's What
	// corrupt changes h, or returns false when this seed's history has no
	// place for it.
	corrupt func(h *history.History) bool
}

// runCorruptions applies each corruption to the first seed's history that
// has a place for it and asserts that the checker, OK on the original,
// reports the violation on the copy.
func runCorruptions(t *testing.T, cs []corruption) {
	t.Helper()
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			for seed := int64(1); seed <= 50; seed++ {
				h := generate(seed)
				bad := clone(h)
				if !c.corrupt(bad) {
					continue
				}
				if v := c.checker(h); !v.OK {
					t.Fatalf("seed %d: the original is not OK:\n%s", seed, describe(v))
				}
				v := c.checker(bad)
				if v.OK {
					t.Fatalf("seed %d: the corruption was not caught (stats %v)", seed, v.Stats)
				}
				for _, x := range v.Violations {
					if strings.Contains(x.What, c.want) {
						t.Logf("seed %d: %s", seed, x.What)
						return
					}
				}
				t.Fatalf("seed %d: no violation mentions %q:\n%s", seed, c.want, describe(v))
			}
			t.Fatal("no seed's history had a place for this corruption")
		})
	}
}

func TestCapViolations(t *testing.T) {
	h := generate(1)
	for i := range 30 {
		for _, r := range replicasOf(h, 0) {
			r.Records = append(r.Records, history.Record{Partition: 0, Offset: r.End, Value: fmt.Sprintf("ghost-%d", i), AppendTime: h.End})
			r.End++
		}
	}
	v := Log(h)
	if len(v.Violations) != MaxViolations || v.Stats["violations"] != 30 || v.Stats["violations_dropped"] != 30-MaxViolations {
		t.Fatalf("kept %d violations, stats %v; want %d kept of 30", len(v.Violations), v.Stats, MaxViolations)
	}
}

func TestEmptyHistorySkipsEverything(t *testing.T) {
	for _, v := range All(&history.History{}) {
		if !v.OK || v.Skipped == "" {
			t.Errorf("%s: OK %v, skipped %q", v.Checker, v.OK, v.Skipped)
		}
	}
	if s := Summary(&history.History{}); s != (Stats{}) {
		t.Errorf("summary of nothing: %+v", s)
	}
}

func TestAllOrder(t *testing.T) {
	var got []string
	for _, v := range All(generate(1)) {
		got = append(got, v.Checker)
	}
	if want := "log appends reads follows groups filters raft gauntlet liveness"; strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

// Helpers for corruptions.

func replicasOf(h *history.History, p uint32) []*history.Replica {
	var rs []*history.Replica
	for i := range h.Replicas {
		if h.Replicas[i].Partition == p {
			rs = append(rs, &h.Replicas[i])
		}
	}
	return rs
}

// ackedAtOffset returns the index of the publish acknowledged at p/off.
func ackedAtOffset(h *history.History, p uint32, off uint64) int {
	for i, pb := range h.Publishes {
		if pb.Outcome == history.Acked && pb.Partition == p && pb.Offset == off {
			return i
		}
	}
	return -1
}

// refRecord is the record the replicas hold at p/off.
func refRecord(h *history.History, p uint32, off uint64) (history.Record, bool) {
	r := replicasOf(h, p)[0]
	if off < r.Start || off >= r.End {
		return history.Record{}, false
	}
	return r.Records[off-r.Start], true
}

// findRead returns the first read matching the kinds and filter that
// did not fail and holds at least n records and satisfies ok.
func findRead(h *history.History, from, to history.PositionKind, filter string, n int, ok func(*history.Read) bool) *history.Read {
	for i := range h.Reads {
		r := &h.Reads[i]
		if r.From.Kind == from && r.To.Kind == to && r.Filter == filter && r.Err == "" && len(r.Records) >= n && (ok == nil || ok(r)) {
			return r
		}
	}
	return nil
}

// BenchmarkAll judges a history of 20,000 publishes (two partitions of
// about 7,500 records, 160 replays, 4 followers).
func BenchmarkAll(b *testing.B) {
	h := generateN(1, 20000)
	b.ReportAllocs()
	for b.Loop() {
		for _, v := range All(h) {
			if !v.OK {
				b.Fatalf("%s: %s", v.Checker, describe(v))
			}
		}
	}
}

// TestGarbageNeverPanics scrambles generated histories at random (offsets,
// bounds, orders, outcomes, positions, events) and runs every checker:
// they may report anything but must not panic.
func TestGarbageNeverPanics(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		h := generate(seed)
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		off := func() uint64 { return uint64(rng.IntN(200)) }
		for i := range h.Replicas {
			r := &h.Replicas[i]
			r.Start, r.End = off(), off()
			rng.Shuffle(len(r.Records), func(a, b int) { r.Records[a], r.Records[b] = r.Records[b], r.Records[a] })
			if len(r.Records) > 0 {
				r.Records[0].Offset = off()
			}
		}
		for i := range h.Reads {
			r := &h.Reads[i]
			r.From.Offset, r.To.Offset, r.From.N, r.EndAtStart = off(), off(), off(), off()
			r.From.Kind = []history.PositionKind{history.None, history.AtOffset, history.LastN, "bogus"}[rng.IntN(4)]
			rng.Shuffle(len(r.Records), func(a, b int) { r.Records[a], r.Records[b] = r.Records[b], r.Records[a] })
		}
		for i := range h.Follows {
			h.Follows[i].From = off()
		}
		for i := range h.Publishes {
			h.Publishes[i].Offset, h.Publishes[i].Partition = off(), uint32(rng.IntN(4))
			h.Publishes[i].Outcome = []history.Outcome{history.Acked, history.Failed, history.Unknown, ""}[rng.IntN(4)]
		}
		for i := range h.Groups {
			h.Groups[i].Offset, h.Groups[i].Generation = off(), uint64(rng.IntN(5))
			h.Groups[i].Kind = []history.GroupEventKind{history.Delivered, history.Committed, history.Reset, history.Assigned, "x"}[rng.IntN(5)]
		}
		for i := range h.Faults {
			h.Faults[i].Start, h.Faults[i].End = h.Faults[i].End, h.Faults[i].Start // ends before it starts
		}
		All(h)
		Summary(h)
	}
}
