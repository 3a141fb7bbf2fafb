package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// Reads judges every unfiltered Read against the reference replica of its
// partition (see the package documentation for the conventions). Stats:
// reads, judged, unjudged (no replica of the partition, or a position
// kind that cannot start or stop a replay), failed (reads with Err, judged
// as prefixes), records, unverified (records below every replica's Start,
// checked only against acknowledgements).
func Reads(h *history.History) Verdict {
	b := newVerdict("reads", "a replay returns exactly the records its start and stop name, in order, "+
		"each as the replicas hold it; a time start is the first record at or after the time")
	return judgeReads(b, newIndex(h), false)
}

// Filters judges every filtered Read: it must equal the topic's filter
// predicate (history.Topic.Filters) applied to the reference over the same
// range. Stats as Reads, plus no_predicate (reads whose filter has no
// predicate in the history).
func Filters(h *history.History) Verdict {
	b := newVerdict("filters", "a filtered replay returns exactly the records of the unfiltered range that the filter's predicate accepts; a transformed one, exactly what the transform makes of them")
	return judgeReads(b, newIndex(h), true)
}

func judgeReads(b *verdict, x *index, filtered bool) Verdict {
	var missing []string
	for _, r := range x.h.Reads {
		if (r.Filter != "") != filtered {
			continue
		}
		b.inc("reads")
		s := stream{
			who:  fmt.Sprintf("read by %q of %s/%d from %s to %s", r.Reader, r.Topic, r.Partition, posString(r.From), posString(r.To)),
			part: part{r.Topic, r.Partition}, from: r.From, to: r.To, endAtStart: r.EndAtStart,
			prefixOnly: r.Err != "", got: r.Records,
		}
		if tf, ok := x.transform(r.Topic, r.Filter); ok && filtered {
			// A transform: each record it delivered must be what it makes
			// of the reference's record at that offset; judged from there
			// on as a filter of the records it keeps.
			s.who += fmt.Sprintf(" with transform %q", r.Filter)
			got, what, rs := untransform(x, r, tf)
			if what != "" {
				b.inc("judged")
				b.add(Violation{What: s.who + ": " + what, Records: rs})
				continue
			}
			s.got = got
			s.pred = func(rec history.Record) bool { _, keep := tf(rec); return keep }
			if r.Err != "" {
				b.inc("failed")
			}
			judgeStream(b, x, s)
			continue
		}
		if filtered {
			s.who += fmt.Sprintf(" with filter %q", r.Filter)
			pred, ok := x.filter(r.Topic, r.Filter)
			if !ok {
				b.inc("no_predicate")
				if !slices.Contains(missing, r.Filter) {
					missing = append(missing, r.Filter)
				}
				continue
			}
			s.pred = pred
		}
		if r.Err != "" {
			b.inc("failed")
			s.who += fmt.Sprintf(" (failed: %s)", r.Err)
		}
		judgeStream(b, x, s)
	}
	switch {
	case b.v.Stats["reads"] == 0 && filtered:
		return b.skip("no filtered reads recorded")
	case b.v.Stats["reads"] == 0:
		return b.skip("no unfiltered reads recorded")
	case b.v.Stats["judged"] == 0 && len(missing) > 0:
		return b.skip("no predicate in the history for filter " + strings.Join(missing, ", "))
	case b.v.Stats["judged"] == 0:
		return b.skip("no read could be judged: no replica of their partitions was recorded, or their positions cannot start or stop a replay")
	}
	return b.done()
}

// Follows judges every live follower: it saw the reference's records
// from its From, each once, in order, without a gap, across its
// reconnects (a prefix: a follower is not required to have reached the
// end). Stats: follows, judged, unjudged, records, unverified, reconnects.
func Follows(h *history.History) Verdict {
	b := newVerdict("follows", "a live follower sees every record from its start once, in order, across reconnects")
	x := newIndex(h)
	for _, f := range h.Follows {
		b.inc("follows")
		b.v.Stats["reconnects"] += float64(f.Reconnects)
		judgeStream(b, x, stream{
			who:  fmt.Sprintf("follower %q of %s/%d from offset %d (%d reconnects)", f.Follower, f.Topic, f.Partition, f.From, f.Reconnects),
			part: part{f.Topic, f.Partition}, from: history.Position{Kind: history.AtOffset, Offset: f.From},
			prefixOnly: true, got: f.Records,
		})
	}
	switch {
	case len(h.Follows) == 0:
		return b.skip("no followers recorded")
	case b.v.Stats["judged"] == 0:
		return b.skip("no follower could be judged: no replica of their partitions was recorded")
	}
	return b.done()
}

