//go:build failpoints

package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginehook"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/failpoint"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// TestFailpointFsyncEIOStopsTheNode sets fsync-eio over the node's own
// /debug/failpoints: the next publish is not acknowledged, the store
// fails, and health answers NOT_SERVING, as on a disk that fails its
// fsyncs.
func TestFailpointFsyncEIOStopsTheNode(t *testing.T) {
	t.Cleanup(func() { failpoint.Clear(failpoint.FsyncEIO) })
	n := enginetest.StartNode(t, enginehook.With(engine.Config{Dir: "data", Storage: engine.StorageConfig{MinFreeBytes: -1}}, enginehook.Hooks{FS: vfs.NewMem()}), enginetest.WithServingAfterFailure())
	ctx := context.Background()
	topics := rewindv1connect.NewTopicServiceClient(http.DefaultClient, n.URL)
	pub := rewindv1connect.NewPublishServiceClient(http.DefaultClient, n.URL)
	if _, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	req := &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: []byte("x")}}}
	if _, err := pub.Publish(ctx, req); err != nil {
		t.Fatal(err)
	}

	resp, err := http.PostForm(n.URL+failpoint.Path, url.Values{failpoint.FsyncEIO: {""}})
	if err != nil {
		t.Fatal(err)
	}
	var listed struct{ Active map[string]string }
	err = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || listed.Active[failpoint.FsyncEIO] != "on" {
		t.Fatalf("POST %s: %d %+v %v", failpoint.Path, resp.StatusCode, listed, err)
	}

	if _, err := pub.Publish(ctx, req); err == nil {
		t.Fatal("a publish was acknowledged while fsync fails")
	} else if c := connect.CodeOf(err); c != connect.CodeUnavailable {
		t.Fatalf("publish while fsync fails: %v (%v), want Unavailable", err, c)
	}
	<-n.Failed()
	if err := n.Err(); !errors.Is(err, syscall.EIO) && !strings.Contains(err.Error(), syscall.EIO.Error()) {
		t.Fatalf("Err: %v, want EIO", err)
	}
	if got := healthOf(t, n.URL, ""); got != grpchealth.StatusNotServing {
		t.Fatalf("health after fsync failed: %v, want NOT_SERVING", got)
	}
}
