package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/rewind-io/rewind/scenarios/history"
)

// Log judges what the replicas hold against what the publishers were told.
// Stats: partitions, replicas, records (in the reference replicas), acked,
// lost, duplicated, reordered, retention_exempt (acked records not checked
// on a replica because its Start is past their offset).
func Log(h *history.History) Verdict {
	v, _ := checkLog(newIndex(h))
	return v
}

// logCounts are the Log checker's counts that Summary reports.
type logCounts struct {
	lost, duplicated, reordered int
}

// loc is where a value is stored.
type loc struct {
	part
	node   uint64
	offset uint64
	rec    history.Record
}

func checkLog(x *index) (Verdict, logCounts) {
	b := newVerdict("log", "every acknowledged record is stored exactly once, at its acknowledged offset, on every replica; "+
		"offsets are dense; nothing never attempted is stored; each publisher's order holds; replicas are identical; "+
		"a failed publish is absent and an ambiguous one stored at most once")
	var c logCounts
	if len(x.h.Replicas) == 0 {
		return b.skip("no replicas recorded"), c
	}
	b.set("partitions", float64(len(x.parts)))
	b.set("replicas", float64(len(x.h.Replicas)))
	for _, p := range x.parts {
		b.v.Stats["records"] += float64(len(x.refs[p].recs))
		for _, r := range x.replicas[p] {
			checkDense(b, p, r)
			checkAppendTimes(b, p, r)
		}
		checkReplicasAgree(b, x, p)
	}
	values, locs := locate(x)
	c.duplicated = checkStoredValues(b, x, values, locs)
	lost, misplaced := checkAcked(b, x, locs)
	c.lost = lost
	c.reordered = misplaced + checkPublisherOrder(b, x)
	b.set("lost", float64(c.lost))
	b.set("duplicated", float64(c.duplicated))
	b.set("reordered", float64(c.reordered))
	return b.done(), c
}

// checkDense: a replica holds exactly the offsets [Start, End), in order.
func checkDense(b *verdict, p part, r *history.Replica) {
	if r.Start > r.End {
		b.addf(nil, nil, "replica of %s on node %d has Start %d after End %d", p, r.Node, r.Start, r.End)
		return
	}
	for i, rec := range r.Records {
		if want := r.Start + uint64(i); rec.Offset != want {
			b.addf(recs(rec), nil, "replica of %s on node %d: offsets are not dense: record %d of [%d, %d) is at offset %d, expected %d",
				p, r.Node, i, r.Start, r.End, rec.Offset, want)
			return
		}
	}
	if n := uint64(len(r.Records)); n != r.End-r.Start {
		b.addf(nil, nil, "replica of %s on node %d holds %d records but claims [%d, %d): missing %s",
			p, r.Node, n, r.Start, r.End, offsetRange(r.Start+n, r.End-1))
	}
}

// checkAppendTimes: append times never decrease within a partition (time
// seeks rely on it, and clock faults must not break it).
func checkAppendTimes(b *verdict, p part, r *history.Replica) {
	for i := 1; i < len(r.Records); i++ {
		prev, rec := r.Records[i-1], r.Records[i]
		if rec.AppendTime.Before(prev.AppendTime) {
			b.addf(recs(prev, rec), nil, "replica of %s on node %d: append time goes back from %s at offset %d to %s at offset %d",
				p, r.Node, prev.AppendTime.Format(timeFormat), prev.Offset, rec.AppendTime.Format(timeFormat), rec.Offset)
			return
		}
	}
}

// checkReplicasAgree compares every replica with the reference: the same
// End, the same records over their common offsets, and the same Digest
// when both report one over the same range.
func checkReplicasAgree(b *verdict, x *index, p part) {
	ref := x.refs[p]
	var refRep *history.Replica
	for _, r := range x.replicas[p] {
		if r.Node == ref.node {
			refRep = r
		}
	}
	for _, r := range x.replicas[p] {
		if r == refRep {
			continue
		}
		if r.End != refRep.End {
			b.addf(nil, nil, "replicas of %s differ in length: node %d ends at %d, node %d at %d", p, refRep.Node, refRep.End, r.Node, r.End)
		}
		if d := firstDifference(ref, r); d != "" {
			b.addf(nil, nil, "replicas of %s differ: %s", p, d)
		}
		if r.Digest != "" && refRep.Digest != "" && r.Start == refRep.Start && r.End == refRep.End && r.Digest != refRep.Digest {
			b.addf(nil, nil, "replicas of %s over [%d, %d) report different digests: node %d %q, node %d %q",
				p, r.Start, r.End, refRep.Node, refRep.Digest, r.Node, r.Digest)
		}
	}
}

