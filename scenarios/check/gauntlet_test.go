package check

import (
	"fmt"
	"testing"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// TestGauntletCatchesServerErrorsAndCrashes: client errors pass; an
// Internal answer, a bare HTTP 500 and a node that stopped answering are
// each a violation; no probe is a skip.
func TestGauntletCatchesServerErrorsAndCrashes(t *testing.T) {
	good := &history.History{Probes: []history.Probe{
		{Node: 1, RPC: "rewind.v1.PublishService/Publish", Input: "x", Code: "invalid_argument"},
		{Node: 2, RPC: "rewind.v1.TopicService/ListTopics", Input: "y", Code: "ok"},
		{Node: 3, RPC: "rewind.v1.TopicService/DeleteTopic", Input: "z", Code: "not_found"},
	}}
	if v := Gauntlet(good); !v.OK || v.Stats["probes"] != 3 {
		t.Fatalf("good probes: %+v", v)
	}
	for _, code := range []string{"internal", "unknown", "data_loss", "http 500", "transport: connection refused"} {
		h := &history.History{Probes: append(append([]history.Probe(nil), good.Probes...), history.Probe{Node: 2, RPC: "r", Input: "i", Code: code})}
		if v := Gauntlet(h); v.OK || len(v.Violations) != 1 {
			t.Errorf("%q: %+v", code, v)
		}
	}
	bomb := &history.History{Probes: []history.Probe{{RPC: "rewind.v1.SubscribeService/Subscribe", Input: "filter bomb", Code: "ok", MustFail: true}}}
	if v := Gauntlet(bomb); v.OK {
		t.Error("a filter bomb's replay that succeeded passed")
	}
	bomb.Probes[0].Code = "resource_exhausted"
	if v := Gauntlet(bomb); !v.OK {
		t.Errorf("a filter bomb stopped with resource_exhausted: %+v", v)
	}
	if v := Gauntlet(&history.History{}); !v.OK || v.Skipped == "" {
		t.Errorf("no probes: %+v", v)
	}
}

// TestACommitAfterItsRevocationIsFenced: once a member was told that a
// partition was taken from it (the rebalance raised the partition's fence
// first), a commit it sends for that partition at its old generation must
// be refused; accepted, it is a violation, even before the new owner hears
// of its assignment.
func TestACommitAfterItsRevocationIsFenced(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := func(k history.GroupEventKind, member string, gen, off uint64, at int) history.GroupEvent {
		return history.GroupEvent{Group: "g", Member: member, Kind: k, Generation: gen, Topic: "t", Partition: 0, Offset: off,
			At: t0.Add(time.Duration(at) * time.Millisecond), Sent: t0.Add(time.Duration(at) * time.Millisecond)}
	}
	h := &history.History{Topics: []history.Topic{{Name: "t", Partitions: 1}}, Groups: []history.GroupEvent{
		ev(history.Assigned, "a", 1, 0, 0),
		ev(history.Delivered, "a", 1, 0, 1),
		ev(history.Committed, "a", 1, 1, 2),
		ev(history.Revoked, "a", 2, 0, 3),
		ev(history.CommitRefused, "a", 1, 1, 4), // the stale commit, refused: fine
	}}
	if v := Groups(h); !v.OK {
		t.Fatalf("a refused stale commit: %+v", v.Violations)
	}
	h.Groups[4].Kind = history.Committed // accepted: the bug
	if v := Groups(h); v.OK {
		t.Fatal("a commit accepted after its partition was revoked passed")
	}
}

// TestTransformedReadsAreJudged: a transformed replay must deliver, for
// each record the transform keeps, exactly what it makes of the stored
// record, and nothing for the ones it drops.
func TestTransformedReadsAreJudged(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rec := func(off uint64, key string) history.Record {
		v := fmt.Sprintf("v%d", off)
		return history.Record{Offset: off, Key: key, Value: v, IdemKey: v, AppendTime: t0.Add(time.Duration(off))}
	}
	stored := []history.Record{rec(0, "a"), rec(1, "b"), rec(2, "a"), rec(3, "a")}
	tf := func(r history.Record) (history.Record, bool) {
		if r.Key != "a" {
			return r, false
		}
		r.Value += "+rewound"
		return r, true
	}
	mk := func(got ...history.Record) *history.History {
		h := &history.History{Nodes: []uint64{1}, Topics: []history.Topic{{Name: "t", Partitions: 1,
			Transforms: map[string]func(history.Record) (history.Record, bool){"tag": tf}}}}
		for _, r := range stored {
			h.Publishes = append(h.Publishes, history.Publish{Topic: "t", Key: r.Key, Value: r.Value, IdemKey: r.IdemKey, Outcome: history.Acked, Offset: r.Offset, Seq: int(r.Offset), Publisher: int(r.Offset), Start: t0, End: t0})
		}
		h.Replicas = []history.Replica{{Node: 1, Topic: "t", Start: 0, End: 4, Records: stored}}
		h.Reads = []history.Read{{Reader: "r", Topic: "t", From: history.Position{Kind: history.AtOffset}, EndAtStart: 4, Filter: "tag", Records: got}}
		return h
	}
	out := func(r history.Record) history.Record { x, _ := tf(r); return x }
	if v := Filters(mk(out(stored[0]), out(stored[2]), out(stored[3]))); !v.OK || v.Stats["judged"] != 1 {
		t.Fatalf("a correct transformed read: %+v", v)
	}
	for name, got := range map[string][]history.Record{
		"untransformed":  {stored[0], out(stored[2]), out(stored[3])},
		"a dropped kept": {out(stored[0]), out(stored[1]), out(stored[2]), out(stored[3])},
		"one missing":    {out(stored[0]), out(stored[3])},
	} {
		if v := Filters(mk(got...)); v.OK {
			t.Errorf("%s: passed", name)
		}
	}
}

// TestP99RatioAgainstTheQuietStart: the p99 of publishes during a fault is
// compared with the p99 of those sent before the first fault.
func TestP99RatioAgainstTheQuietStart(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var pubs []history.Publish
	add := func(at int, lat time.Duration) {
		start := t0.Add(time.Duration(at) * time.Millisecond)
		pubs = append(pubs, history.Publish{Outcome: history.Acked, Start: start, End: start.Add(lat)})
	}
	for i := range 100 { // quiet: 2 ms
		add(i*10, 2*time.Millisecond)
	}
	for i := range 100 { // during the storm: 9 ms
		add(2000+i*10, 9*time.Millisecond)
	}
	add(4000, time.Millisecond) // after it
	h := &history.History{Publishes: pubs, Faults: []history.Fault{{Name: "storm", Kind: "replay-storm", Start: t0.Add(2 * time.Second), End: t0.Add(3 * time.Second)}}}
	h.Bounds.PublishP99Ratio = 5
	v := Liveness(h)
	if v.OK || v.Stats["fault0.p99_ratio"] != 4.5 {
		if v.Stats["fault0.p99_ratio"] != 4.5 {
			t.Fatalf("ratio %v, want 4.5", v.Stats["fault0.p99_ratio"])
		}
	}
	if !v.OK {
		t.Fatalf("×4.5 under a bound of ×5: %+v", v.Violations)
	}
	h.Bounds.PublishP99Ratio = 4
	if v := Liveness(h); v.OK {
		t.Fatal("×4.5 passed a bound of ×4")
	}
}
