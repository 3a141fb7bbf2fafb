package main

import (
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// A node started on a full disk must exit with a message that says so,
// so that a supervisor's restart loop works (issue 27: it hung, never
// listened, logged ENOSPC 46 times a second and ignored SIGTERM: Pebble
// retried the flush of the replayed WAL for ever while opening). The
// failpoints build's enospc fails every write, as a full disk does.
func TestServeOnAFullDiskExitsSayingSo(t *testing.T) {
	bin := enginetest.Binary(t, "failpoints")
	dir := t.TempDir()
	// A store with a WAL to replay.
	p := enginetest.StartProcess(t, enginetest.ProcessConfig{Bin: bin, Dir: dir})
	p.Stop(t)

	out, code := runServe(t, bin, dir, "REWIND_FAILPOINTS=enospc", nil)
	if code != 1 || !strings.Contains(out, "disk full") || !strings.Contains(out, "free space") {
		t.Fatalf("serve on a full disk: exit code %d, want 1 with a message naming the full disk\n%s", code, out)
	}
}

// SIGTERM stops a node while it opens its store, however long that takes:
// here every fsync takes an hour (fsync-delay), so the open never ends.
func TestServeHonoursSIGTERMWhileOpening(t *testing.T) {
	bin := enginetest.Binary(t, "failpoints")
	out, code := runServe(t, bin, t.TempDir(), "REWIND_FAILPOINTS=fsync-delay=1h", func(cmd *exec.Cmd, log string) bool {
		if !strings.Contains(log, "opening the data directory") {
			return false
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		return true
	})
	if code != 1 || !strings.Contains(out, "interrupted while opening") {
		t.Fatalf("SIGTERM while opening: exit code %d, want 1 saying it was interrupted\n%s", code, out)
	}
}

// runServe runs `rewind serve` on dir with env added until it exits, and
// returns its output and exit code. While it runs, act (if set) is called
// with the output so far every few milliseconds until it returns true.
// A process still running after two minutes is killed (by its PID) and
// fails the test.
func runServe(t *testing.T, bin, dir, env string, act func(*exec.Cmd, string) bool) (string, int) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--listen", enginetest.FreeAddr(t), "--data", dir, "--log-level", "info")
	cmd.Env = append(cliEnv(), env)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	read := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	deadline := time.After(2 * time.Minute)
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-done:
			return read(), cmd.ProcessState.ExitCode()
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("rewind serve did not exit within 2 minutes\n%s", read())
		case <-poll.C:
			if act != nil && act(cmd, read()) {
				act = nil
			}
		}
	}
}

// SIGTERM stops a cluster member whose raft loop waits for space in a
// write: the hand-off of its leaderships that a graceful shutdown starts
// with waited for that loop, and the loop for the shutdown (issue 27).
func TestServeStopsOnSIGTERMWhileAWriteWaitsForSpace(t *testing.T) {
	bin := enginetest.Binary(t, "failpoints")
	m := enginetest.PrepareProcessCluster(t, 3)
	var nodes []*enginetest.Process
	for id := 1; id <= 3; id++ {
		pc := m.Config(id)
		pc.Bin, pc.LogLevel = bin, "info"
		nodes = append(nodes, enginetest.StartProcess(t, pc))
	}
	url := nodes[0].URL
	deadline := time.Now().Add(2 * time.Minute)
	var leader int
	for leader == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no leader of partition 0 within 2 minutes")
		}
		runCLI(t, nil, nil, "--server", url, "topic", "create", "t", "--partitions", "1", "--replication-factor", "3")
		r := runCLI(t, nil, nil, "--server", url, "topic", "describe", "t")
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "0" {
				leader, _ = strconv.Atoi(f[len(f)-1])
			}
		}
		time.Sleep(50 * time.Millisecond) // poll: the cluster elects
	}
	target := nodes[leader-1]
	// Writes fail, but the disk reports free space: with "enospc" the
	// free-space check could refuse the publish (and hand the leadership
	// away) before it reached the WAL.
	resp, err := http.PostForm(target.URL+"/debug/failpoints", neturl.Values{"enospc-writes": {"on"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// A publish to the partition the target leads: its WAL write meets
	// ENOSPC and waits, holding the target's raft loop.
	pub := exec.Command(bin, "--server", target.URL, "publish", "t", "v", "--partition", "0")
	pub.Env = cliEnv()
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Process.Kill(); _ = pub.Wait() })
	for !strings.Contains(target.Log(), "waits for space") {
		if time.Now().After(deadline) {
			t.Fatalf("no write waited for space within 2 minutes\n%s", target.Log())
		}
		time.Sleep(20 * time.Millisecond) // poll: the publish reaches the WAL
	}
	if err := target.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-target.Done():
	case <-time.After(time.Minute):
		target.Kill()
		t.Fatalf("node %d did not exit within a minute of SIGTERM while a write waited for space\n%s", leader, target.Log())
	}
	if !strings.Contains(target.Log(), "closing while a write waits for space") {
		t.Fatalf("node %d exited without saying a write waited for space\n%s", leader, target.Log())
	}
}
