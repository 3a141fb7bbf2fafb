package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// This file generates valid synthetic histories: what a correct broker
// would have let the runner observe. Every checker must find them OK; the
// tests then corrupt copies of them.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// even is the synthetic topic's filter: values ending in an even digit.
func even(r history.Record) bool {
	return r.Value != "" && strings.ContainsRune("02468", rune(r.Value[len(r.Value)-1]))
}

// gen builds one history from a seed.
type gen struct {
	rng   *rand.Rand
	h     *history.History
	logs  [2][]history.Record // every record ever stored, from offset 0
	start [2]uint64           // the log start at the end (retention)
	now   time.Time
}

func generate(seed int64) *history.History { return generateN(seed, 0) }

// generateN generates a history of n publishes (0: 60 to 119).
func generateN(seed int64, n int) *history.History {
	g := &gen{
		rng: rand.New(rand.NewPCG(uint64(seed), 15)),
		h: &history.History{Scenario: "synthetic", Seed: seed, Start: t0, Nodes: []uint64{1, 2, 3},
			Topics: []history.Topic{{Name: "t", Partitions: 2, Filters: map[string]func(history.Record) bool{"even": even}}}},
		now: t0,
	}
	if n == 0 {
		n = 60 + g.rng.IntN(60)
	}
	g.publishes(n)
	for p := range g.logs {
		g.start[p] = uint64(g.rng.IntN(len(g.logs[p])/4 + 1))
		g.replicas(uint32(p))
		g.reads(uint32(p))
		g.follows(uint32(p))
	}
	g.groups()
	g.leaders()
	g.probes()
	g.bank()
	g.faults()
	g.h.End = g.now
	return g.h
}

// publishes: four sequential publishers, publisher i on key k<i> and
// partition i%2; mostly acknowledged, some failed (never stored), some
// unknown (stored or not). Append times sometimes repeat.
func (g *gen) publishes(n int) {
	var seqs [4]int
	for range n {
		pi := g.rng.IntN(4)
		part, seq := uint32(pi%2), seqs[pi]
		seqs[pi]++
		if g.rng.IntN(4) != 0 {
			g.now = g.now.Add(time.Millisecond)
		}
		p := history.Publish{
			Publisher: pi, Seq: seq, Topic: "t", Key: fmt.Sprintf("k%d", pi),
			IdemKey: fmt.Sprintf("idem-%d-%d", pi, seq), Value: fmt.Sprintf("v-%d-%d", pi, seq),
			Start: g.now.Add(-time.Duration(1+g.rng.IntN(5)) * time.Millisecond),
			End:   g.now.Add(time.Duration(g.rng.IntN(3)) * time.Millisecond),
		}
		switch r := g.rng.IntN(10); {
		case r < 7:
			p.Outcome = history.Acked
		case r == 7:
			p.Outcome, p.Err = history.Failed, "not stored"
		default:
			p.Outcome, p.Err = history.Unknown, "deadline exceeded"
		}
		if p.Outcome == history.Acked || (p.Outcome == history.Unknown && g.rng.IntN(2) == 0) {
			off := uint64(len(g.logs[part]))
			g.logs[part] = append(g.logs[part], history.Record{Partition: part, Offset: off, Key: p.Key, Value: p.Value, IdemKey: p.IdemKey, AppendTime: g.now})
			if p.Outcome == history.Acked {
				p.Partition, p.Offset, p.MessageID = part, off, fmt.Sprintf("m-%d-%d", part, off)
			}
		}
		g.h.Publishes = append(g.h.Publishes, p)
	}
}

func (g *gen) replicas(p uint32) {
	log := g.logs[p]
	for _, node := range g.h.Nodes {
		g.h.Replicas = append(g.h.Replicas, history.Replica{
			Node: node, Topic: "t", Partition: p, Start: g.start[p], End: uint64(len(log)),
			Records: slices.Clone(log[g.start[p]:]), Digest: fmt.Sprintf("crc-%d-%d", p, len(log)),
		})
	}
}

var (
	fromKinds = []history.PositionKind{history.AtOffset, history.AtMessageID, history.AtTime, history.Earliest, history.LastN}
	toKinds   = []history.PositionKind{history.None, history.AtOffset, history.AtMessageID, history.AtTime}
)

// reads: every start kind with every stop kind, unfiltered and filtered.
// A read saw the log start ls (retention may have moved it since) and
// EndAtStart; its start and its stop "to the end" resolved against ends in
// [EndAtStart, the final end] (publishes went on while it started).
func (g *gen) reads(p uint32) {
	for _, filter := range []string{"", "even"} {
		for _, fk := range fromKinds {
			for _, tk := range toKinds {
				g.read(p, fk, tk, filter)
			}
		}
	}
}

