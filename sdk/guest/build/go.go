package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// goBuildArgs is the command Go runs, besides -o: the way a user builds a
// module (sdk/guest/filter), plus -trimpath (no local paths in the module,
// the same bytes from any checkout) and -buildvcs=false (VCS stamping would
// make the output depend on the state of the git work tree, and fails
// where git is missing).
var goBuildArgs = []string{"build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false"}

// goCancelGrace is how long a cancelled go command gets to stop its
// compilers after an interrupt before it is killed.
const goCancelGrace = 5 * time.Second

// Go builds the Go main package in dir (inside a module: a go.mod in dir
// or above it) as a WebAssembly module, with GOOS=wasip1 GOARCH=wasm and
// -buildmode=c-shared, and returns the module's bytes, which belong to the
// caller. It runs the go command found on PATH (go test puts the toolchain
// running the tests first) with the caller's environment otherwise.
//
// Errors: ErrToolMissing (wrapped) when there is no go command; a
// compilation failure with the go command's output in the message (and an
// *exec.ExitError wrapped); ctx's error when ctx ends first, after the go
// command has been interrupted.
//
// Go does not cache modules itself: the go command's build cache makes a
// repeated build of unchanged sources take about 0.1 s (a first build with
// an empty cache takes about 10 s, mostly the runtime and standard library
// for wasip1), less than it would take to compute a cache key that covers
// every source of every dependency. Concurrent calls, from any process,
// are safe.
func Go(ctx context.Context, dir string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("build: go build in %s: %w", dir, err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("%w: go: %v", ErrToolMissing, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("build: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("build: %s is not a directory", abs)
	}
	tmp, err := os.MkdirTemp("", "rewind-go-build-")
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "module.wasm")

	cmd := exec.CommandContext(ctx, goTool, append(goBuildArgs, "-o", out, ".")...)
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	// On cancellation interrupt the go command, which stops its compilers
	// and linker; kill it only if it does not exit in time.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = goCancelGrace
	output, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("build: go build in %s: %w", abs, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("build: GOOS=wasip1 GOARCH=wasm go %s in %s: %w\n%s",
			strings.Join(goBuildArgs, " "), abs, err, bytes.TrimSpace(output))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("build: go build in %s wrote no module: %w", abs, err)
	}
	if !bytes.HasPrefix(b, []byte("\x00asm")) {
		return nil, errors.New("build: go build in " + abs + " did not write a WebAssembly module")
	}
	return b, nil
}
