package client

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Topic describes a topic.
type Topic struct {
	Name              string
	ID                uint64
	Partitions        uint32
	ReplicationFactor uint32
	MaxRecordBytes    uint32
	RetentionAge      time.Duration
	RetentionBytes    uint64
	RetentionRecords  uint64
	// Cleanup is CleanupDelete, CleanupCompact or CleanupCompactDelete.
	Cleanup         string
	DeleteRetention time.Duration
	DedupeWindow    time.Duration
	// KeyIndex: the topic keeps the key and tag indexes (key versions,
	// Append, ReadKey, Query). Fixed at creation (WithKeyIndex).
	KeyIndex   bool
	CreateTime time.Time
	// LocalRetentionAge and LocalRetentionBytes bound the servers' local
	// copy under tiered storage (WithLocalRetention); zero: no limit.
	LocalRetentionAge   time.Duration
	LocalRetentionBytes uint64
}

// PartitionInfo is the state of one partition.
type PartitionInfo struct {
	Partition      uint32
	LogStartOffset uint64
	EndOffset      uint64
	// FirstAppendTime and LastAppendTime are zero when the partition is empty.
	FirstAppendTime time.Time
	LastAppendTime  time.Time
	Bytes           uint64
	Leader          uint64
	// LocalStartOffset is the first offset on the servers' disks: records
	// from LogStartOffset up to it are in tiered storage (TieredSegments
	// objects, TieredBytes bytes). Without tiering it is LogStartOffset.
	LocalStartOffset uint64
	TieredSegments   uint32
	TieredBytes      uint64
}

// TopicOption configures CreateTopic or AlterTopic: one of the WithX
// functions below. It is opaque, so the wire types are not part of the
// client's API; the zero TopicOption does nothing.
type TopicOption struct{ apply func(*rewindv1.TopicConfig) }

func topicOption(f func(*rewindv1.TopicConfig)) TopicOption { return TopicOption{apply: f} }

// topicConfig applies opts to c and returns it.
func topicConfig(c *rewindv1.TopicConfig, opts []TopicOption) *rewindv1.TopicConfig {
	for _, o := range opts {
		if o.apply != nil {
			o.apply(c)
		}
	}
	return c
}

// WithPartitions sets the partition count (default 1) of CreateTopic;
// GrowTopic adds partitions later.
func WithPartitions(n uint32) TopicOption {
	return topicOption(func(c *rewindv1.TopicConfig) { c.Partitions = n })
}

// WithReplicationFactor sets the replicas per partition.
func WithReplicationFactor(n uint32) TopicOption {
	return topicOption(func(c *rewindv1.TopicConfig) { c.ReplicationFactor = n })
}

// WithMaxRecordBytes sets the largest record accepted.
func WithMaxRecordBytes(n uint32) TopicOption {
	return topicOption(func(c *rewindv1.TopicConfig) { c.MaxRecordBytes = n })
}

// WithRetention sets the retention limits; zero values mean no limit.
func WithRetention(maxAge time.Duration, maxBytes, maxRecords uint64) TopicOption {
	return topicOption(func(c *rewindv1.TopicConfig) {
		r := retention(c)
		r.MaxBytes, r.MaxRecords, r.MaxAge = maxBytes, maxRecords, nil
		if maxAge > 0 {
			r.MaxAge = durationpb.New(maxAge)
		}
	})
}

// Cleanup policies.
const (
	CleanupDelete        = "delete"
	CleanupCompact       = "compact"
	CleanupCompactDelete = "compact,delete"
)

// WithCleanup sets the cleanup policy: CleanupDelete (the default),
// CleanupCompact or CleanupCompactDelete.
func WithCleanup(policy string) TopicOption {
	return topicOption(func(c *rewindv1.TopicConfig) {
		r := retention(c)
		switch policy {
		case CleanupCompact:
			r.Cleanup = rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT
		case CleanupCompactDelete, "delete,compact":
			r.Cleanup = rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT_DELETE
		case CleanupDelete, "":
			r.Cleanup = rewindv1.CleanupPolicy_CLEANUP_POLICY_DELETE
		default:
			r.Cleanup = rewindv1.CleanupPolicy(-1) // refused by the server
		}
	})
}

