package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// The event store: load one key's history (an entity), decide, and append
// only if nobody else appended since (Append with ExpectVersion); or read
// what a query over tags and types matches and append only if nothing
// matching came after the position read (FailIfMatched: dynamic
// consistency boundaries).

// The headers the server indexes: a record's type and its tags.
const (
	TypeHeader = "rewind-type"
	TagHeader  = "rewind-tag"
)

// Condition is one condition of a conditional append (Append). Build it
// with ExpectVersion, ExpectNone, ExpectExists, ExpectAny, ForKey or
// FailIfMatched.
type Condition struct {
	key    []byte // nil: the Append's key
	expect rewindv1.Expect
	ver    uint64
	query  *Query
	after  *uint64
}

// ExpectVersion appends only if the key's last version is v: the
// KeyVersion of the last record the writer loaded.
func ExpectVersion(v uint64) Condition {
	return Condition{expect: rewindv1.Expect_EXPECT_VERSION, ver: v}
}

// ExpectNone appends only if the key has no record (a new entity).
func ExpectNone() Condition { return Condition{expect: rewindv1.Expect_EXPECT_NONE} }

// ExpectExists appends only if the key has a record.
func ExpectExists() Condition { return Condition{expect: rewindv1.Expect_EXPECT_EXISTS} }

// ExpectAny appends whatever the key's history (no check; the append is
// still all or nothing).
func ExpectAny() Condition { return Condition{expect: rewindv1.Expect_EXPECT_ANY_UNSPECIFIED} }

// ForKey applies an expectation to another key than the Append's: a
// multi-key atomic append (the keys must share a partition).
func ForKey(key []byte, c Condition) Condition {
	c.key = slices.Clone(key)
	return c
}

// Query selects records by type and tags: a record matches when any item
// does.
type Query []QueryItem

// QueryItem matches a record whose type is one of Types (any when empty)
// and that carries every tag of Tags.
type QueryItem struct {
	Types []string
	Tags  []string
}

func (q Query) proto() *rewindv1.Query {
	out := &rewindv1.Query{}
	for _, it := range q {
		out.Items = append(out.Items, &rewindv1.QueryItem{Types: it.Types, Tags: it.Tags})
	}
	return out
}

// FailIfMatched appends only if no record matching q was appended after
// position (the Position of the read that decided; nil: none may exist).
func FailIfMatched(q Query, position *uint64) Condition {
	return Condition{query: &q, after: position}
}

// ConditionError is a conditional append refused: nothing was stored.
type ConditionError struct {
	Partition uint32
	// A key expectation failed: the key, the version expected (with
	// Expected "version"), and the key's actual last version (HasActual
	// false: the key has no record).
	Key             []byte
	Expected        string // "none", "exists", "version"
	ExpectedVersion uint64
	Actual          uint64
	HasActual       bool
	// A tag condition failed: the offset of a matching record.
	Matched       bool
	MatchedOffset uint64
	err           error
}

func (e *ConditionError) Error() string { return e.err.Error() }

// Unwrap returns the server's error (FailedPrecondition).
func (e *ConditionError) Unwrap() error { return e.err }

func conditionError(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		return err
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if c, ok := v.(*rewindv1.ConditionFailed); ok {
			out := &ConditionError{Partition: c.GetPartition(), err: err}
			if c.GetQuery() != nil {
				out.Matched, out.MatchedOffset = true, c.GetMatchingOffset()
				return out
			}
			out.Key, out.ExpectedVersion = c.GetKey(), c.GetExpectedVersion()
			switch c.GetExpected() {
			case rewindv1.Expect_EXPECT_NONE:
				out.Expected = "none"
			case rewindv1.Expect_EXPECT_EXISTS:
				out.Expected = "exists"
			case rewindv1.Expect_EXPECT_VERSION:
				out.Expected = "version"
			default:
				out.Expected = "any"
			}
			if c.ActualVersion != nil {
				out.Actual, out.HasActual = c.GetActualVersion(), true
			}
			return out
		}
	}
	return err
}

// Append appends msgs under key (a message without a key gets it) as one
// conditional append: all or nothing, only if every condition holds when
// the partition stores them. A refusal is a *ConditionError. Messages
// without an idempotency key get one, so the client's own retries are
// answered with the original results.
//
// The records and the keys the conditions name must share a partition:
// one key, keys that hash alike, an explicit Partition, or a topic with
// one partition.
func (c *Client) Append(ctx context.Context, topic string, key []byte, msgs []Message, conds ...Condition) ([]Result, error) {
	if len(key) == 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("client: Append needs a key"))
	}
	msgs = slices.Clone(msgs)
	for i := range msgs {
		if len(msgs[i].Key) == 0 {
			msgs[i].Key = key
		}
	}
	req, err := c.publishRequest(topic, msgs, true)
	if err != nil {
		return nil, err
	}
	hasKey := false
	for _, cd := range conds {
		if cd.query != nil {
			req.Conditions = append(req.Conditions, &rewindv1.AppendCondition{Query: cd.query.proto(), After: cd.after})
			continue
		}
		k := cd.key
		if k == nil {
			k, hasKey = key, true
		}
		req.Expectations = append(req.Expectations, &rewindv1.KeyExpectation{Key: k, Expect: cd.expect, Version: cd.ver})
	}
	if !hasKey && len(req.Expectations) == 0 && len(req.Conditions) == 0 {
		// No condition: still one atomic append of the key.
		req.Expectations = append(req.Expectations, &rewindv1.KeyExpectation{Key: key})
	}
	resp, err := c.publish(ctx, req)
	if err != nil {
		return nil, conditionError(err)
	}
	out := make([]Result, len(resp.GetResults()))
	for i, r := range resp.GetResults() {
		out[i] = resultOf(r)
	}
	return out, nil
}