func (g *gen) read(p uint32, fk, tk history.PositionKind, filter string) {
	log := g.logs[p]
	end := uint64(len(log))
	ls := uint64(g.rng.IntN(int(g.start[p]) + 1))
	endAtStart := max(ls, satSub(end, uint64(g.rng.IntN(3))))
	streamEnd := endAtStart + uint64(g.rng.IntN(int(end-endAtStart)+1))
	// The broker reads the end once for the start and again for the stop.
	startEnd := endAtStart + uint64(g.rng.IntN(int(streamEnd-endAtStart)+1))
	r := history.Read{Reader: fmt.Sprintf("r-%s-%s-%s", fk, tk, filter), Topic: "t", Partition: p, EndAtStart: endAtStart, Filter: filter}
	var lo, hi uint64
	r.From, lo = g.startPos(p, fk, ls, startEnd)
	r.To, hi = g.stopPos(p, tk, lo, streamEnd)
	hi = max(hi, lo) // a start after the stream's end: nothing to deliver
	for _, rec := range log[lo:hi] {
		if filter == "" || even(rec) {
			r.Records = append(r.Records, rec)
		}
	}
	if g.rng.IntN(8) == 0 {
		r.Records = r.Records[:g.rng.IntN(len(r.Records)+1)]
		r.Err = "unavailable: connection reset"
	}
	g.h.Reads = append(g.h.Reads, r)
}

func (g *gen) startPos(p uint32, k history.PositionKind, ls, end uint64) (history.Position, uint64) {
	switch k {
	case history.AtOffset, history.AtMessageID:
		o := ls + uint64(g.rng.IntN(int(end-ls)+1))
		return history.Position{Kind: k, Offset: o, ID: fmt.Sprintf("m-%d-%d", p, o)}, o
	case history.AtTime:
		// A time after the newest record waits at the end and skips
		// records stamped earlier (MinTime): resolve over the whole log.
		t := g.someTime(p, ls, end)
		return history.Position{Kind: k, Time: t}, g.firstAtOrAfter(p, ls, uint64(len(g.logs[p])), t)
	case history.Earliest:
		return history.Position{Kind: k}, ls
	default: // LastN
		n := uint64(g.rng.IntN(8))
		return history.Position{Kind: k, N: n}, max(ls, satSub(end, n))
	}
}

func (g *gen) stopPos(p uint32, k history.PositionKind, lo, end uint64) (history.Position, uint64) {
	all := uint64(len(g.logs[p])) // a stop in the future waits for the records
	switch k {
	case history.AtOffset, history.AtMessageID:
		s := lo + uint64(g.rng.IntN(int(all-lo)+1))
		return history.Position{Kind: k, Offset: s, ID: fmt.Sprintf("m-%d-%d", p, s)}, s
	case history.AtTime:
		t := g.someTime(p, lo, all)
		return history.Position{Kind: k, Time: t}, g.firstAtOrAfter(p, lo, all, t)
	default:
		return history.Position{}, end
	}
}

// someTime is a record's append time, just before one, or after all.
func (g *gen) someTime(p uint32, lo, hi uint64) time.Time {
	if lo >= hi || g.rng.IntN(6) == 0 {
		return g.now.Add(time.Hour)
	}
	t := g.logs[p][lo+uint64(g.rng.IntN(int(hi-lo)))].AppendTime
	if g.rng.IntN(2) == 0 {
		t = t.Add(-time.Microsecond)
	}
	return t
}

func (g *gen) firstAtOrAfter(p uint32, lo, hi uint64, t time.Time) uint64 {
	for o := lo; o < hi; o++ {
		if !g.logs[p][o].AppendTime.Before(t) {
			return o
		}
	}
	return hi
}

// follows: two followers per partition, each a contiguous run from its
// start across reconnects.
func (g *gen) follows(p uint32) {
	log := g.logs[p]
	for i := range 2 {
		from := uint64(g.rng.IntN(len(log) + 1))
		n := g.rng.IntN(len(log) - int(from) + 1)
		g.h.Follows = append(g.h.Follows, history.Follow{
			Follower: fmt.Sprintf("f%d", i), Topic: "t", Partition: p, From: from,
			Records: slices.Clone(log[from : from+uint64(n)]), Reconnects: g.rng.IntN(3),
		})
	}
}

// groups scripts one group's life on both partitions: a alone (gen 1), b
// joins and takes partition 1 while a's last commit of it is answered late
// (gen 2), a reset of partition 0 (gen 3) with a delivery from before the
// seek arriving after it, and a crash of a handing partition 0 to b (gen 4).
func (g *gen) groups() {
	gr := &groupGen{gen: g, at: t0.Add(time.Hour), next: map[uint32]uint64{}}
	gr.ev("a", history.Joined, 1, 0, 0)
	for p := range uint32(2) {
		// Assigned at 0, but retention removed the records below the
		// start before they were read: the member starts there.
		gr.next[p] = g.start[p]
		gr.ev("a", history.Assigned, 1, p, 0)
		gr.deliver("a", 1, p, 1+g.rng.IntN(4))
	}
	gr.commit("a", 1, 0, gr.next[0])
	sent := gr.tick()
	committed1 := gr.next[1]
	gr.ev("b", history.Joined, 2, 0, 0)
	gr.ev("a", history.Assigned, 2, 0, gr.next[0])
	gr.ev("b", history.Assigned, 2, 1, committed1)
	late := gr.ev("a", history.Committed, 1, 1, committed1)
	late.Sent = sent
	gr.ev("a", history.CommitRefused, 1, 1, committed1)
	gr.deliver("a", 2, 0, 2)
	gr.deliver("b", 2, 1, 3)
	gr.commit("b", 2, 1, gr.next[1])
	gr.commit("a", 2, 0, gr.next[0])
	if gr.next[0] == g.start[0] {
		return // nothing to reset to
	}
	target := g.start[0] + uint64(g.rng.IntN(int(gr.next[0]-g.start[0])))
	gr.ev("", history.Reset, 3, 0, target)
	gr.deliver("a", 2, 0, 1) // read before the seek, seen after the reset
	gr.ev("a", history.Assigned, 3, 0, target)
	gr.ev("b", history.Assigned, 3, 1, gr.next[1])
	gr.next[0] = target
	gr.deliver("a", 3, 0, 3)
	committed := gr.next[0]
	gr.commit("a", 3, 0, committed)
	gr.deliver("a", 3, 0, 2)
	gr.ev("a", history.Crashed, 3, 0, 0)
	gr.ev("b", history.Assigned, 4, 0, committed)
	gr.next[0] = committed
	gr.deliver("b", 4, 0, 3)
	gr.commit("b", 4, 0, gr.next[0])
}

