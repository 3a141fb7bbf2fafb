package api

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// TestCreateTopicWithoutAConfig: a create request with no config at all
// (the malformed-gauntlet scenario sends such bodies) is refused with
// InvalidArgument naming what is missing, not a crashed handler; a config
// that leaves key_index out gets the key index.
func TestCreateTopicWithoutAConfig(t *testing.T) {
	_, url := testServer(t)
	topics := rewindv1connect.NewTopicServiceClient(httpClient(), url)
	ctx := context.Background()
	_, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "bare"})
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "partitions") {
		t.Fatalf("create without a config: %v", err)
	}
	resp, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "plain", Config: &rewindv1.TopicConfig{Partitions: 1}})
	if err != nil || !resp.GetTopic().GetConfig().GetKeyIndex() {
		t.Fatalf("create with partitions only: %v %v", resp, err)
	}
}
