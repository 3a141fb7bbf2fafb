package check

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// Groups judges the subscriber groups' events. Events are taken in the
// order of their time: Sent for commits when set, At otherwise (ties keep
// the history's order). Resets are known by their generation, wherever
// their events fall in that order: a reset's answer may reach the runner
// after its members already read and committed from the target. Stats:
// groups, events, delivered, commits, commits_refused, resets,
// resets_unknown (resets whose outcome the runner did not learn),
// required (offsets that a commit covered and so had to be delivered),
// retention_exempt (such offsets below the reference replica's Start,
// not required).
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
	for _, ev := range h.Groups {
		if ev.Kind == history.Reset && ev.Generation > 0 {
			gp := groupPart{ev.Group, part{ev.Topic, ev.Partition}}
			g.state(gp).addReset(ev.Generation, ev.Offset, ev)
		}
	}
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
	if (ev.Kind == history.Committed || ev.Kind == history.CommitRefused || ev.Kind == history.ResetUnknown) && !ev.Sent.IsZero() {
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

// partState is a group's view of one partition. Its history is cut into
// eras by resets: the era of generation G runs from the reset that
// created G to the next reset. Commits are compared within their
// generation's era: the server fences every commit older than a reset
// once the reset is applied, so the accepted commits of an older era all
// landed before it, whenever their answers came back.
type partState struct {
	resets    []eraStart // by generation (resets of a known generation)
	eras      map[uint64]*era
	delivered map[uint64]bool
	required  []span
	unknown   int // resets of unknown outcome not yet taken for a Seeked
	// timeReset is the last reset of unknown generation (0), ordered by
	// At, until its first delivery.
	timeReset *history.GroupEvent
}

// eraStart is a reset of a known generation.
type eraStart struct {
	generation uint64
	target     uint64
	ev         history.GroupEvent
}

// era is a partition's group state between two resets.
type era struct {
	committed    uint64 // the last accepted commit, or the reset's target
	hasCommitted bool
	commitGen    uint64 // the highest generation of the era's accepted commits
	base         uint64 // from where the next commit's records must have been delivered
	hasBase      bool
	reset        *eraStart // the reset that began it (nil for the first era)
	read         bool      // a delivery of the era was seen
}

func (s *partState) addReset(gen, target uint64, ev history.GroupEvent) {
	i, found := slices.BinarySearchFunc(s.resets, gen, func(r eraStart, g uint64) int { return cmp.Compare(r.generation, g) })
	if !found {
		s.resets = slices.Insert(s.resets, i, eraStart{generation: gen, target: target, ev: ev})
	}
}

// reset returns the known reset that created generation gen.
func (s *partState) reset(gen uint64) (eraStart, bool) {
	i, found := slices.BinarySearchFunc(s.resets, gen, func(r eraStart, g uint64) int { return cmp.Compare(r.generation, g) })
	if !found {
		return eraStart{}, false
	}
	return s.resets[i], true
}

// era returns the era generation gen belongs to.
func (s *partState) era(gen uint64) *era {
	i, _ := slices.BinarySearchFunc(s.resets, gen+1, func(r eraStart, g uint64) int { return cmp.Compare(r.generation, g) })
	key := uint64(0)
	var start *eraStart
	if i > 0 {
		start = &s.resets[i-1]
		key = start.generation
	}
	e := s.eras[key]
	if e == nil {
		e = &era{reset: start}
		if start != nil {
			e.committed, e.hasCommitted = start.target, true
			e.base, e.hasBase = start.target, true
		}
		s.eras[key] = e
	}
	return e
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
		s = &partState{delivered: map[uint64]bool{}, eras: map[uint64]*era{}}
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
		s := g.state(gp)
		e := s.era(ev.Generation)
		if e.hasCommitted && ev.Offset < e.committed && ev.Generation > e.commitGen && s.unknown > 0 {
			// Assigned below the last commit, at a generation newer
			// than every commit of the era (an older assignment
			// recorded late may well start below them): a reset of
			// unknown outcome that reached this partition without a
			// seek (its members were told to read on, then the
			// partition moved).
			s.unknown--
			s.addReset(ev.Generation, ev.Offset, ev)
			e = s.era(ev.Generation)
		}
		if !e.hasCommitted {
			e.base, e.hasBase = ev.Offset, true
		}
	case history.Seeked:
		delete(g.segments, mp)
		g.raiseFence(gp, ev.Member, ev.Generation)
		g.seeked(gp, ev)
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
	case history.ResetUnknown:
		g.b.inc("resets_unknown")
		g.state(gp).unknown++
	}
}

