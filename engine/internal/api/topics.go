package api

import (
	"context"
	"errors"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/quota"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// CreateTopic implements rewindv1connect.TopicServiceHandler.
func (s *Server) CreateTopic(ctx context.Context, req *rewindv1.CreateTopicRequest) (*rewindv1.CreateTopicResponse, error) {
	cfg := req.GetConfig()
	spec := broker.TopicSpec{
		Name:              req.GetName(),
		Partitions:        cfg.GetPartitions(),
		ReplicationFactor: cfg.GetReplicationFactor(),
		MaxRecordBytes:    cfg.GetMaxRecordBytes(),
		DedupeWindow:      -1, // the default, unless the request sets one
	}
	if cfg != nil && cfg.KeyIndex != nil && !cfg.GetKeyIndex() {
		spec.NoKeyIndex = true
	}
	if d := cfg.GetDedupeWindow(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, invalidf("dedupe_window must be a duration >= 0")
		}
		spec.DedupeWindow = d.AsDuration()
	}
	r, err := retentionOf(cfg.GetRetention())
	if err != nil {
		return nil, err
	}
	spec.Retention = r
	if p, ok := principalOf(ctx); ok && s.guard != nil {
		spec.Creator = p // counted against its topic and partition quotas
	}
	t, err := s.b.CreateTopic(ctx, spec)
	if errors.Is(err, quota.ErrExceeded) {
		return nil, quotaError(err)
	}
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	return &rewindv1.CreateTopicResponse{Topic: topicProto(t)}, nil
}

// AlterTopic implements rewindv1connect.TopicServiceHandler: it grows the
// partitions when the request sets them, then replaces the retention
// policy unless the request grows the partitions without one. The
// retention's form is checked first, so a malformed one changes nothing;
// the two changes are separate commands, so a retention the broker
// refuses (local limits without tiered storage) leaves the growth done.
func (s *Server) AlterTopic(ctx context.Context, req *rewindv1.AlterTopicRequest) (*rewindv1.AlterTopicResponse, error) {
	r, err := retentionOf(req.GetRetention())
	if err != nil {
		return nil, err
	}
	var t *meta.Topic
	if req.Partitions != nil {
		t, err = s.b.GrowTopic(ctx, req.GetName(), req.GetPartitions())
		if errors.Is(err, quota.ErrExceeded) {
			return nil, quotaError(err)
		}
		if err != nil {
			return nil, toConnect(s.log, err)
		}
	}
	if req.Retention != nil || req.Partitions == nil {
		if t, err = s.b.AlterTopic(ctx, req.GetName(), r); err != nil {
			return nil, toConnect(s.log, err)
		}
	}
	return &rewindv1.AlterTopicResponse{Topic: topicProto(t)}, nil
}

func retentionOf(r *rewindv1.Retention) (meta.Retention, error) {
	var out meta.Retention
	if r == nil {
		return out, nil
	}
	for name, d := range map[string]*durationpb.Duration{"max_age": r.GetMaxAge(), "delete_retention": r.GetDeleteRetention(), "local_max_age": r.GetLocalMaxAge()} {
		if d == nil {
			continue
		}
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return out, invalidf("retention %s must be a duration >= 0", name)
		}
	}
	out.MaxAgeNanos = int64(r.GetMaxAge().AsDuration())
	out.DeleteRetentionNanos = int64(r.GetDeleteRetention().AsDuration())
	out.MaxBytes, out.MaxRecords = r.GetMaxBytes(), r.GetMaxRecords()
	out.LocalMaxAgeNanos, out.LocalMaxBytes = int64(r.GetLocalMaxAge().AsDuration()), r.GetLocalMaxBytes()
	switch r.GetCleanup() {
	case rewindv1.CleanupPolicy_CLEANUP_POLICY_UNSPECIFIED, rewindv1.CleanupPolicy_CLEANUP_POLICY_DELETE:
		out.Cleanup = "delete"
	case rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT:
		out.Cleanup = "compact"
	case rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT_DELETE:
		out.Cleanup = "compact,delete"
	default:
		return out, invalidf("unknown cleanup policy %d", r.GetCleanup())
	}
	return out, nil
}

