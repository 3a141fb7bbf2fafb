package check

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// index is a history arranged for the checkers: replicas by partition, the
// reference replica of each partition, publishes by value and by
// acknowledged offset. It only reads the history.
type index struct {
	h        *history.History
	parts    []part                      // every partition with a replica, sorted
	replicas map[part][]*history.Replica // sorted by node
	refs     map[part]*reference         // one per partition in parts
	byValue  map[topicValue]int          // index in h.Publishes
	acked    map[part]map[uint64]int     // Acked publishes by acknowledged offset
	topics   map[string]*history.Topic   // by name
}

type filterFunc = func(history.Record) bool

type topicValue struct{ topic, value string }

func newIndex(h *history.History) *index {
	x := &index{
		h:        h,
		replicas: map[part][]*history.Replica{},
		refs:     map[part]*reference{},
		byValue:  map[topicValue]int{},
		acked:    map[part]map[uint64]int{},
		topics:   map[string]*history.Topic{},
	}
	for i := range h.Topics {
		x.topics[h.Topics[i].Name] = &h.Topics[i]
	}
	for i := range h.Replicas {
		r := &h.Replicas[i]
		p := part{r.Topic, r.Partition}
		x.replicas[p] = append(x.replicas[p], r)
	}
	for p, rs := range x.replicas {
		slices.SortFunc(rs, func(a, b *history.Replica) int { return cmp.Compare(a.Node, b.Node) })
		x.parts = append(x.parts, p)
		x.refs[p] = newReference(p, rs)
	}
	slices.SortFunc(x.parts, func(a, b part) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.id, b.id))
	})
	for i, pb := range h.Publishes {
		tv := topicValue{pb.Topic, pb.Value}
		if _, ok := x.byValue[tv]; !ok {
			x.byValue[tv] = i
		}
		if pb.Outcome == history.Acked {
			p := part{pb.Topic, pb.Partition}
			if x.acked[p] == nil {
				x.acked[p] = map[uint64]int{}
			}
			if _, ok := x.acked[p][pb.Offset]; !ok {
				x.acked[p][pb.Offset] = i
			}
		}
	}
	return x
}

// reference is what a partition holds according to its reference
// replica: the one with the highest End, then the lowest Start, then the
// lowest node ID. Only its dense prefix is used: recs[i] is at offset
// start+i, and end is start+len(recs). The Log checker reports any
// replica that differs from it.
type reference struct {
	part
	node       uint64
	start, end uint64
	recs       []history.Record
}

func newReference(p part, rs []*history.Replica) *reference {
	best := rs[0]
	for _, r := range rs[1:] {
		if r.End > best.End || (r.End == best.End && r.Start < best.Start) {
			best = r
		}
	}
	ref := &reference{part: p, node: best.Node, start: best.Start, end: best.Start}
	for i, rec := range best.Records {
		if rec.Offset != best.Start+uint64(i) {
			break
		}
		ref.recs = append(ref.recs, rec)
		ref.end++
	}
	return ref
}

// at returns the reference's record at off.
func (r *reference) at(off uint64) (history.Record, bool) {
	if off < r.start || off >= r.end {
		return history.Record{}, false
	}
	return r.recs[off-r.start], true
}

// firstAtOrAfter is the first offset in [from, end) whose record's append
// time is at or after t, or end when there is none. It relies on append
// times never decreasing (the Log checker reports a replica where they do).
func (r *reference) firstAtOrAfter(from uint64, t time.Time) uint64 {
	lo := max(from, r.start)
	if lo >= r.end {
		return r.end
	}
	recs := r.recs[lo-r.start:]
	return lo + uint64(sort.Search(len(recs), func(i int) bool { return !recs[i].AppendTime.Before(t) }))
}

// recordAt finds a replica's record at an offset (its records are
// expected dense and in order; the Log checker reports them otherwise).
func recordAt(r *history.Replica, off uint64) (history.Record, bool) {
	if off >= r.Start && off-r.Start < uint64(len(r.Records)) && r.Records[off-r.Start].Offset == off {
		return r.Records[off-r.Start], true
	}
	i, ok := slices.BinarySearchFunc(r.Records, off, func(rec history.Record, off uint64) int { return cmp.Compare(rec.Offset, off) })
	if !ok {
		return history.Record{}, false
	}
	return r.Records[i], true
}

// publish returns the publish whose value a record carries.
func (x *index) publish(topic string, rec history.Record) (history.Publish, bool) {
	i, ok := x.byValue[topicValue{topic, rec.Value}]
	if !ok {
		return history.Publish{}, false
	}
	return x.h.Publishes[i], true
}

// ackedAt returns the publish acknowledged at an offset of a partition.
func (x *index) ackedAt(p part, off uint64) (history.Publish, bool) {
	i, ok := x.acked[p][off]
	if !ok {
		return history.Publish{}, false
	}
	return x.h.Publishes[i], true
}

// filter returns the predicate of a topic's filter.
func (x *index) filter(topic, name string) (filterFunc, bool) {
	t, ok := x.topics[topic]
	if !ok || t.Filters == nil {
		return nil, false
	}
	f, ok := t.Filters[name]
	return f, ok && f != nil
}

// transform returns the transform named name of topic (nil, false: none).
func (x *index) transform(topic, name string) (func(history.Record) (history.Record, bool), bool) {
	t, ok := x.topics[topic]
	if !ok || t.Transforms == nil {
		return nil, false
	}
	f, ok := t.Transforms[name]
	return f, ok && f != nil
}

// sameRecord reports whether two copies of a record agree on every field
// the producer or the broker set (Partition is implied by where they were
// read).
func sameRecord(a, b history.Record) bool {
	return a.Offset == b.Offset && a.Key == b.Key && a.Value == b.Value &&
		a.IdemKey == b.IdemKey && a.AppendTime.Equal(b.AppendTime)
}

// recordDiff names the fields on which two copies of a record differ.
func recordDiff(a, b history.Record) string {
	var d []string
	if a.Offset != b.Offset {
		d = append(d, fmt.Sprintf("offset %d vs %d", a.Offset, b.Offset))
	}
	if a.Key != b.Key {
		d = append(d, fmt.Sprintf("key %q vs %q", a.Key, b.Key))
	}
	if a.Value != b.Value {
		d = append(d, fmt.Sprintf("value %q vs %q", a.Value, b.Value))
	}
	if a.IdemKey != b.IdemKey {
		d = append(d, fmt.Sprintf("idempotency key %q vs %q", a.IdemKey, b.IdemKey))
	}
	if !a.AppendTime.Equal(b.AppendTime) {
		d = append(d, fmt.Sprintf("append time %s vs %s", a.AppendTime.Format(timeFormat), b.AppendTime.Format(timeFormat)))
	}
	return strings.Join(d, ", ")
}

const timeFormat = "15:04:05.000000000"
