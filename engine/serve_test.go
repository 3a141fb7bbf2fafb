package engine_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginehook"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestServeExitsWhenTheStoreFails fills the disk under a serving node
// (every WAL write fails with ENOSPC): Serve returns on its own, without
// a signal, with an error naming the disk error, so the process exits 1
// and a supervisor restarts it. Before, the node stayed up with every raft
// group stopped, answering health checks as SERVING.
func TestServeExitsWhenTheStoreFails(t *testing.T) {
	var full atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".log") {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	node, err := engine.Open(enginehook.With(engine.Config{Dir: "data", Storage: engine.StorageConfig{MinFreeBytes: -1}, Logger: hclog.NewNullLogger()}, enginehook.Hooks{FS: fs}))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		node.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- node.Serve(context.Background(), ln, engine.ServeConfig{}) }()
	ctx := context.Background()
	c := client.New(ln.Addr().String())
	if _, err := c.CreateTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("y")}); err == nil {
		t.Fatal("a publish was acknowledged on a full disk")
	}
	err = <-done
	if err == nil || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) || !strings.Contains(err.Error(), "storage failed") {
		t.Fatalf("Serve returned %v, want a storage failure naming %q", err, syscall.ENOSPC)
	}
}

// TestServeStopsTheMetricsListener: ServeConfig.MetricsListener serves
// /metrics alone (the API is not there), and Serve has stopped it when it
// returns, since a scrape reads the store it closes.
func TestServeStopsTheMetricsListener(t *testing.T) {
	node, err := engine.Open(engine.Config{Dir: t.TempDir(), Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		node.Close()
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		node.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- node.Serve(ctx, ln, engine.ServeConfig{MetricsListener: mln, ShutdownTimeout: -1})
	}()
	get := func(path string) (int, error) {
		resp, err := http.Get("http://" + mln.Addr().String() + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get("/metrics"); err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics on the metrics listener: %d %v", code, err)
	}
	if code, err := get("/rewind.v1.TopicService/ListTopics"); err != nil || code != http.StatusNotFound {
		t.Fatalf("the API on the metrics listener: %d %v, want 404", code, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := get("/metrics"); err == nil {
		t.Fatal("the metrics listener still answers after Serve returned")
	}
}
