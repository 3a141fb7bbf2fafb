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
	DedupeWindow      time.Duration
	CreateTime        time.Time
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
}

// TopicOption configures CreateTopic.
type TopicOption func(*rewindv1.TopicConfig)

// WithPartitions sets the partition count (default 1).
func WithPartitions(n uint32) TopicOption {
	return func(c *rewindv1.TopicConfig) { c.Partitions = n }
}

// WithReplicationFactor sets the replicas per partition.
func WithReplicationFactor(n uint32) TopicOption {
	return func(c *rewindv1.TopicConfig) { c.ReplicationFactor = n }
}

// WithMaxRecordBytes sets the largest record accepted.
func WithMaxRecordBytes(n uint32) TopicOption {
	return func(c *rewindv1.TopicConfig) { c.MaxRecordBytes = n }
}

// WithRetention sets the retention policy; zero values mean no limit.
func WithRetention(maxAge time.Duration, maxBytes, maxRecords uint64) TopicOption {
	return func(c *rewindv1.TopicConfig) {
		c.Retention = &rewindv1.Retention{MaxBytes: maxBytes, MaxRecords: maxRecords}
		if maxAge > 0 {
			c.Retention.MaxAge = durationpb.New(maxAge)
		}
	}
}

// WithDedupeWindow sets how long idempotency keys are remembered (default
// 24 h); 0 turns deduplication off.
func WithDedupeWindow(d time.Duration) TopicOption {
	return func(c *rewindv1.TopicConfig) { c.DedupeWindow = durationpb.New(d) }
}

// CreateTopic creates a topic. Errors carry Connect codes: AlreadyExists,
// InvalidArgument (see connect.CodeOf).
func (c *Client) CreateTopic(ctx context.Context, name string, opts ...TopicOption) (*Topic, error) {
	cfg := &rewindv1.TopicConfig{Partitions: 1}
	for _, o := range opts {
		o(cfg)
	}
	resp, err := c.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: name, Config: cfg})
	if err != nil {
		return nil, err
	}
	return topicOf(resp.GetTopic()), nil
}

// ListTopics lists every topic by name.
func (c *Client) ListTopics(ctx context.Context) ([]*Topic, error) {
	resp, err := c.topics.ListTopics(ctx, &rewindv1.ListTopicsRequest{})
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
	resp, err := c.topics.DescribeTopic(ctx, &rewindv1.DescribeTopicRequest{Name: name})
	if err != nil {
		return nil, nil, err
	}
	parts := make([]PartitionInfo, len(resp.GetPartitions()))
	for i, p := range resp.GetPartitions() {
		parts[i] = PartitionInfo{
			Partition: p.GetPartition(), LogStartOffset: p.GetLogStartOffset(), EndOffset: p.GetEndOffset(),
			Bytes: p.GetBytes(), Leader: p.GetLeader(),
		}
		if p.GetFirstAppendTime() != nil {
			parts[i].FirstAppendTime = p.GetFirstAppendTime().AsTime()
			parts[i].LastAppendTime = p.GetLastAppendTime().AsTime()
		}
	}
	return topicOf(resp.GetTopic()), parts, nil
}

// DeleteTopic deletes a topic and all its records.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.topics.DeleteTopic(ctx, &rewindv1.DeleteTopicRequest{Name: name})
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
	if d := cfg.GetDedupeWindow(); d != nil {
		out.DedupeWindow = d.AsDuration()
	}
	if ct := t.GetCreateTime(); ct != nil {
		out.CreateTime = ct.AsTime()
	}
	return out
}
