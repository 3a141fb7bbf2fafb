package check

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/rewind-io/rewind/chaos/history"
)

// Groups judges the subscriber groups' events. Events are taken in the
// order of their time: Sent for commits when set, At otherwise (ties keep
// the history's order). Stats: groups, events, delivered, commits,
// commits_refused, resets, required (offsets that a commit covered and
// so had to be delivered), retention_exempt (such offsets below the
// reference replica's Start, not required).
func Groups(h *history.History) Verdict {
	b := newVerdict("groups", "each member reads its partitions in order; no commit from a fenced generation is accepted; "+
		"commits never move back except by a reset; after a reset the partition is read from its target; "+
		"every record below a commit was delivered (at least once)")
	if len(h.Groups) == 0 {
		return b.skip("no group events recorded")
	}
	x := newIndex(h)
	evs := orderedEvents(h.Groups)
	g := &groupChecker{b: b, x: x,
		segments: map[memberPart]segment{}, fences: map[groupPart]map[string]uint64{}, parts: map[groupPart]*partState{}}
	groups := map[string]bool{}
	for _, ev := range evs {
		groups[ev.Group] = true
		g.step(ev)
	}
	g.finish()
	b.set("groups", float64(len(groups)))
	b.set("events", float64(len(evs)))
	return b.done()
}

// orderedEvents sorts a copy of the events by the time they took effect.
func orderedEvents(in []history.GroupEvent) []history.GroupEvent {
	evs := slices.Clone(in)
	slices.SortStableFunc(evs, func(a, b history.GroupEvent) int { return effectiveAt(a).Compare(effectiveAt(b)) })
	return evs
}

func effectiveAt(ev history.GroupEvent) time.Time {
	if (ev.Kind == history.Committed || ev.Kind == history.CommitRefused) && !ev.Sent.IsZero() {
		return ev.Sent
	}
	return ev.At
}

type groupPart struct {
	group string
	part
}

type memberPart struct {
	groupPart
	member string
}

// segment is a member's reading of a partition within one assignment.
type segment struct {
	generation uint64
	last       uint64
}

// partState is a group's view of one partition.
type partState struct {
	committed    uint64 // the last accepted commit or reset target
	hasCommitted bool
	base         uint64 // from where the next commit's records must have been delivered
	hasBase      bool
	required     []span
	delivered    map[uint64]bool
	reset        *history.GroupEvent // the last reset, until its first delivery
}

// span is a range of offsets a commit covered.
type span struct {
	from, to uint64
	commit   history.GroupEvent
}

type groupChecker struct {
	b        *verdict
	x        *index
	segments map[memberPart]segment
	fences   map[groupPart]map[string]uint64 // member ("" for resets) → highest generation that raised the fence
	parts    map[groupPart]*partState
}

func (g *groupChecker) state(gp groupPart) *partState {
	s := g.parts[gp]
	if s == nil {
		s = &partState{delivered: map[uint64]bool{}}
		g.parts[gp] = s
	}
	return s
}

func (g *groupChecker) step(ev history.GroupEvent) {
	gp := groupPart{ev.Group, part{ev.Topic, ev.Partition}}
	mp := memberPart{gp, ev.Member}
	switch ev.Kind {
	case history.Assigned:
		delete(g.segments, mp)
		g.raiseFence(gp, ev.Member, ev.Generation)
		if s := g.state(gp); !s.hasCommitted {
			s.base, s.hasBase = ev.Offset, true
		}
	case history.Revoked:
		// The rebalance raised the partition's fence before telling the
		// member: its own older commits are fenced from now on.
		g.raiseFence(gp, revokedFrom+ev.Member, ev.Generation)
	case history.Joined, history.Left, history.Crashed:
		for k := range g.segments {
			if k.group == ev.Group && k.member == ev.Member {
				delete(g.segments, k)
			}
		}
	case history.Delivered:
		g.b.inc("delivered")
		g.delivered(gp, mp, ev)
	case history.Committed:
		g.b.inc("commits")
		g.commit(gp, ev)
	case history.CommitRefused:
		g.b.inc("commits_refused")
	case history.Reset:
		g.b.inc("resets")
		g.reset(gp, ev)
	}
}

func (g *groupChecker) raiseFence(gp groupPart, member string, gen uint64) {
	if g.fences[gp] == nil {
		g.fences[gp] = map[string]uint64{}
	}
	g.fences[gp][member] = max(g.fences[gp][member], gen)
}

func (g *groupChecker) delivered(gp groupPart, mp memberPart, ev history.GroupEvent) {
	if seg, ok := g.segments[mp]; ok && seg.generation == ev.Generation && ev.Offset <= seg.last {
		g.b.addf(nil, nil, "group %q member %q read %s out of order at generation %d: offset %d after offset %d",
			ev.Group, ev.Member, gp.part, ev.Generation, ev.Offset, seg.last)
	}
	g.segments[mp] = segment{generation: ev.Generation, last: ev.Offset}
	s := g.state(gp)
	s.delivered[ev.Offset] = true
	if r := s.reset; r != nil && (r.Generation == 0 || ev.Generation >= r.Generation) {
		if ev.Offset != r.Offset {
			g.b.addf(nil, nil, "group %q was reset to offset %d of %s, but the first delivery after it was offset %d (member %q, generation %d)",
				ev.Group, r.Offset, gp.part, ev.Offset, ev.Member, ev.Generation)
		}
		s.reset = nil
	}
}

