package engine_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginehook"
	"github.com/rewind-io/rewind/internal/enginetest"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// fillableFS is an in-memory filesystem whose disk can be "filled": while
// full, every write to a WAL file fails with ENOSPC, as on a real full disk.
func fillableFS() (vfs.FS, *atomic.Bool) {
	full := new(atomic.Bool)
	return errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".log") {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	})), full
}

func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func healthOf(t *testing.T, url, service string) grpchealth.Status {
	t.Helper()
	r, err := grpchealth.NewClient(http.DefaultClient, url).Check(context.Background(), &grpchealth.CheckRequest{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

// TestHealthTurnsNotServingWhenTheStoreFails fills the disk under a node:
// its next publish fails, Failed is closed with the disk error, and the
// readiness probes (gRPC health, overall and per service, and /readyz)
// turn NOT_SERVING / 503 while /livez still answers. Before, health kept
// answering SERVING from a node whose raft groups had all stopped.
func TestHealthTurnsNotServingWhenTheStoreFails(t *testing.T) {
	fs, full := fillableFS()
	n := enginetest.StartNode(t, enginehook.With(engine.Config{Dir: "data", Storage: engine.StorageConfig{MinFreeBytes: -1}}, enginehook.Hooks{FS: fs}), enginetest.WithServingAfterFailure())
	services := []string{"", rewindv1connect.PublishServiceName, rewindv1connect.SubscribeServiceName}
	// A node is ready once its metadata group has a leader: a single node
	// elects itself a few ticks after it opens (CI checked too early).
	waitProbe(t, n.URL+"/readyz", http.StatusOK)
	for _, s := range services {
		if got := healthOf(t, n.URL, s); got != grpchealth.StatusServing {
			t.Fatalf("health of %q before the fault: %v", s, got)
		}
	}
	for _, p := range []string{"/readyz", "/healthz", "/livez"} {
		if code, body := probe(t, n.URL+p); code != http.StatusOK {
			t.Fatalf("%s before the fault: %d %s", p, code, body)
		}
	}
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

	full.Store(true)
	if _, err := pub.Publish(ctx, req); err == nil {
		t.Fatal("a publish was acknowledged on a full disk")
	} else if c := connect.CodeOf(err); c != connect.CodeUnavailable {
		t.Fatalf("publish on a failed store: %v (%v), want Unavailable", err, c)
	}
	<-n.Failed()
	if err := n.Err(); err == nil || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		t.Fatalf("Err: %v, want the disk error", err)
	}
	full.Store(false) // space coming back does not make a failed store serve again
	for _, s := range services {
		if got := healthOf(t, n.URL, s); got != grpchealth.StatusNotServing {
			t.Fatalf("health of %q after the store failed: %v, want NOT_SERVING", s, got)
		}
	}
	if code, body := probe(t, n.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, syscall.ENOSPC.Error()) {
		t.Fatalf("/readyz after the store failed: %d %q, want 503 naming the disk error", code, body)
	}
	for _, p := range []string{"/livez", "/healthz"} {
		if code, body := probe(t, n.URL+p); code != http.StatusOK {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}
}

// TestHealthTurnsNotServingWhileDraining: a node shutting down is live but
// not ready, so load balancers stop sending it requests first.
func TestHealthTurnsNotServingWhileDraining(t *testing.T) {
	n := enginetest.StartNode(t, enginehook.With(engine.Config{Dir: "data"}, enginehook.Hooks{FS: vfs.NewMem()}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waitProbe(t, n.URL+"/readyz", http.StatusOK) // once it has elected itself
	watch := grpchealth.NewClient(http.DefaultClient, n.URL).Watch(ctx, &grpchealth.CheckRequest{})
	if ev := <-watch; ev.Err != nil || ev.Response.Status != grpchealth.StatusServing {
		t.Fatalf("first watch event: %+v", ev)
	}
	n.Drain()
	if ev := <-watch; ev.Err != nil || ev.Response.Status != grpchealth.StatusNotServing {
		t.Fatalf("watch event after Drain: %+v, want NOT_SERVING", ev)
	}
	if got := healthOf(t, n.URL, ""); got != grpchealth.StatusNotServing {
		t.Fatalf("health while draining: %v", got)
	}
	if code, _ := probe(t, n.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while draining: %d", code)
	}
	for _, p := range []string{"/livez", "/healthz"} {
		if code, _ := probe(t, n.URL+p); code != http.StatusOK {
			t.Fatalf("%s while draining: %d", p, code)
		}
	}
}
