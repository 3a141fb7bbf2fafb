package engine_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginehook"
	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestHealthWatchOfAnUnknownService: as the gRPC health protocol says, a
// Watch of a service the node does not serve streams SERVICE_UNKNOWN and
// stays open (it failed with NOT_FOUND), while a Check of it is NotFound.
func TestHealthWatchOfAnUnknownService(t *testing.T) {
	n := enginetest.StartNode(t, enginehook.With(engine.Config{Dir: "data"}, enginehook.Hooks{FS: vfs.NewMem()}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hc := grpchealth.NewClient(http.DefaultClient, n.URL)
	watch := hc.Watch(ctx, &grpchealth.CheckRequest{Service: "no.such.Service"})
	if ev := <-watch; ev.Err != nil || ev.Response == nil || ev.Response.Status != 3 {
		t.Fatalf("first watch event of an unknown service: %+v, want SERVICE_UNKNOWN (3)", ev)
	}
	if _, err := hc.Check(ctx, &grpchealth.CheckRequest{Service: "no.such.Service"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("check of an unknown service: %v, want NotFound", err)
	}
	cancel()
	for ev := range watch {
		if ev.Err == nil {
			t.Fatalf("another event after SERVICE_UNKNOWN: %+v", ev)
		}
	}
}
