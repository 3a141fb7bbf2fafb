package tier

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// On a mount without hard links (os.Link fails with EPERM), a file store's
// PutIfAbsent still creates a file once and refuses to replace it, so the
// cluster marker can be claimed there.
func TestPutIfAbsentWithoutHardLinks(t *testing.T) {
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	t.Cleanup(func() { linkFile = os.Link })
	dir := t.TempDir()
	st, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if created, err := st.PutIfAbsent(ctx, MarkerName, []byte("cluster a")); err != nil || !created {
		t.Fatalf("first put: created %v, %v", created, err)
	}
	if created, err := st.PutIfAbsent(ctx, MarkerName, []byte("cluster b")); err != nil || created {
		t.Fatalf("second put: created %v, %v; want not created", created, err)
	}
	got, err := os.ReadFile(filepath.Join(dir, MarkerName))
	if err != nil || string(got) != "cluster a" {
		t.Fatalf("the marker holds %q (%v), want the first writer's", got, err)
	}
	c := NewClaimedStore(st, "cluster a")
	if err := c.Claim(ctx); err != nil {
		t.Fatalf("claim on a store without hard links: %v", err)
	}
}
