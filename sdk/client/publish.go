package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Message is a record to publish.
type Message struct {
	// Key decides the partition (hash of the key over the topic's current
	// partition count) unless Partition is set; without either, the
	// server spreads records evenly over the partitions in runs of 16 KiB
	// (a request's keyless records stay together up to that size).
	Key   []byte
	Value []byte
	// Headers are stored and delivered in order.
	Headers []Header
	// IdempotencyKey is stored and delivered with the record so consumers
	// can drop duplicates (at most 256 bytes). It is unique in the topic
	// within its dedupe window: the same record published again, to any
	// partition, is answered with the original (Result.Duplicate); a
	// different record with the key is refused (FailedPrecondition).
	IdempotencyKey string
	// EventTime is the producer's own timestamp (optional).
	EventTime time.Time
	// Partition, when set, picks the partition explicitly.
	Partition *uint32
	// Type and Tags are indexed (headers "rewind-type" and "rewind-tag"):
	// queries (Client.Query) and append conditions (FailIfMatched) match
	// them.
	Type string
	Tags []string
}

// Result says where a published record was stored.
type Result struct {
	Partition  uint32
	Offset     uint64
	MessageID  string
	AppendTime time.Time
	// Duplicate: the record was stored before under its idempotency key;
	// Partition, Offset and MessageID are the original's.
	Duplicate bool
	// KeyVersion is the record's position in its key's history (0, 1,
	// 2, ...) when HasKeyVersion (the record has a key).
	KeyVersion    uint64
	HasKeyVersion bool
}

// The event times a record can carry: those of an int64 of Unix
// nanoseconds, about 1677-09-21 to 2262-04-11.
var (
	minEventTime = time.Unix(0, math.MinInt64)
	maxEventTime = time.Unix(0, math.MaxInt64)
)

// Publish appends msgs in one request and returns once they are durable,
// with one result per message in order. Messages bound for the same
// partition keep their order. A bad message (too large, unknown partition)
// fails the whole request with InvalidArgument and stores nothing.
//
// When some partitions fail and others store their messages, Publish
// returns the results with a *PartialError listing the messages that were
// not acknowledged; the others were stored.
//
// A failure whose outcome is unknown (Unavailable, a timeout, the server
// too busy) is retried with the same request (see WithPublishRetry), on
// another node when the node in use failed: give messages idempotency keys
// (or use WithGeneratedIdempotencyKeys) and a retry never stores a record
// twice within the topic's dedupe window; the result then says Duplicate.
// Without a key, a record whose first attempt was stored but not answered
// is stored again by the retry.
func (c *Client) Publish(ctx context.Context, topic string, msgs ...Message) ([]Result, error) {
	req, err := c.publishRequest(topic, msgs, false)
	if err != nil {
		return nil, err
	}
	resp, err := c.publish(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(resp.GetResults()))
	var partial *PartialError
	for i, r := range resp.GetResults() {
		if e := r.GetError(); e != nil {
			if partial == nil {
				partial = &PartialError{}
			}
			partial.Failed = append(partial.Failed, FailedMessage{Index: i, Partition: r.GetPartition(), Err: codeError(e.GetCode(), e.GetMessage()), NotStored: e.GetNotStored()})
			out[i] = Result{Partition: r.GetPartition()}
			continue
		}
		out[i] = resultOf(r)
	}
	if partial != nil {
		return out, partial
	}
	return out, nil
}

func resultOf(r *rewindv1.PublishResult) Result {
	out := Result{
		Partition: r.GetPartition(), Offset: r.GetOffset(), MessageID: r.GetMessageId(),
		AppendTime: time.Unix(0, r.GetAppendTimeUnixNanos()), Duplicate: r.GetDuplicate(),
	}
	if r.KeyVersion != nil {
		out.KeyVersion, out.HasKeyVersion = r.GetKeyVersion(), true
	}
	return out
}

// publishRequest builds the request of msgs; conditional requests give
// every record without an idempotency key one, so a retry of an accepted
// append is answered with its results, not a conflict.
func (c *Client) publishRequest(topic string, msgs []Message, conditional bool) (*rewindv1.PublishRequest, error) {
	req := &rewindv1.PublishRequest{Topic: topic, Records: make([]*rewindv1.PublishRecord, len(msgs)), Partial: !conditional}
	slab := make([]rewindv1.PublishRecord, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		r := &slab[i]
		r.Key, r.Value, r.IdempotencyKey, r.Partition = m.Key, m.Value, m.IdempotencyKey, m.Partition
		if r.IdempotencyKey == "" && (c.genKeys || conditional) {
			r.IdempotencyKey = generatedKey()
		}
		if !m.EventTime.IsZero() {
			if m.EventTime.Before(minEventTime) || m.EventTime.After(maxEventTime) {
				// UnixNano would wrap: refuse rather than store a wrong time.
				return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("client: message %d: event time %s is outside %s to %s (Unix nanoseconds)",
					i, m.EventTime.UTC().Format(time.RFC3339), minEventTime.UTC().Format(time.RFC3339), maxEventTime.UTC().Format(time.RFC3339)))
			}
			r.EventTimeUnixNanos = m.EventTime.UnixNano()
		}
		if len(m.Headers) > 0 {
			r.Headers = make([]*rewindv1.Header, len(m.Headers))
			for j, h := range m.Headers {
				r.Headers[j] = &rewindv1.Header{Key: h.Key, Value: h.Value}
			}
		}
		if m.Type != "" {
			r.Headers = append(r.Headers, &rewindv1.Header{Key: TypeHeader, Value: []byte(m.Type)})
		}
		for _, t := range m.Tags {
			r.Headers = append(r.Headers, &rewindv1.Header{Key: TagHeader, Value: []byte(t)})
		}
		req.Records[i] = r
	}
	return req, nil
}

// WithGeneratedIdempotencyKeys gives every published record without an
// idempotency key a random one ("gen-" and 22 base64url characters), so a
// retry after an attempt whose outcome was unknown (its node paused, its
// answer lost) never stores the record twice within the topic's dedupe
// window. Off by default: a key costs the server a dedupe lookup and two
// rows per record (a single partition appends about 6x fewer records per
// second with keys, docs/design.md §11), and consumers receive the key.
// Keys are generated per Publish call and cover the client's own retries:
// a caller that publishes the same Message again after an error gets new
// keys, so give keys of your own to make such retries safe.
func WithGeneratedIdempotencyKeys() Option { return func(o *options) { o.genKeys = true } }

// generatedKey returns a random idempotency key (128 bits).
func generatedKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "gen-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// publish sends req, again as the retry policy says (unary): records
// with idempotency keys are stored once however often it is sent.
func (c *Client) publish(ctx context.Context, req *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
	k := c.repeatable(proto.Size(req))
	// Two copies of a record without an idempotency key would both be
	// stored: such a request waits for its node (no hedge).
	k.hedge = !slices.ContainsFunc(req.GetRecords(), func(r *rewindv1.PublishRecord) bool { return r.GetIdempotencyKey() == "" })
	return unary(ctx, c, k, func(ctx context.Context, cl *Client) (*rewindv1.PublishResponse, error) {
		return cl.pub.Publish(ctx, req)
	})
}