// stream is what a reader or a follower asked for and got.
type stream struct {
	who        string
	part       part
	from, to   history.Position
	endAtStart uint64
	prefixOnly bool       // the stream failed or is live: nothing is required beyond what it got
	pred       filterFunc // nil: unfiltered
	got        []history.Record
}

// judgeStream adds at most one violation: the stream's first problem.
func judgeStream(b *verdict, x *index, s stream) {
	ref := x.refs[s.part]
	if ref == nil || !startKinds[s.from.Kind] || !stopKinds[s.to.Kind] {
		b.inc("unjudged")
		return
	}
	b.inc("judged")
	b.v.Stats["records"] += float64(len(s.got))
	if what, rs := firstProblem(b, x, ref, s); what != "" {
		b.add(Violation{What: s.who + ": " + what, Records: rs})
	}
}

var (
	startKinds = map[history.PositionKind]bool{history.AtOffset: true, history.AtMessageID: true,
		history.AtTime: true, history.Earliest: true, history.LastN: true}
	stopKinds = map[history.PositionKind]bool{history.None: true, history.AtOffset: true,
		history.AtMessageID: true, history.AtTime: true}
)

// firstProblem returns the first thing wrong with a stream, or "".
func firstProblem(b *verdict, x *index, ref *reference, s stream) (string, []history.Record) {
	for _, check := range []func(*verdict, *index, *reference, stream) (string, []history.Record){
		checkOrder, checkContent, checkBounds, checkRange,
	} {
		if what, rs := check(b, x, ref, s); what != "" {
			return what, rs
		}
	}
	return "", nil
}

// checkOrder: offsets increase; without a filter, by exactly one.
func checkOrder(_ *verdict, _ *index, _ *reference, s stream) (string, []history.Record) {
	for i := 1; i < len(s.got); i++ {
		prev, rec := s.got[i-1], s.got[i]
		switch {
		case rec.Offset == prev.Offset:
			return fmt.Sprintf("offset %d was delivered twice in a row", rec.Offset), recs(prev, rec)
		case rec.Offset < prev.Offset:
			return fmt.Sprintf("offset %d came after offset %d", rec.Offset, prev.Offset), recs(prev, rec)
		case s.pred == nil && rec.Offset > prev.Offset+1:
			return fmt.Sprintf("skipped %s (offset %d came after %d)", offsetRange(prev.Offset+1, rec.Offset-1), rec.Offset, prev.Offset), recs(prev, rec)
		}
	}
	return "", nil
}

// checkContent: each record is the reference's record at its offset (or,
// below every replica's Start, the record acknowledged there), and passes
// the filter.
func checkContent(b *verdict, x *index, ref *reference, s stream) (string, []history.Record) {
	for _, rec := range s.got {
		if s.pred != nil && !s.pred(rec) {
			return fmt.Sprintf("offset %d (value %q) does not pass the filter", rec.Offset, rec.Value), recs(rec)
		}
		if want, ok := ref.at(rec.Offset); ok {
			if !sameRecord(want, rec) {
				return fmt.Sprintf("offset %d differs from the replicas (read vs node %d: %s)", rec.Offset, ref.node, recordDiff(rec, want)), recs(rec, want)
			}
			continue
		}
		if rec.Offset >= ref.end {
			return fmt.Sprintf("offset %d is past the end of every replica (%d)", rec.Offset, ref.end), recs(rec)
		}
		b.inc("unverified")
		if pb, ok := x.ackedAt(s.part, rec.Offset); ok && (pb.Value != rec.Value || pb.IdemKey != rec.IdemKey) {
			return fmt.Sprintf("offset %d (below every replica's start %d) holds value %q, but %s was acknowledged there",
				rec.Offset, ref.start, rec.Value, nameOf(pb)), recs(rec)
		}
		if _, ok := x.publish(s.part.topic, rec); !ok {
			return fmt.Sprintf("offset %d (below every replica's start %d) holds value %q that no publish attempted", rec.Offset, ref.start, rec.Value), recs(rec)
		}
	}
	return "", nil
}