// WithLocalRetention bounds what stays on the servers' disks when they run
// with tiered storage (--tier): older records move to the object store and
// are read from there. Zero values mean no local limit.
func WithLocalRetention(maxAge time.Duration, maxBytes uint64) TopicOption {
	return topicOption(func(c *rewindv1.TopicConfig) {
		r := retention(c)
		r.LocalMaxBytes, r.LocalMaxAge = maxBytes, nil
		if maxAge > 0 {
			r.LocalMaxAge = durationpb.New(maxAge)
		}
	})
}

// WithDeleteRetention sets how long tombstones survive compaction.
func WithDeleteRetention(d time.Duration) TopicOption {
	return topicOption(func(c *rewindv1.TopicConfig) { retention(c).DeleteRetention = durationpb.New(d) })
}

func retention(c *rewindv1.TopicConfig) *rewindv1.Retention {
	if c.Retention == nil {
		c.Retention = &rewindv1.Retention{}
	}
	return c.Retention
}

// AlterTopic replaces a topic's retention policy with the one opts build
// (WithRetention, WithCleanup, WithDeleteRetention; other options are
// ignored). It sets the policy rather than changing it, so it is repeated
// on another node when its node fails.
func (c *Client) AlterTopic(ctx context.Context, name string, opts ...TopicOption) (*Topic, error) {
	cfg := topicConfig(&rewindv1.TopicConfig{}, opts)
	req := &rewindv1.AlterTopicRequest{Name: name, Retention: retention(cfg)}
	resp, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.AlterTopicResponse, error) {
		return cl.topics.AlterTopic(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	return topicOf(resp.GetTopic()), nil
}

// GrowTopic gives a topic partitions partitions in all, adding the
// missing ones; its retention policy stays. Asking for the count the topic
// has changes nothing, so it is repeated on another node when its node
// fails. Keys hash over the new count from then on: a key's new records
// may go to another partition than its old ones (order per key holds
// within one count). Idempotency keys stay deduplicated across the
// change. Open streams keep their partitions; subscriber groups are
// rebalanced over all of them. Errors carry Connect codes:
// InvalidArgument for fewer partitions than the topic has (they are never
// removed) or more than 1,024, FailedPrecondition for a topic that keeps
// the key index (WithKeyIndex: versions count per key and partition),
// ResourceExhausted past the creator's partition quota, NotFound.
func (c *Client) GrowTopic(ctx context.Context, name string, partitions uint32) (*Topic, error) {
	req := &rewindv1.AlterTopicRequest{Name: name, Partitions: &partitions}
	resp, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.AlterTopicResponse, error) {
		return cl.topics.AlterTopic(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	return topicOf(resp.GetTopic()), nil
}

// WithDedupeWindow sets how long idempotency keys are remembered (default
// 24 h); 0 turns deduplication off.
func WithDedupeWindow(d time.Duration) TopicOption {
	return topicOption(func(c *rewindv1.TopicConfig) { c.DedupeWindow = durationpb.New(d) })
}

// WithKeyIndex sets whether the topic keeps the key and tag indexes
// (default on): key versions on keyed records, conditional appends
// (Append), ReadKey and Query. Off roughly doubles keyed publish
// throughput for topics that never need them. Fixed at creation.
func WithKeyIndex(on bool) TopicOption {
	return topicOption(func(c *rewindv1.TopicConfig) { c.KeyIndex = &on })
}

// CreateTopic creates a topic. Errors carry Connect codes: AlreadyExists,
// InvalidArgument (see connect.CodeOf). It is sent again, to another node,
// only when the first attempt certainly did nothing; when its node failed
// meanwhile, the error is ErrOutcomeUnknown (the topic may exist).
func (c *Client) CreateTopic(ctx context.Context, name string, opts ...TopicOption) (*Topic, error) {
	cfg := topicConfig(&rewindv1.TopicConfig{Partitions: 1}, opts)
	req := &rewindv1.CreateTopicRequest{Name: name, Config: cfg}
	resp, err := unary(ctx, c, once, func(ctx context.Context, cl *Client) (*rewindv1.CreateTopicResponse, error) {
		return cl.topics.CreateTopic(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	return topicOf(resp.GetTopic()), nil
}

// ListTopics lists every topic by name.
func (c *Client) ListTopics(ctx context.Context) ([]*Topic, error) {
	resp, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.ListTopicsResponse, error) {
		return cl.topics.ListTopics(ctx, &rewindv1.ListTopicsRequest{})
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Topic, len(resp.GetTopics()))
	for i, t := range resp.GetTopics() {
		out[i] = topicOf(t)
	}
	return out, nil
}

// DescribeTopic returns a topic and the state of each partition.
func (c *Client) DescribeTopic(ctx context.Context, name string) (*Topic, []PartitionInfo, error) {
	resp, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.DescribeTopicResponse, error) {
		return cl.topics.DescribeTopic(ctx, &rewindv1.DescribeTopicRequest{Name: name})
	})
	if err != nil {
		return nil, nil, err
	}
	parts := make([]PartitionInfo, len(resp.GetPartitions()))
	for i, p := range resp.GetPartitions() {
		parts[i] = PartitionInfo{
			Partition: p.GetPartition(), LogStartOffset: p.GetLogStartOffset(), EndOffset: p.GetEndOffset(),
			Bytes: p.GetBytes(), Leader: p.GetLeader(),
			LocalStartOffset: max(p.GetLocalStartOffset(), p.GetLogStartOffset()), TieredSegments: p.GetTieredSegments(),
			TieredBytes: p.GetTieredBytes(),
		}
		if p.GetFirstAppendTime() != nil {
			parts[i].FirstAppendTime = p.GetFirstAppendTime().AsTime()
			parts[i].LastAppendTime = p.GetLastAppendTime().AsTime()
		}
	}
	return topicOf(resp.GetTopic()), parts, nil
}

// DeleteTopic deletes a topic and all its records. Like CreateTopic it is
// not repeated after an attempt whose node failed (a repeat would answer
// NotFound): the error is then ErrOutcomeUnknown.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	_, err := unary(ctx, c, once, func(ctx context.Context, cl *Client) (*rewindv1.DeleteTopicResponse, error) {
		return cl.topics.DeleteTopic(ctx, &rewindv1.DeleteTopicRequest{Name: name})
	})
	return err
}