// firstDifference describes the first offset at which a replica holds
// something other than the reference, over the offsets both hold.
func firstDifference(ref *reference, r *history.Replica) string {
	for _, rec := range r.Records {
		want, ok := ref.at(rec.Offset)
		if !ok {
			continue
		}
		if !sameRecord(want, rec) {
			return fmt.Sprintf("at offset %d node %d and node %d disagree (%s)", rec.Offset, ref.node, r.Node, recordDiff(want, rec))
		}
	}
	return ""
}

// locate lists where each stored value is, values in the order first
// seen (partitions sorted, nodes sorted, offsets in order).
func locate(x *index) ([]topicValue, map[topicValue][]loc) {
	var values []topicValue
	locs := map[topicValue][]loc{}
	for _, p := range x.parts {
		for _, r := range x.replicas[p] {
			for _, rec := range r.Records {
				tv := topicValue{p.topic, rec.Value}
				if _, ok := locs[tv]; !ok {
					values = append(values, tv)
				}
				locs[tv] = append(locs[tv], loc{part: p, node: r.Node, offset: rec.Offset, rec: rec})
			}
		}
	}
	return values, locs
}

// checkStoredValues judges each stored value against the publish that
// sent it: attempted, not stored twice on a replica, not stored when the
// publish failed, and carrying the publish's key and idempotency key. It
// returns how many publishes are duplicated.
func checkStoredValues(b *verdict, x *index, values []topicValue, locs map[topicValue][]loc) int {
	duplicated := 0
	for _, tv := range values {
		ls := locs[tv]
		first := ls[0]
		pb, ok := x.publish(tv.topic, first.rec)
		if !ok {
			b.addf(recs(first.rec), nil, "%s offset %d holds value %q that no publish attempted (%s)", first.part, first.offset, tv.value, where(ls))
			continue
		}
		if dup := duplicates(ls); dup != "" {
			duplicated++
			b.addf(recsOf(ls), pubs(pb), "%s (%s) is stored more than once: %s", nameOf(pb), pb.Outcome, dup)
		}
		if pb.Outcome == history.Failed {
			b.addf(recsOf(ls), pubs(pb), "%s failed (%s) but is stored: %s", nameOf(pb), pb.Err, where(ls))
		}
		for _, l := range ls {
			if l.rec.Key != pb.Key || l.rec.IdemKey != pb.IdemKey {
				b.addf(recs(l.rec), pubs(pb), "%s offset %d on node %d holds the value of %s with key %q and idempotency key %q; it was published with %q and %q",
					l.part, l.offset, l.node, nameOf(pb), l.rec.Key, l.rec.IdemKey, pb.Key, pb.IdemKey)
				break
			}
		}
	}
	return duplicated
}

// duplicates describes the replicas holding a value more than once, or
// returns "".
func duplicates(ls []loc) string {
	type replicaKey struct {
		part
		node uint64
	}
	offsets := map[replicaKey][]uint64{}
	var order []replicaKey
	for _, l := range ls {
		k := replicaKey{l.part, l.node}
		if _, ok := offsets[k]; !ok {
			order = append(order, k)
		}
		offsets[k] = append(offsets[k], l.offset)
	}
	var d []string
	for _, k := range order {
		if len(offsets[k]) > 1 {
			d = append(d, fmt.Sprintf("%s on node %d at offsets %s", k.part, k.node, joinOffsets(offsets[k])))
		}
	}
	return strings.Join(d, "; ")
}

// where lists the locations of a value.
func where(ls []loc) string {
	var d []string
	for _, l := range ls {
		d = append(d, fmt.Sprintf("%s offset %d on node %d", l.part, l.offset, l.node))
	}
	return strings.Join(d, ", ")
}

func recsOf(ls []loc) []history.Record {
	var rs []history.Record
	for _, l := range ls {
		rs = append(rs, l.rec)
	}
	return rs
}

func joinOffsets(offs []uint64) string {
	s := make([]string, len(offs))
	for i, o := range offs {
		s[i] = fmt.Sprint(o)
	}
	return strings.Join(s, ", ")
}