func (g *groupChecker) commit(gp groupPart, ev history.GroupEvent) {
	if member, gen, ok := g.fencedBy(gp, ev); ok {
		by := "a reset fenced the partition"
		switch {
		case strings.HasPrefix(member, revokedFrom):
			by = "the partition was revoked from member " + quote(strings.TrimPrefix(member, revokedFrom))
		case member != "":
			by = "member " + quote(member) + " was assigned the partition"
		}
		g.b.addf(nil, nil, "group %q member %q's commit of offset %d of %s at generation %d was accepted, although %s at generation %d before the commit was sent",
			ev.Group, ev.Member, ev.Offset, gp.part, ev.Generation, by, gen)
	}
	s := g.state(gp)
	if s.hasCommitted && ev.Offset < s.committed {
		g.b.addf(nil, nil, "group %q's committed offset of %s moved back from %d to %d without a reset (member %q, generation %d)",
			ev.Group, gp.part, s.committed, ev.Offset, ev.Member, ev.Generation)
	}
	if s.hasBase && ev.Offset > s.base {
		s.required = append(s.required, span{from: s.base, to: ev.Offset, commit: ev})
	}
	s.committed, s.hasCommitted = ev.Offset, true
	s.base, s.hasBase = ev.Offset, true
}

// revokedFrom marks a fence raised by a revocation (a member name cannot
// hold a NUL).
const revokedFrom = "\x00revoked:"

// fencedBy returns who (another member, or "" for a reset) raised the
// partition's fence above a commit's generation before it was sent: the
// highest such generation, ties to the first name.
func (g *groupChecker) fencedBy(gp groupPart, ev history.GroupEvent) (member string, gen uint64, ok bool) {
	for m, mg := range g.fences[gp] {
		if m == ev.Member || mg <= ev.Generation {
			continue
		}
		if !ok || mg > gen || (mg == gen && m < member) {
			member, gen, ok = m, mg, true
		}
	}
	return member, gen, ok
}

func (g *groupChecker) reset(gp groupPart, ev history.GroupEvent) {
	if ev.Generation > 0 {
		g.raiseFence(gp, "", ev.Generation)
	}
	if ev.Generation == 0 { // ordered by time only: segments end here
		for k := range g.segments {
			if k.groupPart == gp {
				delete(g.segments, k)
			}
		}
	}
	s := g.state(gp)
	s.committed, s.hasCommitted = ev.Offset, true
	s.base, s.hasBase = ev.Offset, true
	s.reset = &ev
}

// finish checks at-least-once: every offset a commit covered, from the
// previous commit (or reset target, or first assigned offset) to it, was
// delivered to some member, unless retention removed it.
func (g *groupChecker) finish() {
	keys := make([]groupPart, 0, len(g.parts))
	for gp := range g.parts {
		keys = append(keys, gp)
	}
	slices.SortFunc(keys, func(a, b groupPart) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.topic, b.topic), cmp.Compare(a.id, b.id))
	})
	for _, gp := range keys {
		s := g.parts[gp]
		floor := uint64(0)
		if ref := g.x.refs[gp.part]; ref != nil {
			floor = ref.start
		}
		delivered := make([]uint64, 0, len(s.delivered))
		for off := range s.delivered {
			delivered = append(delivered, off)
		}
		slices.Sort(delivered)
		for _, sp := range s.required {
			g.checkSpan(gp, delivered, sp, floor)
		}
	}
}

// checkSpan reports each run of offsets in the span, at or above floor,
// that is not in delivered (sorted). It walks the deliveries, not the
// offsets, so a wild commit offset costs nothing.
func (g *groupChecker) checkSpan(gp groupPart, delivered []uint64, sp span, floor uint64) {
	from := max(sp.from, floor)
	g.b.v.Stats["retention_exempt"] += float64(min(from, sp.to) - sp.from)
	if from >= sp.to {
		return
	}
	g.b.v.Stats["required"] += float64(sp.to - from)
	i, _ := slices.BinarySearch(delivered, from)
	for next := from; next < sp.to; {
		if i < len(delivered) && delivered[i] == next {
			i++
			next++
			continue
		}
		end := sp.to // the gap runs to the next delivery in the span, or the span's end
		if i < len(delivered) && delivered[i] < sp.to {
			end = delivered[i]
		}
		g.b.addf(nil, nil, "group %q never delivered %s of %s, yet member %q committed %d at generation %d",
			gp.group, offsetRange(next, end-1), gp.part, sp.commit.Member, sp.commit.Offset, sp.commit.Generation)
		next = end
	}
}

func quote(s string) string { return `"` + s + `"` }
