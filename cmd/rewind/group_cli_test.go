package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// member is a `rewind subscribe --group` child process.
type member struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	mu    struct {
		sync.Mutex
		stderr []string // its standard error so far, by line
	}
}

func (s *server) subscribe(t *testing.T, args ...string) *member {
	t.Helper()
	cmd := exec.Command(enginetest.Binary(t), append([]string{"--server", s.url, "subscribe"}, args...)...)
	cmd.Env = cliEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &member{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			m.mu.Lock()
			m.mu.stderr = append(m.mu.stderr, sc.Text())
			m.mu.Unlock()
		}
	}()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m.lines <- sc.Text()
		}
		close(m.lines)
		<-errDone
		cmd.Wait() // after the last read of the pipes, as os/exec requires
		close(m.done)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-m.done })
	return m
}

// stderr returns the lines the member has written to standard error so
// far.
func (m *member) stderr() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.stderr)
}

// waitStderr waits (bounded) until the member has written a line to
// standard error that matches re, and returns its lines so far.
func (m *member) waitStderr(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a hang guard, not a speed limit
	for {
		lines := m.stderr()
		if slices.ContainsFunc(lines, re.MatchString) {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line on stderr matches %s; stderr:\n%s", re, strings.Join(lines, "\n"))
		}
		select {
		case <-m.done:
			t.Fatalf("subscribe exited; stderr:\n%s", strings.Join(m.stderr(), "\n"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// read returns the next n lines, failing after a bounded wait.
func (m *member) read(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	deadline := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case l, ok := <-m.lines:
			if !ok {
				t.Fatalf("subscribe exited after %d of %d lines", len(out), n)
			}
			out = append(out, l)
		case <-deadline:
			t.Fatalf("only %d of %d lines", len(out), n)
		}
	}
	return out
}

// stop sends SIGTERM (the member commits what it printed) and waits.
func (m *member) stop(t *testing.T) {
	t.Helper()
	m.cmd.Process.Signal(syscall.SIGTERM)
	for range m.lines {
	}
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatal("subscribe did not exit after SIGTERM")
	}
	if code := m.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("subscribe exit code %d after SIGTERM", code)
	}
}

func TestGroupCLI(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "w", "--partitions", "4")
	// Four commands of five lines: keyless, they spread over the
	// partitions (each request takes the next).
	for r := range 4 {
		var in strings.Builder
		for i := range 5 {
			fmt.Fprintf(&in, "r%d\n", 5*r+i)
		}
		s.ok(t, []byte(in.String()), "publish", "w")
	}

	m := s.subscribe(t, "w", "--group", "cg", "--commit-every", "0", "--format", "json", "--name", "cli-test")
	seen := map[string]bool{}
	for _, l := range m.read(t, 20) {
		var r struct{ Value string }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		seen[r.Value] = true
	}
	if len(seen) != 20 {
		t.Fatalf("member printed %d distinct records", len(seen))
	}
	m.stop(t)

	var list []struct {
		Group, Topic string
		Members      int
	}
	if err := json.Unmarshal([]byte(s.ok(t, nil, "group", "list", "--format", "json")), &list); err != nil || len(list) != 1 || list[0].Group != "cg" || list[0].Topic != "w" {
		t.Fatalf("group list: %+v %v", list, err)
	}
	type part struct {
		Partition       uint32
		Committed       bool
		CommittedOffset uint64 `json:"committed_offset"`
		EndOffset       uint64 `json:"end_offset"`
		Lag             uint64
	}
	describe := func() []part {
		var d struct {
			Topics []struct{ Partitions []part }
		}
		if err := json.Unmarshal([]byte(s.ok(t, nil, "group", "describe", "cg", "--format", "json")), &d); err != nil {
			t.Fatal(err)
		}
		return d.Topics[0].Partitions
	}
	ends := map[uint32]uint64{}
	for _, p := range describe() {
		if !p.Committed || p.CommittedOffset != p.EndOffset || p.Lag != 0 {
			t.Fatalf("after the member stopped: %+v", p)
		}
		ends[p.Partition] = p.EndOffset
	}
	if out := s.ok(t, nil, "group", "describe", "cg"); !strings.Contains(out, "PARTITION") || !strings.Contains(out, "generation") {
		t.Fatalf("describe text:\n%s", out)
	}

	// A dry run changes nothing and says so.
	out := s.ok(t, nil, "group", "reset", "cg", "--topic", "w", "--to", "earliest")
	if !strings.Contains(out, "PARTITION  CURRENT  NEW  LAG") || !strings.Contains(out, "dry run") {
		t.Fatalf("dry run output:\n%s", out)
	}
	for _, p := range describe() {
		if p.CommittedOffset != ends[p.Partition] {
			t.Fatal("a dry run moved offsets")
		}
	}
	// Executed: partition 0 goes two records back.
	var plan struct {
		Executed bool
		Plan     []struct {
			Partition       uint32
			Current, New    uint64
			RecordsToReread int64 `json:"records_to_reread"`
		}
	}
	if err := json.Unmarshal([]byte(s.ok(t, nil, "group", "reset", "cg", "--topic", "w", "--to", "-2", "--partition", "0", "--execute", "--format", "json")), &plan); err != nil {
		t.Fatal(err)
	}
	if !plan.Executed || len(plan.Plan) != 1 || plan.Plan[0].New != ends[0]-2 || plan.Plan[0].RecordsToReread != 2 {
		t.Fatalf("executed plan %+v", plan)
	}
	// A new member re-reads exactly those two records first.
	m = s.subscribe(t, "w", "--group", "cg", "--format", "json")
	for i, l := range m.read(t, 2) {
		var r struct {
			Partition uint32
			Offset    uint64
		}
		json.Unmarshal([]byte(l), &r)
		if r.Partition != 0 || r.Offset != ends[0]-2+uint64(i) {
			t.Fatalf("re-read line %d: %s", i, l)
		}
	}
	// Delete is refused while it is connected, then works.
	s.fails(t, "failed_precondition", "group", "delete", "cg")
	m.stop(t)
	s.ok(t, nil, "group", "delete", "cg")
	s.fails(t, "not_found", "group", "describe", "cg")

	s.fails(t, "--to", "group", "reset", "cg", "--topic", "w", "--to", "garbage")
	r := s.cli(t, nil, "subscribe", "w")
	if r.code == 0 || !strings.Contains(r.stderr, "group") {
		t.Fatalf("subscribe without --group: %+v", r)
	}
}

