package console_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/rewind-io/rewind/internal/npm"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// needNode skips the test when node or npm is missing, unless in CI.
func needNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed, and CI checks the console's bundle: %v", tool, err)
			}
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
}

var (
	installOnce sync.Once
	installErr  error
)

// install runs npm ci here when node_modules does not hold exactly what
// package-lock.json names (the pinned esbuild among them).
func install(t *testing.T) {
	t.Helper()
	needNode(t)
	installOnce.Do(func() {
		fresh, err := npm.Fresh(".")
		if err != nil {
			installErr = err
			return
		}
		if !fresh {
			installErr = run(context.Background(), "npm", "ci", "--no-audit", "--no-fund")
		}
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
}

// run runs a command here; the error carries its output.
func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// TestBundleIsFresh type-checks the console's sources (with the client's
// sources they import), rebuilds them with the pinned esbuild into a
// temporary directory and fails when the checked-in dist/ differs: run
// `npm ci && npm run build` here after editing src/ or sdk/ts/src.
func TestBundleIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("npm ci and esbuild")
	}
	install(t)
	ctx := t.Context()
	if err := run(ctx, "npm", "run", "--silent", "typecheck"); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := run(ctx, "node", "build.mjs", out); err != nil {
		t.Fatal(err)
	}
	names := func(dir string) []string {
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range es {
			n = append(n, e.Name())
		}
		slices.Sort(n)
		return n
	}
	built, checkedIn := names(out), names("dist")
	if !slices.Equal(built, checkedIn) {
		t.Fatalf("the build writes %v, dist/ holds %v: run `npm ci && npm run build` in console/ and commit dist/", built, checkedIn)
	}
	for _, n := range built {
		a, err := os.ReadFile(filepath.Join(out, n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("dist", n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("dist/%s is stale against its sources (%d bytes built, %d checked in): run `npm ci && npm run build` in console/ and commit dist/", n, len(a), len(b))
		}
	}
}
