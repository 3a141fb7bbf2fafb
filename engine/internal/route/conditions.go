package route

import (
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"

	"github.com/rewind-io/rewind/engine/internal/partition"
)

// The wire form of conditional appends, shared by the edge (which reads
// them from clients) and the hop to a leader (which sends them on).

// ConditionsToProto returns the request fields of c.
func ConditionsToProto(c *partition.Conditions) ([]*rewindv1.KeyExpectation, []*rewindv1.AppendCondition) {
	if c.Empty() {
		return nil, nil
	}
	var ks []*rewindv1.KeyExpectation
	for _, k := range c.Keys {
		ks = append(ks, &rewindv1.KeyExpectation{Key: k.Key, Expect: expectToProto(k.Expect), Version: k.Version})
	}
	var ts []*rewindv1.AppendCondition
	for _, t := range c.Tags {
		ac := &rewindv1.AppendCondition{Query: QueryToProto(t.Query)}
		if t.After != partition.NoPosition {
			after := uint64(t.After)
			ac.After = &after
		}
		ts = append(ts, ac)
	}
	return ks, ts
}

// ConditionsFromProto returns the conditions of a publish request (nil:
// none).
func ConditionsFromProto(ks []*rewindv1.KeyExpectation, ts []*rewindv1.AppendCondition) *partition.Conditions {
	if len(ks) == 0 && len(ts) == 0 {
		return nil
	}
	c := &partition.Conditions{}
	for _, k := range ks {
		c.Keys = append(c.Keys, partition.KeyCondition{Key: k.GetKey(), Expect: expectFromProto(k.GetExpect()), Version: k.GetVersion()})
	}
	for _, t := range ts {
		tc := partition.TagCondition{Query: QueryFromProto(t.GetQuery()), After: partition.NoPosition}
		if t.After != nil {
			tc.After = int64(min(t.GetAfter(), 1<<63-1))
		}
		c.Tags = append(c.Tags, tc)
	}
	return c
}

// QueryToProto returns the wire form of q.
func QueryToProto(q partition.Query) *rewindv1.Query {
	out := &rewindv1.Query{}
	for _, it := range q {
		out.Items = append(out.Items, &rewindv1.QueryItem{Types: it.Types, Tags: it.Tags})
	}
	return out
}

// QueryFromProto returns the query of q.
func QueryFromProto(q *rewindv1.Query) partition.Query {
	var out partition.Query
	for _, it := range q.GetItems() {
		out = append(out, partition.QueryItem{Types: it.GetTypes(), Tags: it.GetTags()})
	}
	return out
}

func expectToProto(e partition.Expectation) rewindv1.Expect {
	switch e {
	case partition.ExpectNone:
		return rewindv1.Expect_EXPECT_NONE
	case partition.ExpectExists:
		return rewindv1.Expect_EXPECT_EXISTS
	case partition.ExpectVersion:
		return rewindv1.Expect_EXPECT_VERSION
	}
	return rewindv1.Expect_EXPECT_ANY_UNSPECIFIED
}

func expectFromProto(e rewindv1.Expect) partition.Expectation {
	switch e {
	case rewindv1.Expect_EXPECT_NONE:
		return partition.ExpectNone
	case rewindv1.Expect_EXPECT_EXISTS:
		return partition.ExpectExists
	case rewindv1.Expect_EXPECT_VERSION:
		return partition.ExpectVersion
	}
	return partition.ExpectAny
}

// ConditionFailedToProto is the error detail of a refused conditional
// append in partition part.
func ConditionFailedToProto(part uint32, e *partition.ConditionError) *rewindv1.ConditionFailed {
	d := &rewindv1.ConditionFailed{Partition: part}
	if e.Tag {
		d.Query, d.MatchingOffset = QueryToProto(e.Query), e.Offset
		if e.After != partition.NoPosition {
			after := uint64(e.After)
			d.After = &after
		}
		return d
	}
	d.Key, d.Expected, d.ExpectedVersion = e.Key, expectToProto(e.Expected.Expect), e.Expected.Version
	if e.Exists {
		v := e.Actual
		d.ActualVersion = &v
	}
	return d
}

// ConditionFailedFromProto is the refusal the detail d describes.
func ConditionFailedFromProto(d *rewindv1.ConditionFailed) *partition.ConditionError {
	if d.GetQuery() != nil {
		e := &partition.ConditionError{Tag: true, Query: QueryFromProto(d.GetQuery()), After: partition.NoPosition, Offset: d.GetMatchingOffset()}
		if d.After != nil {
			e.After = int64(min(d.GetAfter(), 1<<63-1))
		}
		return e
	}
	e := &partition.ConditionError{Key: d.GetKey(), Expected: partition.KeyCondition{Key: d.GetKey(), Expect: expectFromProto(d.GetExpected()), Version: d.GetExpectedVersion()}}
	if d.ActualVersion != nil {
		e.Actual, e.Exists = d.GetActualVersion(), true
	}
	return e
}
