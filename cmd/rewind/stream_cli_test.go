//go:build unix

package main

// How printing streams (replay, subscribe) stop and go on: Ctrl-C commits
// what a member printed, -n stops after N records, and a restart of the
// server is waited for and survived.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// streamProc is a `rewind replay` or `rewind subscribe` child process: its
// stdout lines as they come, its stderr once it exited.
type streamProc struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	errb  enginetest.Buffer
}

func (p *streamProc) stderr() string { return p.errb.String() }

func startStream(t *testing.T, s *server, args ...string) *streamProc {
	t.Helper()
	p := &streamProc{lines: make(chan string, 1024), done: make(chan struct{})}
	p.cmd = exec.Command(enginetest.Binary(t), append(append([]string{"--server", s.url}, args...), "--format", "json")...)
	p.cmd.Env = cliEnv()
	p.cmd.Stderr = &p.errb
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.cmd.Wait() // after the last read of the pipe, as os/exec requires
		close(p.done)
	}()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	return p
}

// valueOf returns the value of a record printed with --format json.
func valueOf(t *testing.T, line string) string {
	t.Helper()
	var r struct{ Value string }
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return r.Value
}

// read returns the values of the next n records, failing after a bounded wait.
func (p *streamProc) read(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	deadline := time.After(cmdTimeout)
	for len(out) < n {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("exited after %d of %d lines; stderr:\n%s", len(out), n, p.stderr())
			}
			out = append(out, valueOf(t, l))
		case <-deadline:
			t.Fatalf("only %d of %d lines; stderr:\n%s", len(out), n, p.stderr())
		}
	}
	return out
}

// waitStderr waits until the process has said want on stderr.
func (p *streamProc) waitStderr(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(cmdTimeout)
	for !strings.Contains(p.stderr(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("did not say %q; stderr:\n%s", want, p.stderr())
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// wait returns the values printed until the process exits, and its exit code.
func (p *streamProc) wait(t *testing.T) ([]string, int) {
	t.Helper()
	var out []string
	deadline := time.After(cmdTimeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				return out, p.cmd.ProcessState.ExitCode()
			}
			out = append(out, valueOf(t, l))
		case <-deadline:
			t.Fatalf("did not exit; stderr:\n%s", p.stderr())
		}
	}
}

// publishValues publishes prefix-0 .. prefix-(n-1) to one partition and returns
// the values.
func publishValues(t *testing.T, s *server, topic string, partition int, prefix string, n int) []string {
	t.Helper()
	var in strings.Builder
	var vals []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		vals = append(vals, v)
		fmt.Fprintln(&in, v)
	}
	s.ok(t, []byte(in.String()), "publish", topic, "--partition", fmt.Sprint(partition))
	return vals
}

// TestSubscribeCtrlCCommitsWhatItPrinted: a member interrupted with SIGINT
// commits every record it printed before it leaves, so the next member of
// the group starts after them, whether it starts afterwards or waited in
// the group (the README's two terminals). The member commits once an hour
// otherwise: only the exit commit can cover the second batch.
func TestSubscribeCtrlCCommitsWhatItPrinted(t *testing.T) {
	for _, waiting := range []bool{false, true} {
		t.Run(fmt.Sprintf("next member waiting=%v", waiting), func(t *testing.T) {
			testCtrlC(t, waiting)
		})
	}
}

func testCtrlC(t *testing.T, waiting bool) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "w", "--partitions", "1")
	a := startStream(t, s, "subscribe", "w", "--group", "cg", "--commit-every", "1h")
	publishValues(t, s, "w", 0, "a", 3)
	a.read(t, 3)
	// The first commit is due right after the first event; these are not.
	second := publishValues(t, s, "w", 0, "b", 3)
	if got := a.read(t, 3); !slices.Equal(got, second) {
		t.Fatalf("first member printed %v, want %v", got, second)
	}
	var b *streamProc
	if waiting {
		// One partition: the first member keeps it when the second joins.
		b = startStream(t, s, "subscribe", "w", "--group", "cg")
		b.waitStderr(t, "partitions [] --")
	}
	a.cmd.Process.Signal(syscall.SIGINT)
	if rest, code := a.wait(t); code != 0 || len(rest) != 0 {
		t.Fatalf("after SIGINT: exit code %d, printed %v more; stderr:\n%s", code, rest, a.stderr())
	}
	if !waiting {
		b = startStream(t, s, "subscribe", "w", "--group", "cg")
	}
	third := publishValues(t, s, "w", 0, "c", 3)
	if got := b.read(t, 3); !slices.Equal(got, third) {
		t.Fatalf("next member printed %v first, want only the records after the first member's: %v", got, third)
	}
}