// checkBounds: the records respect the start and stop themselves: a time
// start is at or after its time, a stop is never delivered, a start
// offset is where the stream began, and the last N start no earlier than
// end − N.
func checkBounds(_ *verdict, _ *index, _ *reference, s stream) (string, []history.Record) {
	if len(s.got) == 0 {
		return "", nil
	}
	first := s.got[0]
	switch s.from.Kind {
	case history.AtTime:
		if first.AppendTime.Before(s.from.Time) {
			return fmt.Sprintf("the first record, offset %d, was appended at %s, before the start time %s",
				first.Offset, first.AppendTime.Format(timeFormat), s.from.Time.Format(timeFormat)), recs(first)
		}
	case history.AtOffset, history.AtMessageID:
		if first.Offset < s.from.Offset || (s.pred == nil && first.Offset != s.from.Offset) {
			return fmt.Sprintf("began at offset %d instead of %d", first.Offset, s.from.Offset), recs(first)
		}
	case history.LastN:
		if lb := satSub(s.endAtStart, s.from.N); first.Offset < lb {
			return fmt.Sprintf("began at offset %d, before the end when the read began (%d) minus %d", first.Offset, s.endAtStart, s.from.N), recs(first)
		}
	}
	for _, rec := range s.got {
		switch s.to.Kind {
		case history.AtOffset, history.AtMessageID:
			if rec.Offset >= s.to.Offset {
				return fmt.Sprintf("offset %d is at or past the stop offset %d (stops are exclusive)", rec.Offset, s.to.Offset), recs(rec)
			}
		case history.AtTime:
			if !rec.AppendTime.Before(s.to.Time) {
				return fmt.Sprintf("offset %d was appended at %s, at or after the stop time %s (stops are exclusive)",
					rec.Offset, rec.AppendTime.Format(timeFormat), s.to.Time.Format(timeFormat)), recs(rec)
			}
		}
	}
	return "", nil
}

// checkRange compares the records at or above the reference's start with
// the reference's records in the stream's range that pass the filter:
// they must be a prefix of them that holds at least the required ones.
func checkRange(_ *verdict, _ *index, ref *reference, s stream) (string, []history.Record) {
	lo, ok := rangeStart(ref, s)
	if !ok {
		return "", nil
	}
	hiReq, hiAllow := rangeStop(ref, s, lo)
	if what := lastNCount(ref, s); what != "" {
		return what, nil
	}
	next := func(off uint64) uint64 {
		for ; off < hiAllow; off++ {
			if rec, ok := ref.at(off); ok && (s.pred == nil || s.pred(rec)) {
				return off
			}
		}
		return hiAllow
	}
	e := next(max(lo, ref.start))
	for _, rec := range s.got {
		if rec.Offset < ref.start {
			continue // below every replica: checkContent judged it
		}
		switch {
		case e >= hiAllow:
			return fmt.Sprintf("offset %d is past the range, which ends before %d", rec.Offset, hiAllow), recs(rec)
		case rec.Offset > e:
			want, _ := ref.at(e)
			return fmt.Sprintf("offset %d is missing (offset %d came instead)", e, rec.Offset), recs(rec, want)
		case rec.Offset < e:
			return fmt.Sprintf("offset %d is before the range, which begins at %d", rec.Offset, e), recs(rec)
		}
		e = next(e + 1)
	}
	if e < hiReq {
		want, _ := ref.at(e)
		return fmt.Sprintf("ended before offset %d, but the range runs to %d", e, hiReq), recs(want)
	}
	return "", nil
}

