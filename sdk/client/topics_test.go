package client

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// TestTopicOptionsBuildTheConfig: every TopicOption sets its field of the
// request CreateTopic sends, later options win, and the zero TopicOption
// (the type is opaque, so a caller can still write one) changes nothing.
func TestTopicOptionsBuildTheConfig(t *testing.T) {
	got := topicConfig(&rewindv1.TopicConfig{Partitions: 1}, []TopicOption{
		WithPartitions(3), WithReplicationFactor(2), WithMaxRecordBytes(1 << 20), {},
		WithRetention(time.Hour, 1<<30, 0), WithCleanup(CleanupCompactDelete), WithDeleteRetention(time.Minute),
		WithLocalRetention(0, 1<<20), WithDedupeWindow(0), WithRetention(0, 5, 6),
	})
	want := &rewindv1.TopicConfig{
		Partitions: 3, ReplicationFactor: 2, MaxRecordBytes: 1 << 20, DedupeWindow: durationpb.New(0),
		Retention: &rewindv1.Retention{
			MaxBytes: 5, MaxRecords: 6, Cleanup: rewindv1.CleanupPolicy_CLEANUP_POLICY_COMPACT_DELETE,
			DeleteRetention: durationpb.New(time.Minute), LocalMaxBytes: 1 << 20,
		},
	}
	if !proto.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if got := topicConfig(&rewindv1.TopicConfig{Partitions: 1}, []TopicOption{{}}); !proto.Equal(got, &rewindv1.TopicConfig{Partitions: 1}) {
		t.Errorf("the zero TopicOption changed the config: %v", got)
	}
}
