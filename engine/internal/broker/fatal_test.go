package broker

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/store"
)

// TestManifestWriteFailureFailsTheNode makes every write to a MANIFEST
// file fail with EIO, then flushes the memtable: Pebble's background flush
// cannot record its new table and calls its fatal logger. The node must
// fail the way it does when a WAL write fails: Failed is closed, Err and
// Ready name the disk error, and Close returns at once with it (the owner
// exits 1 with that message). Before, the fatal logger panicked on
// Pebble's flush goroutine, which killed the process with a stack trace.
func TestManifestWriteFailureFailsTheNode(t *testing.T) {
	var sick atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if sick.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.Contains(op.Path, "MANIFEST") {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	}))
	b := open(t, fs)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Publish(ctx, "t", []PublishRecord{{Record: record.Record{Value: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	sick.Store(true)
	go func() { _ = b.db.Flush() }() // blocks for good: its flush failed fatally
	<-b.Failed()
	for _, err := range []error{b.Err(), b.Ready()} {
		if !errors.Is(err, store.ErrFatal) || !strings.Contains(err.Error(), syscall.EIO.Error()) || !strings.Contains(err.Error(), "MANIFEST") {
			t.Fatalf("after a failed MANIFEST write: %v, want a fatal store error naming the MANIFEST and %q", err, syscall.EIO)
		}
	}
	if err := b.Close(); !errors.Is(err, store.ErrFatal) {
		t.Fatalf("Close after a fatal store failure: %v, want the failure", err)
	}
}