// TestSubscribeSaysEachGenerationOnce: a member that loses partitions to a
// new member says the revocation, then its new partitions, once per
// generation. (The revocation step, sent with the same generation before
// the final assignment, was printed as a second "generation 2:
// partitions" line.)
func TestSubscribeSaysEachGenerationOnce(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "gen", "--partitions", "4")
	a := s.subscribe(t, "gen", "--group", "g", "--name", "a")
	a.waitStderr(t, regexp.MustCompile(`^-- member \S+, generation 1: partitions \[0@0 1@0 2@0 3@0\] --$`))
	b := s.subscribe(t, "gen", "--group", "g", "--name", "b")
	lines := a.waitStderr(t, regexp.MustCompile(`^-- member \S+, generation 2: partitions \[`))
	assigned := regexp.MustCompile(`^-- member \S+, generation (\d+): (revoked partitions|partitions) \[([^]]*)\] --$`)
	var got []string
	for _, l := range lines {
		if m := assigned.FindStringSubmatch(l); m != nil {
			got = append(got, m[1]+" "+m[2]+" "+strconv.Itoa(len(strings.Fields(m[3]))))
		}
	}
	// a keeps 2 of its 4 partitions: it is told which 2 it loses, then
	// which 2 it reads.
	if want := []string{"1 partitions 4", "2 revoked partitions 2", "2 partitions 2"}; !cmp.Equal(got, want) {
		t.Errorf("assignments said %q, want %q; stderr:\n%s", got, want, strings.Join(lines, "\n"))
	}
	// b has joined before it is stopped (CI stopped it while it joined).
	b.waitStderr(t, regexp.MustCompile(`^-- member \S+, generation 2: partitions \[`))
	b.stop(t)
	a.stop(t)
}