func topicOf(t *rewindv1.Topic) *Topic {
	cfg := t.GetConfig()
	out := &Topic{
		Name: t.GetName(), ID: t.GetId(), Partitions: cfg.GetPartitions(),
		ReplicationFactor: cfg.GetReplicationFactor(), MaxRecordBytes: cfg.GetMaxRecordBytes(),
		RetentionBytes: cfg.GetRetention().GetMaxBytes(), RetentionRecords: cfg.GetRetention().GetMaxRecords(),
	}
	if d := cfg.GetRetention().GetMaxAge(); d != nil {
		out.RetentionAge = d.AsDuration()
	}
	switch cfg.GetRetention().GetCleanup() {
	case rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT:
		out.Cleanup = CleanupCompact
	case rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT_DELETE:
		out.Cleanup = CleanupCompactDelete
	default:
		out.Cleanup = CleanupDelete
	}
	if d := cfg.GetRetention().GetDeleteRetention(); d != nil {
		out.DeleteRetention = d.AsDuration()
	}
	out.LocalRetentionBytes = cfg.GetRetention().GetLocalMaxBytes()
	if d := cfg.GetRetention().GetLocalMaxAge(); d != nil {
		out.LocalRetentionAge = d.AsDuration()
	}
	if d := cfg.GetDedupeWindow(); d != nil {
		out.DedupeWindow = d.AsDuration()
	}
	out.KeyIndex = cfg.GetKeyIndex()
	if ct := t.GetCreateTime(); ct != nil {
		out.CreateTime = ct.AsTime()
	}
	return out
}