type groupGen struct {
	gen  *gen
	at   time.Time
	next map[uint32]uint64 // the next offset each partition's reader delivers
}

func (gr *groupGen) tick() time.Time {
	gr.at = gr.at.Add(time.Millisecond)
	return gr.at
}

func (gr *groupGen) ev(member string, k history.GroupEventKind, gen uint64, p uint32, off uint64) *history.GroupEvent {
	h := gr.gen.h
	h.Groups = append(h.Groups, history.GroupEvent{Group: "g", Member: member, Kind: k, Generation: gen, Topic: "t", Partition: p, Offset: off, At: gr.tick()})
	return &h.Groups[len(h.Groups)-1]
}

// deliver hands up to n records of partition p to a member.
func (gr *groupGen) deliver(member string, gen uint64, p uint32, n int) {
	for range n {
		if gr.next[p] >= uint64(len(gr.gen.logs[p])) {
			return
		}
		gr.ev(member, history.Delivered, gen, p, gr.next[p])
		gr.next[p]++
	}
}

func (gr *groupGen) commit(member string, gen uint64, p uint32, off uint64) {
	e := gr.ev(member, history.Committed, gen, p, off)
	e.Sent = e.At.Add(-time.Microsecond)
}

// leaders: three terms per raft group, each observed by every node (and
// some nodes not knowing the leader).
func (g *gen) leaders() {
	for _, grp := range []struct {
		topic string
		part  uint32
	}{{"", 0}, {"t", 0}, {"t", 1}} {
		for term := uint64(1); term <= 3; term++ {
			leader := (term+uint64(grp.part))%3 + 1
			for _, node := range g.h.Nodes {
				l := leader
				if g.rng.IntN(5) == 0 {
					l = 0
				}
				g.h.Leaders = append(g.h.Leaders, history.LeaderObs{At: t0.Add(time.Duration(term) * time.Second), Node: node,
					Topic: grp.topic, Partition: grp.part, Term: term, Leader: l})
			}
		}
	}
}

// probes: malformed requests answered with client errors.
func (g *gen) probes() {
	codes := []string{"ok", "invalid_argument", "not_found", "failed_precondition", "resource_exhausted", "unavailable"}
	for i := range 1 + g.rng.IntN(20) {
		g.h.Probes = append(g.h.Probes, history.Probe{Node: g.h.Nodes[i%len(g.h.Nodes)], RPC: "rewind.v1.PublishService/Publish",
			Input: "random bytes", Code: codes[g.rng.IntN(len(codes))], At: t0})
	}
}

// faults: one fault over the first third of the publishes, with generous
// bounds.
func (g *gen) faults() {
	span := g.now.Sub(t0)
	g.h.Faults = []history.Fault{{Name: "kill-leader", Kind: "kill", Targets: []uint64{1}, Start: t0.Add(span / 6), End: t0.Add(span / 3)}}
	g.h.Bounds = history.Bounds{RecoverWithin: time.Second, PublishP99During: time.Second, PublishP99After: time.Second}
}

// clone deep-copies a history so a test can corrupt it.
func clone(h *history.History) *history.History {
	c := *h
	c.Publishes = slices.Clone(h.Publishes)
	c.Replicas = slices.Clone(h.Replicas)
	for i := range c.Replicas {
		c.Replicas[i].Records = slices.Clone(c.Replicas[i].Records)
	}
	c.Reads = slices.Clone(h.Reads)
	for i := range c.Reads {
		c.Reads[i].Records = slices.Clone(c.Reads[i].Records)
	}
	c.Follows = slices.Clone(h.Follows)
	for i := range c.Follows {
		c.Follows[i].Records = slices.Clone(c.Follows[i].Records)
	}
	c.Groups = slices.Clone(h.Groups)
	c.Leaders = slices.Clone(h.Leaders)
	c.Faults = slices.Clone(h.Faults)
	c.Topics = slices.Clone(h.Topics)
	return &c
}