// ReadOption tunes ReadKey and Query.
type ReadOption func(*rewindv1.ReadRequest)

// FromVersion starts a key read at version v (ends there with Backward).
func FromVersion(v uint64) ReadOption {
	return func(r *rewindv1.ReadRequest) { r.From = &rewindv1.ReadRequest_FromVersion{FromVersion: v} }
}

// FromOffset starts at the first matching record at or after offset (at or
// before it with Backward).
func FromOffset(offset uint64) ReadOption {
	return func(r *rewindv1.ReadRequest) { r.From = &rewindv1.ReadRequest_FromOffset{FromOffset: offset} }
}

// FromTime starts at the first matching record appended at or after t
// (the last one before it with Backward).
func FromTime(t time.Time) ReadOption {
	return func(r *rewindv1.ReadRequest) { r.From = &rewindv1.ReadRequest_FromTime{FromTime: timestamppb.New(t)} }
}

// LastN reads the last n matching records.
func LastN(n uint64) ReadOption {
	return func(r *rewindv1.ReadRequest) { r.From = &rewindv1.ReadRequest_Last{Last: n} }
}

// Backward returns the records newest first.
func Backward() ReadOption { return func(r *rewindv1.ReadRequest) { r.Backward = true } }

// Limit bounds the records returned (default and maximum 10,000).
func Limit(n uint32) ReadOption { return func(r *rewindv1.ReadRequest) { r.Limit = n } }

// InPartition names the partition (a query on a topic of several
// partitions; a key published with an explicit partition).
func InPartition(p uint32) ReadOption { return func(r *rewindv1.ReadRequest) { r.Partition = &p } }

// ReadResult is what a read returns.
type ReadResult struct {
	Partition uint32
	Records   []Record
	// Key reads: the key's last version and the earliest still held
	// (HasHead false: the key has no record).
	Head, Earliest       uint64
	HasHead, HasEarliest bool
	// Position is the partition's last offset when read: give it to
	// FailIfMatched. HasPosition false: the partition is empty.
	Position    uint64
	HasPosition bool
	// More: the limit cut the read short.
	More bool
}

// ReadKey reads one key's history (an entity's events) through the key
// index, from the partition's leader: what it returns includes every
// acknowledged append.
func (c *Client) ReadKey(ctx context.Context, topic string, key []byte, opts ...ReadOption) (*ReadResult, error) {
	req := &rewindv1.ReadRequest{Topic: topic, Select: &rewindv1.ReadRequest_Key{Key: key}}
	return c.read(ctx, req, opts)
}

// Query reads the records q matches in one partition (InPartition unless
// the topic has one), and the position to pass to FailIfMatched.
func (c *Client) Query(ctx context.Context, topic string, q Query, opts ...ReadOption) (*ReadResult, error) {
	req := &rewindv1.ReadRequest{Topic: topic, Select: &rewindv1.ReadRequest_Query{Query: q.proto()}}
	return c.read(ctx, req, opts)
}

func (c *Client) read(ctx context.Context, req *rewindv1.ReadRequest, opts []ReadOption) (*ReadResult, error) {
	for _, o := range opts {
		o(req)
	}
	resp, err := unary(ctx, c, c.repeatable(proto.Size(req)), func(ctx context.Context, cl *Client) (*rewindv1.ReadResponse, error) {
		return cl.store.Read(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &ReadResult{
		Partition: resp.GetPartition(), Records: make([]Record, len(resp.GetRecords())),
		Head: resp.GetHeadVersion(), HasHead: resp.HeadVersion != nil,
		Earliest: resp.GetEarliestVersion(), HasEarliest: resp.EarliestVersion != nil,
		Position: resp.GetPosition(), HasPosition: resp.Position != nil, More: resp.GetMore(),
	}
	for i, r := range resp.GetRecords() {
		out.Records[i] = recordOf(r)
	}
	return out, nil
}

// Version returns the last version of the records, for ExpectVersion: the
// key's head, or ExpectNone's case when ok is false.
func (r *ReadResult) Version() (v uint64, ok bool) { return r.Head, r.HasHead }

// Expect returns the condition that the key is still as this read found
// it: ExpectVersion(head), or ExpectNone for a key without records.
func (r *ReadResult) Expect() Condition {
	if !r.HasHead {
		return ExpectNone()
	}
	return ExpectVersion(r.Head)
}

// Summary says what was expected and what the log holds, in one line.
func (e *ConditionError) Summary() string {
	if e.Matched {
		return fmt.Sprintf("a matching record was appended at offset %d", e.MatchedOffset)
	}
	actual := "none"
	if e.HasActual {
		actual = fmt.Sprint(e.Actual)
	}
	want := e.Expected
	if want == "version" {
		want = fmt.Sprint(e.ExpectedVersion)
	}
	return fmt.Sprintf("key %q: expected %s, actual %s", e.Key, want, actual)
}