// rangeStart is the first offset the stream should deliver, as far as the
// reference can tell (false: it cannot; the bounds were checked on the
// records). Earliest and a time before every held record resolve to the
// reference's start: records below it, removed by retention since, were
// checked by checkContent.
func rangeStart(ref *reference, s stream) (uint64, bool) {
	switch s.from.Kind {
	case history.AtOffset, history.AtMessageID:
		return s.from.Offset, true
	case history.Earliest:
		return ref.start, true
	case history.AtTime:
		return ref.firstAtOrAfter(ref.start, s.from.Time), true
	case history.LastN:
		if len(s.got) > 0 {
			return s.got[0].Offset, true // checkBounds and lastNCount judge where it began
		}
		return satSub(s.endAtStart, s.from.N), s.pred == nil && s.to.Kind == history.None
	}
	return 0, false
}

// rangeStop returns the end of the required records (the stream must
// reach it) and of the allowed ones (it must not go past it).
func rangeStop(ref *reference, s stream, lo uint64) (hiReq, hiAllow uint64) {
	switch s.to.Kind {
	case history.AtOffset, history.AtMessageID:
		hiAllow = max(lo, min(s.to.Offset, ref.end))
		hiReq = hiAllow
	case history.AtTime:
		hiAllow = ref.firstAtOrAfter(lo, s.to.Time)
		hiReq = hiAllow
	default: // None: to the end when the read began, which is at least EndAtStart
		hiAllow = ref.end
		hiReq = min(max(lo, s.endAtStart), ref.end)
	}
	if s.prefixOnly {
		hiReq = 0
	}
	return hiReq, hiAllow
}

// lastNCount: an unfiltered "last N" read to the end holds at least N
// records, or fewer only when it began at the log start. It may hold more:
// the broker reads the partition's end for the start and again for the
// stop, and a publish applied in between lengthens the range (checkBounds
// still requires a start no earlier than EndAtStart − N).
func lastNCount(ref *reference, s stream) string {
	if s.from.Kind != history.LastN || s.pred != nil || s.to.Kind != history.None || s.prefixOnly {
		return ""
	}
	if n := uint64(len(s.got)); n < s.from.N && n > 0 && s.got[0].Offset > ref.start {
		return fmt.Sprintf("returned %d records for the last %d, beginning at offset %d although the log held offset %d",
			n, s.from.N, s.got[0].Offset, s.got[0].Offset-1)
	}
	return ""
}

func satSub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// posString writes a position the way the CLI reads it.
func posString(p history.Position) string {
	switch p.Kind {
	case history.AtOffset:
		return fmt.Sprintf("offset %d", p.Offset)
	case history.AtTime:
		return "time " + p.Time.Format(time.RFC3339Nano)
	case history.AtMessageID:
		return fmt.Sprintf("message %s (offset %d)", p.ID, p.Offset)
	case history.LastN:
		return fmt.Sprintf("the last %d", p.N)
	case history.Earliest:
		return "earliest"
	case history.None:
		return "the end"
	}
	return fmt.Sprintf("unknown position %q", p.Kind)
}

// untransform checks that every record a transformed read delivered is the
// transform of the reference's record at its offset, and returns the
// reference's records in their place (records no replica holds any more
// are left out: they cannot be checked).
func untransform(x *index, r history.Read, tf func(history.Record) (history.Record, bool)) ([]history.Record, string, []history.Record) {
	ref := x.refs[part{r.Topic, r.Partition}]
	if ref == nil {
		return nil, "", nil
	}
	var out []history.Record
	for _, rec := range r.Records {
		orig, ok := ref.at(rec.Offset)
		if !ok {
			continue
		}
		want, keep := tf(orig)
		switch {
		case !keep:
			return nil, fmt.Sprintf("offset %d was delivered, but the transform drops it", rec.Offset), recs(rec, orig)
		case !sameRecord(want, rec):
			return nil, fmt.Sprintf("offset %d is not what the transform makes of the stored record (%s)", rec.Offset, recordDiff(rec, want)), recs(rec, want)
		}
		out = append(out, orig)
	}
	return out, "", nil
}
