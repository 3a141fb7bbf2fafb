package api

import (
	"context"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/meta"
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
	if d := cfg.GetDedupeWindow(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, invalidf("dedupe_window must be a duration >= 0")
		}
		spec.DedupeWindow = d.AsDuration()
	}
	if r := cfg.GetRetention(); r != nil {
		if d := r.GetMaxAge(); d != nil {
			if err := d.CheckValid(); err != nil {
				return nil, invalidf("retention max_age: %v", err)
			}
			spec.Retention.MaxAgeNanos = int64(d.AsDuration())
		}
		spec.Retention.MaxBytes = r.GetMaxBytes()
		spec.Retention.MaxRecords = r.GetMaxRecords()
	}
	t, err := s.b.CreateTopic(ctx, spec)
	if err != nil {
		return nil, toConnect(s.log, err)
	}
	return &rewindv1.CreateTopicResponse{Topic: topicProto(t)}, nil
}

// ListTopics implements rewindv1connect.TopicServiceHandler.
func (s *Server) ListTopics(ctx context.Context, req *rewindv1.ListTopicsRequest) (*rewindv1.ListTopicsResponse, error) {
	ts := s.b.ListTopics()
	resp := &rewindv1.ListTopicsResponse{Topics: make([]*rewindv1.Topic, len(ts))}
	for i, t := range ts {
		resp.Topics[i] = topicProto(t)
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
			Partition:      p.Partition,
			LogStartOffset: p.State.LogStart,
			EndOffset:      p.State.Next,
			Bytes:          p.State.Bytes,
			Leader:         p.Leader,
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
		Retention: &rewindv1.Retention{
			MaxBytes:   t.Retention.MaxBytes,
			MaxRecords: t.Retention.MaxRecords,
		},
	}
	if t.Retention.MaxAgeNanos > 0 {
		cfg.Retention.MaxAge = durationpb.New(unixDuration(t.Retention.MaxAgeNanos))
	}
	cfg.DedupeWindow = durationpb.New(unixDuration(t.DedupeWindowNanos))
	return &rewindv1.Topic{
		Name: t.Name, Id: t.ID, Config: cfg,
		CreateTime: timestamppb.New(unixNano(t.CreateTime)),
	}
}