// TestCountStopsAfterN: -n N prints N records and exits 0; a member commits
// those N and no more, although the event it read held more.
func TestCountStopsAfterN(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "n", "--partitions", "1")
	vals := publishValues(t, s, "n", 0, "v", 10)
	values := func(args ...string) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSuffix(s.ok(t, nil, append(args, "--format", "json")...), "\n"), "\n") {
			out = append(out, valueOf(t, l))
		}
		return out
	}
	if got := values("replay", "n", "--from", "earliest", "-n", "3"); !slices.Equal(got, vals[:3]) {
		t.Errorf("replay -n 3 printed %v", got)
	}
	if got := values("replay", "n", "--from", "earliest", "--follow", "--count", "4"); !slices.Equal(got, vals[:4]) {
		t.Errorf("replay --follow --count 4 printed %v", got)
	}
	for _, want := range [][]string{vals[:3], vals[3:6]} {
		if got := values("subscribe", "n", "--group", "cg", "-n", "3"); !slices.Equal(got, want) {
			t.Errorf("subscribe -n 3 printed %v, want %v", got, want)
		}
	}
}

// TestSubscribeRefusesAnEmptyGroup: --group "" is a mistake, not a replay.
func TestSubscribeRefusesAnEmptyGroup(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "e", "--partitions", "1")
	publishValues(t, s, "e", 0, "v", 1)
	s.fails(t, "--group", "subscribe", "e", "--group", "")
}

// TestStreamsWaitForARestartedServer: a follower and a group member keep
// running while their server stops and a new one starts on the same
// address and data directory; they say so on stderr and then print exactly
// the records published after the restart. A follower whose server does
// not come back within --reconnect-window ends with an error that says so.
func TestStreamsWaitForARestartedServer(t *testing.T) {
	dir, listen := t.TempDir(), enginetest.FreeAddr(t)
	s := startServer(t, dir, listen)
	s.ok(t, nil, "topic", "create", "r", "--partitions", "2")
	follower := startStream(t, s, "replay", "r", "--from", "earliest", "--follow")
	member := startStream(t, s, "subscribe", "r", "--group", "cg", "--commit-every", "1h")
	before := append(publishValues(t, s, "r", 0, "a", 2), publishValues(t, s, "r", 1, "a", 2)...)
	slices.Sort(before)
	procs := map[string]*streamProc{"follower": follower, "member": member}
	for name, p := range procs {
		if got := p.read(t, 4); !slices.Equal(sortedCopy(got), before) {
			t.Fatalf("%s printed %v, want %v", name, got, before)
		}
	}

	s.Stop(t)
	s = startServer(t, dir, listen)
	after := append(publishValues(t, s, "r", 0, "b", 2), publishValues(t, s, "r", 1, "b", 2)...)
	slices.Sort(after)
	for name, p := range procs {
		if got := p.read(t, 4); !slices.Equal(sortedCopy(got), after) {
			t.Errorf("%s printed %v after the restart, want %v", name, got, after)
		}
		p.cmd.Process.Signal(syscall.SIGINT)
		if rest, code := p.wait(t); code != 0 || len(rest) != 0 {
			t.Errorf("%s: exit code %d, printed %v more", name, code, rest)
		}
		errs := p.stderr()
		if !strings.Contains(errs, "server unavailable") || !strings.Contains(errs, "reconnected after") || strings.Contains(errs, "failed") {
			t.Errorf("%s said on stderr:\n%s\nwant that the server was unavailable and that it reconnected, and no failure", name, errs)
		}
	}

	gone := startStream(t, s, "replay", "r", "--from", "earliest", "--follow", "--reconnect-window", "300ms")
	gone.read(t, 8)
	s.Stop(t)
	if rest, code := gone.wait(t); code != 1 || len(rest) != 0 {
		t.Fatalf("follower of a server that does not return: exit code %d, printed %v more; stderr:\n%s", code, rest, gone.stderr())
	}
	errs := gone.stderr()
	if !strings.Contains(errs, "unavailable for 300ms") || strings.Contains(errs, "is `rewind serve` running") {
		t.Errorf("follower of a server that does not return said:\n%s", errs)
	}
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
