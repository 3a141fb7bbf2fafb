package report

import (
	"fmt"
	"math"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// t0 is the start of every synthetic run.
var t0 = time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// synthetic returns a 60 s run on three nodes with a topic of three
// partitions: three publishers each publishing every 100 ms (2 ms, then
// 400 ms and some failures and unknowns while node 1 is killed from 20 s
// to 25 s), leaders reported by every node each second (node 1's
// partition moves to node 2 at 21 s), and a split from 40 s to 45 s. The
// log checker fails with two violations; the group checker is skipped.
func synthetic() *Report {
	h := &history.History{
		Scenario: "leader-kill",
		Seed:     42,
		Start:    t0,
		End:      at(60 * time.Second),
		Nodes:    []uint64{1, 2, 3},
		Topics:   []history.Topic{{Name: "orders", Partitions: 3}},
		Faults: []history.Fault{
			{Name: "kill leader", Kind: "kill", Targets: []uint64{1}, Start: at(20 * time.Second), End: at(25 * time.Second)},
			{Name: "split n3", Kind: "split", Targets: []uint64{3}, Start: at(40 * time.Second), End: at(45 * time.Second)},
		},
		Bounds: history.Bounds{RecoverWithin: 10 * time.Second, PublishP99During: 2 * time.Second},
	}
	for pub := range 3 {
		seq := 0
		for s := time.Duration(0); s < 60*time.Second; s += 100 * time.Millisecond {
			start := at(s + time.Duration(pub)*time.Millisecond)
			p := history.Publish{
				Publisher: pub, Seq: seq, Topic: "orders", Key: fmt.Sprintf("k%d", pub),
				IdemKey: fmt.Sprintf("i-%d-%d", pub, seq), Value: fmt.Sprintf("v-%d-%d", pub, seq),
				Start: start, End: start.Add(2 * time.Millisecond), Outcome: history.Acked,
				Partition: uint32(pub), Offset: uint64(seq),
			}
			if s >= 20*time.Second && s < 25*time.Second {
				p.End = start.Add(400 * time.Millisecond)
				switch seq % 10 {
				case 0:
					p.Outcome, p.Err = history.Failed, "not stored"
				case 1:
					p.Outcome, p.Err = history.Unknown, "deadline exceeded"
				}
			}
			h.Publishes = append(h.Publishes, p)
			seq++
		}
	}
	for s := time.Duration(0); s < 60*time.Second; s += time.Second {
		for _, node := range []uint64{1, 2, 3} {
			if node == 1 && s >= 20*time.Second && s < 25*time.Second {
				continue // killed
			}
			h.Leaders = append(h.Leaders, history.LeaderObs{At: at(s), Node: node, Term: 1, Leader: 1})
			for part := range uint32(3) {
				o := history.LeaderObs{At: at(s), Node: node, Topic: "orders", Partition: part, Term: 2, Leader: uint64(part) + 1}
				if part == 0 && s >= 21*time.Second {
					o.Term, o.Leader = 3, 2
					if node == 1 && s == 25*time.Second {
						o.Term, o.Leader = 2, 1 // restarted, still behind
					}
				}
				h.Leaders = append(h.Leaders, o)
			}
		}
	}
	rec := func(off uint64) history.Record {
		return history.Record{Partition: 0, Offset: off, Key: "k0", Value: fmt.Sprintf("v-0-%d", off), IdemKey: fmt.Sprintf("i-0-%d", off), AppendTime: at(time.Duration(off) * 100 * time.Millisecond)}
	}
	return &Report{
		History: h,
		Passed:  false,
		Command: "rewind scenario run leader-kill --seed 42",
		Summary: Summary{
			"operations": 1800, "acked": 1770, "failed": 15, "unknown": 15, "lost": 0, "duplicated": 1,
			"reordered": 0, "recovery_p50_s": 1.25, "recovery_max_s": 2.5, "failover_max_s": 2.25, "throughput_ms": 0.5, "not_applicable": math.NaN(),
		},
		Verdicts: []Verdict{
			{Checker: "log", Description: "every acknowledged record is present exactly once", Violations: []Violation{
				{What: "record orders/0@7 is stored twice", Records: []history.Record{rec(7), rec(8)}, Publishes: []history.Publish{h.Publishes[7]}},
				{What: "offset 12 missing on node 3", Records: []history.Record{rec(12)}},
			}, Stats: map[string]float64{"records": 1770, "ratio": 0.25}},
			{Checker: "reads", Description: "a replay returns exactly the suffix the history says", OK: true, Stats: map[string]float64{"reads": 12}},
			{Checker: "groups", Description: "at-least-once per member", Skipped: "no group events in this run"},
			{Checker: "raft", Description: "at most one leader per term per group", OK: true},
			{Checker: "liveness", Description: "failover within its bound", OK: true, Stats: map[string]float64{
				"fault0.p0.failover_s": 0.02, "fault0.p1.failover_s": 2.25, "fault0.failover_s": 2.25,
			}},
		},
	}
}