// seeked checks a member's seek against the reset that created its
// generation. A seek at a generation no recorded reset created is the
// outcome of a reset whose answer the runner did not get, if one is left
// to account for it; otherwise the server moved the member by itself.
func (g *groupChecker) seeked(gp groupPart, ev history.GroupEvent) {
	s := g.state(gp)
	if r, ok := s.reset(ev.Generation); ok {
		if r.target != ev.Offset {
			g.b.addf(nil, nil, "group %q was reset to offset %d of %s at generation %d, but member %q was told to read on from offset %d",
				ev.Group, r.target, gp.part, ev.Generation, ev.Member, ev.Offset)
		}
		return
	}
	if s.unknown == 0 {
		g.b.addf(nil, nil, "member %q of group %q was told to read %s from offset %d at generation %d, but no reset created that generation",
			ev.Member, ev.Group, gp.part, ev.Offset, ev.Generation)
		return
	}
	s.unknown--
	s.addReset(ev.Generation, ev.Offset, ev)
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
	if e := s.era(ev.Generation); !e.read {
		e.read = true
		if r := e.reset; r != nil && ev.Offset != r.target {
			g.b.addf(nil, nil, "group %q was reset to offset %d of %s at generation %d, but the first delivery after it was offset %d (member %q, generation %d)",
				ev.Group, r.target, gp.part, r.generation, ev.Offset, ev.Member, ev.Generation)
		}
	}
	if r := s.timeReset; r != nil {
		if ev.Offset != r.Offset {
			g.b.addf(nil, nil, "group %q was reset to offset %d of %s, but the first delivery after it was offset %d (member %q, generation %d)",
				ev.Group, r.Offset, gp.part, ev.Offset, ev.Member, ev.Generation)
		}
		s.timeReset = nil
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
	e := s.era(ev.Generation)
	if e.hasCommitted && ev.Offset < e.committed {
		g.b.addf(nil, nil, "group %q's committed offset of %s moved back from %d to %d without a reset (member %q, generation %d)",
			ev.Group, gp.part, e.committed, ev.Offset, ev.Member, ev.Generation)
	}
	if e.hasBase && ev.Offset > e.base {
		s.required = append(s.required, span{from: e.base, to: ev.Offset, commit: ev})
	}
	e.committed, e.hasCommitted = ev.Offset, true
	e.base, e.hasBase = ev.Offset, true
	e.commitGen = max(e.commitGen, ev.Generation)
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

// reset raises the fence a reset of a known generation puts up once its
// answer is in (its era was known from the start); a reset of unknown
// generation (0) acts where it falls in time: every era starts again from
// its target, and the next delivery must be it.
func (g *groupChecker) reset(gp groupPart, ev history.GroupEvent) {
	if ev.Generation > 0 {
		g.raiseFence(gp, "", ev.Generation)
		return
	}
	for k := range g.segments {
		if k.groupPart == gp {
			delete(g.segments, k)
		}
	}
	s := g.state(gp)
	for _, e := range s.eras {
		e.committed, e.hasCommitted = ev.Offset, true
		e.base, e.hasBase = ev.Offset, true
	}
	e := s.era(0)
	e.committed, e.hasCommitted = ev.Offset, true
	e.base, e.hasBase = ev.Offset, true
	s.timeReset = &ev
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
