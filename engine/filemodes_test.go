//go:build unix

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// Issue 24, finding 1: the data directory was created 0755 and Pebble's
// files 0644, so any local user could read the WAL, and in it the
// resume-token key and the token hashes. These tests set the umask to 0,
// so that a file gets exactly the mode the code asks for: on the old code
// the directory came out 0755 and Pebble's files 0666, and the tier's
// objects 0644.

// TestDataFilesArePrivate checks every path under the data directory and
// the file:// tier after a start (with auth: the bootstrap token), a
// publish (the WAL), a tier upload and a restart (tables flushed from the
// WAL): directories 0700, files 0600.
func TestDataFilesArePrivate(t *testing.T) {
	withUmask(t, 0)
	dir := filepath.Join(t.TempDir(), "data") // the node creates both
	tierDir := filepath.Join(t.TempDir(), "tier")
	cfg := engine.Config{Dir: dir, Tier: engine.TierConfig{URL: "file://" + tierDir}, Auth: engine.AuthConfig{Enabled: true},
		Storage: engine.StorageConfig{HousekeepingInterval: 20 * time.Millisecond},
		Logger:  hclog.NewNullLogger()}
	n := enginetest.StartNode(t, cfg)
	url := n.URL
	root := n.BootstrapToken(t)
	checkPrivate(t, "after a start", dir, engine.BootstrapTokenFile, "wasm-cache", "MANIFEST-*", "*.log", "LOCK")

	ctx := context.Background()
	c := client.New(url, client.WithToken(root))
	if _, err := c.CreateTopic(ctx, "history", client.WithLocalRetention(0, 4<<10)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i += 50 { // batches beyond the local 4 KiB
		publish(ctx, t, c, "history", i, 50)
	}
	checkPrivate(t, "after a publish", dir, "*.log")

	// The housekeeping uploads the batches beyond the local limit.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, parts, err := c.DescribeTopic(ctx, "history")
		if err != nil {
			t.Fatal(err)
		}
		if parts[0].TieredSegments > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing was uploaded to the tier: %+v", parts[0])
		}
		time.Sleep(20 * time.Millisecond) // poll
	}
	checkPrivate(t, "after a tier upload", tierDir, "topics/*/0/*.seg")
	checkPrivate(t, "after a tier upload", dir)

	n.Stop()
	url = enginetest.StartNode(t, cfg).URL
	c = client.New(url, client.WithToken(root))
	publish(ctx, t, c, "history", 2000, 10)
	checkPrivate(t, "after a restart", dir, "*.sst")
	checkPrivate(t, "after a restart", tierDir)
}

// TestStartMakesAnOpenDataDirPrivate: a directory as an older version
// left it (0755, files 0644) is made private on start, the node says so
// in a warning naming how many paths it fixed, and it still serves what
// the directory held.
func TestStartMakesAnOpenDataDirPrivate(t *testing.T) {
	dir := t.TempDir()
	n := enginetest.StartNode(t, engine.Config{Dir: dir, Logger: hclog.NewNullLogger()})
	url := n.URL
	ctx := context.Background()
	c := client.New(url)
	if _, err := c.CreateTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	publish(ctx, t, c, "t", 0, 10)
	n.Stop()

	opened := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		opened++
		return os.Chmod(path, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	if opened < 5 { // the directory, the LOCK, a WAL, a MANIFEST, OPTIONS...
		t.Fatalf("only %d paths in the data directory", opened)
	}

	logs := &enginetest.Buffer{}
	url = enginetest.StartNode(t, engine.Config{Dir: dir, Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})}).URL
	checkPrivate(t, "after a start on an open directory", dir)
	out := logs.String()
	if !strings.Contains(out, "data directory was open to other users: made it private") ||
		!strings.Contains(out, fmt.Sprintf("fixed=%d", opened)) {
		t.Fatalf("no warning naming the %d paths fixed; the log:\n%s", opened, out)
	}
	if _, got := replayAll(t, client.New(url), "t", client.Earliest()); len(got) != 10 || got[9] != record(9) {
		t.Fatalf("after the fix the node serves %q", got)
	}
}

// withUmask sets the process umask for the test's duration. The umask is
// the process's: the tests using it are not parallel.
func withUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// checkPrivate fails the test for every directory under root whose mode
// is not 0700 and every file whose mode is not 0600, and for each pattern
// (relative to root, filepath.Match syntax) that matches no path: the
// check must have seen what it is about.
func checkPrivate(t *testing.T, when, root string, mustExist ...string) {
	t.Helper()
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we walked (a compaction's input)
		}
		if err != nil {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		seen++
		want := os.FileMode(0o600)
		switch {
		case d.IsDir():
			want = 0o700
		case !info.Mode().IsRegular():
			t.Errorf("%s: %s is a %v", when, path, info.Mode().Type())
			return nil
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: %s has mode %#o, want %#o", when, path, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range mustExist {
		if m, _ := filepath.Glob(filepath.Join(root, p)); len(m) == 0 {
			t.Errorf("%s: nothing in %s matches %s", when, root, p)
		}
	}
	t.Logf("%s: %d paths under %s checked", when, seen, root)
}

// publish publishes record(from) .. record(from+n-1) in one batch.
func publish(ctx context.Context, t *testing.T, c *client.Client, topic string, from, n int) {
	t.Helper()
	msgs := make([]client.Message, n)
	for i := range msgs {
		msgs[i].Value = []byte(record(from + i))
	}
	if _, err := c.Publish(ctx, topic, msgs...); err != nil {
		t.Fatal(err)
	}
}

// record is the value publish gives offset i: 80 bytes.
func record(i int) string { return fmt.Sprintf("record-%06d-%066d", i, 0) }