func retentionProto(r meta.Retention) *rewindv1.Retention {
	out := &rewindv1.Retention{MaxBytes: r.MaxBytes, MaxRecords: r.MaxRecords, Cleanup: rewindv1.CleanupPolicy_CLEANUP_POLICY_DELETE,
		LocalMaxBytes: r.LocalMaxBytes}
	if r.LocalMaxAgeNanos > 0 {
		out.LocalMaxAge = durationpb.New(unixDuration(r.LocalMaxAgeNanos))
	}
	if r.MaxAgeNanos > 0 {
		out.MaxAge = durationpb.New(unixDuration(r.MaxAgeNanos))
	}
	if r.DeleteRetentionNanos > 0 {
		out.DeleteRetention = durationpb.New(unixDuration(r.DeleteRetentionNanos))
	}
	switch r.Cleanup {
	case "compact":
		out.Cleanup = rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT
	case "compact,delete":
		out.Cleanup = rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT_DELETE
	}
	return out
}

// ListTopics implements rewindv1connect.TopicServiceHandler.
func (s *Server) ListTopics(ctx context.Context, req *rewindv1.ListTopicsRequest) (*rewindv1.ListTopicsResponse, error) {
	resp := &rewindv1.ListTopicsResponse{Topics: []*rewindv1.Topic{}}
	for _, t := range s.b.ListTopics() {
		if s.may(ctx, auth.Describe, topicRes(t.Name)) {
			resp.Topics = append(resp.Topics, topicProto(t))
		}
	}
	return resp, nil
}

// DescribeTopic implements rewindv1connect.TopicServiceHandler.
func (s *Server) DescribeTopic(ctx context.Context, req *rewindv1.DescribeTopicRequest) (*rewindv1.DescribeTopicResponse, error) {
	t, parts, err := s.b.DescribeTopic(req.GetName())
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	resp := &rewindv1.DescribeTopicResponse{Topic: topicProto(t)}
	for _, p := range parts {
		pi := &rewindv1.PartitionInfo{
			Partition:        p.Partition,
			LogStartOffset:   p.State.LogStart,
			EndOffset:        p.State.Next,
			Bytes:            p.State.Bytes,
			Leader:           p.Leader,
			LocalStartOffset: max(p.LocalStart, p.State.LogStart),
			TieredSegments:   uint32(len(p.Tiered)),
		}
		for _, s := range p.Tiered {
			if s.End > p.State.LogStart {
				pi.TieredBytes += s.Bytes
			}
		}
		if !p.State.Empty() {
			pi.FirstAppendTime = timestamppb.New(unixNano(p.State.FirstTime))
			pi.LastAppendTime = timestamppb.New(unixNano(p.State.LastTime))
		}
		resp.Partitions = append(resp.Partitions, pi)
	}
	return resp, nil
}

// DeleteTopic implements rewindv1connect.TopicServiceHandler.
func (s *Server) DeleteTopic(ctx context.Context, req *rewindv1.DeleteTopicRequest) (*rewindv1.DeleteTopicResponse, error) {
	if err := s.b.DeleteTopic(ctx, req.GetName()); err != nil {
		return nil, toConnect(s.log, err)
	}
	return &rewindv1.DeleteTopicResponse{}, nil
}

func topicProto(t *meta.Topic) *rewindv1.Topic {
	cfg := &rewindv1.TopicConfig{
		Partitions:        t.Partitions,
		ReplicationFactor: t.ReplicationFactor,
		MaxRecordBytes:    t.MaxRecordBytes,
		Retention:         retentionProto(t.Retention),
	}
	cfg.DedupeWindow = durationpb.New(unixDuration(t.DedupeWindowNanos))
	keyIndex := t.KeyIndex
	cfg.KeyIndex = &keyIndex
	return &rewindv1.Topic{
		Name: t.Name, Id: t.ID, Config: cfg,
		CreateTime: timestamppb.New(unixNano(t.CreateTime)),
	}
}