// checkAcked: each acknowledged publish is at its offset on every replica
// whose Start is not past it. It returns how many acknowledged publishes
// are lost (missing from some replica that should hold them) and how many
// are stored at another offset than acknowledged.
func checkAcked(b *verdict, x *index, locs map[topicValue][]loc) (lost, misplaced int) {
	for _, pb := range x.h.Publishes {
		if pb.Outcome != history.Acked {
			continue
		}
		b.inc("acked")
		p := part{pb.Topic, pb.Partition}
		reps := x.replicas[p]
		if len(reps) == 0 {
			lost++
			b.addf(nil, pubs(pb), "%s was acknowledged at %s offset %d, but no replica of %s was recorded", nameOf(pb), p, pb.Offset, p)
			continue
		}
		var missing, elsewhere []string
		for _, r := range reps {
			if pb.Offset < r.Start {
				b.inc("retention_exempt")
				continue
			}
			if m, e := placeOn(pb, p, r, locs); m != "" {
				missing = append(missing, m)
			} else if e != "" {
				elsewhere = append(elsewhere, e)
			}
		}
		what := "acknowledged"
		if pb.Duplicate {
			what = "acknowledged as a duplicate"
		}
		if len(missing) > 0 {
			lost++
			b.addf(recsOf(locs[topicValue{pb.Topic, pb.Value}]), pubs(pb), "%s was %s at %s offset %d but is missing: %s",
				nameOf(pb), what, p, pb.Offset, strings.Join(missing, "; "))
		} else if len(elsewhere) > 0 {
			misplaced++
			b.addf(recsOf(locs[topicValue{pb.Topic, pb.Value}]), pubs(pb), "%s was %s at %s offset %d but is stored at another offset: %s",
				nameOf(pb), what, p, pb.Offset, strings.Join(elsewhere, "; "))
		}
	}
	return lost, misplaced
}

// placeOn says whether an acknowledged publish is missing from a replica
// (missing != "") or stored there at another offset (elsewhere != "").
func placeOn(pb history.Publish, p part, r *history.Replica, locs map[topicValue][]loc) (missing, elsewhere string) {
	var at []uint64
	for _, l := range locs[topicValue{pb.Topic, pb.Value}] {
		if l.part == p && l.node == r.Node {
			at = append(at, l.offset)
		}
	}
	switch {
	case slices.Contains(at, pb.Offset):
		return "", ""
	case len(at) > 0:
		return "", fmt.Sprintf("node %d at offset %s", r.Node, joinOffsets(at))
	case pb.Offset >= r.End:
		return fmt.Sprintf("node %d ends at %d", r.Node, r.End), ""
	}
	held := "nothing"
	if rec, ok := recordAt(r, pb.Offset); ok {
		held = fmt.Sprintf("value %q", rec.Value)
	}
	return fmt.Sprintf("node %d holds %s there", r.Node, held), ""
}

// checkPublisherOrder: a sequential publisher's acknowledged offsets in
// one partition increase with its sequence numbers. It returns how many
// acknowledgements break that order.
func checkPublisherOrder(b *verdict, x *index) int {
	type stream struct {
		publisher int
		part
	}
	byStream := map[stream][]history.Publish{}
	var order []stream
	for _, pb := range x.h.Publishes {
		if pb.Outcome != history.Acked || pb.Duplicate {
			continue // a duplicate's ack names its original, judged elsewhere
		}
		s := stream{pb.Publisher, part{pb.Topic, pb.Partition}}
		if _, ok := byStream[s]; !ok {
			order = append(order, s)
		}
		byStream[s] = append(byStream[s], pb)
	}
	reordered := 0
	for _, s := range order {
		ps := byStream[s]
		slices.SortStableFunc(ps, func(a, b history.Publish) int { return cmp.Compare(a.Seq, b.Seq) })
		for i := 1; i < len(ps); i++ {
			if prev, pb := ps[i-1], ps[i]; pb.Offset <= prev.Offset {
				reordered++
				b.addf(nil, pubs(prev, pb), "publisher %d's order breaks in %s: seq %d was acknowledged at offset %d, after seq %d at offset %d",
					s.publisher, s.part, pb.Seq, pb.Offset, prev.Seq, prev.Offset)
			}
		}
	}
	return reordered
}

// offsetRange names the offsets from a to b.
func offsetRange(a, b uint64) string {
	if a == b {
		return fmt.Sprintf("offset %d", a)
	}
	return fmt.Sprintf("offsets %d to %d", a, b)
}
