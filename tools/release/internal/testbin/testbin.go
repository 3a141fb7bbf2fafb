// Package testbin is what the release tests share: a rewind binary built
// from this checkout as .goreleaser.yaml builds it, and a rewind process
// that they stop by its PID.
package testbin

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Hang is how long a test waits for anything before it calls it a hang:
// a detector, not a budget (the machine may be very busy).
const Hang = 5 * time.Minute

// Root is the server module's root, from a package directory of
// tools/release (tests run in theirs).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/rewind-io/rewind\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of github.com/rewind-io/rewind above the working directory")
		}
		dir = parent
	}
}

// Build builds cmd/rewind into dir as the release does: static
// (CGO_ENABLED=0), -trimpath, the version linked in.
func Build(t testing.TB, dir, version string) string {
	t.Helper()
	bin := filepath.Join(dir, "rewind")
	ctx, cancel := context.WithTimeout(context.Background(), 3*Hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, GoCommand(), "build", "-trimpath", "-ldflags", "-s -w -X main.buildVersion="+version, "-o", bin, "./cmd/rewind")
	cmd.Dir = Root(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rewind: %v\n%s", err, out)
	}
	return bin
}

// GoCommand is the go command on PATH.
func GoCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// FreeLoopback is a loopback address whose port was free a moment ago.
func FreeLoopback(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Process is a running rewind command.
type Process struct {
	cmd     *exec.Cmd
	logs    *bytes.Buffer
	exited  chan error
	stopped bool
}

// Start runs bin with args in a directory of its own; the test's cleanup
// kills it if the test has not stopped it.
func Start(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + cmd.Dir}
	p := &Process{cmd: cmd, logs: &bytes.Buffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if !p.stopped {
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// WaitReady polls base's /readyz with client (nil: plain HTTP) until it
// answers 200; the process exiting first, or a hang, fails the test with
// its logs.
func (p *Process) WaitReady(t testing.TB, client *http.Client, base string) {
	t.Helper()
	deadline := time.Now().Add(Hang)
	if client == nil {
		client = &http.Client{}
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		resp, err := client.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-p.exited:
			p.stopped = true
			t.Fatalf("rewind exited before it was ready: %v\n%s", err, p.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("rewind not ready after %s (last: %v)\n%s", Hang, err, p.logs.String())
		}
	}
}

// Stop sends SIGTERM to the process (by its PID) and fails the test
// unless it exits 0, a clean shutdown.
func (p *Process) Stop(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.stopped = true
		if err != nil {
			t.Errorf("rewind after SIGTERM: %v; want exit 0\n%s", err, p.logs.String())
		}
	case <-time.After(Hang):
		t.Fatalf("rewind did not exit within %s of SIGTERM\n%s", Hang, p.logs.String())
	}
}

// Post calls a Connect unary method with a JSON body, with client (nil:
// plain HTTP) and a bearer token unless it is empty, and returns the
// answer's body; anything but 200 fails the test.
func Post(t testing.TB, client *http.Client, token, url, body string) string {
	t.Helper()
	if client == nil {
		client = &http.Client{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), Hang)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s %s: %s %s", url, body, resp.Status, b.String())
	}
	return b.String()
}
