//go:build unix

package main

// A publish that stops early says what became of every line it read:
// stored, not stored, outcome unknown, not sent, as ranges of line
// numbers, and how to send the rest. These tests drive the CLI into each
// way of stopping (a line too long, a line of bad JSON, a record over the
// topic's limit, the server killed while a request is out) and check the
// report line by line, then that sending again with line keys stores
// nothing twice.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// pipedPublish is `rewind publish` whose standard input the test writes
// line by line, reading each result as it comes.
type pipedPublish struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Scanner
	stderr bytes.Buffer
	cancel context.CancelFunc
}

func (s *server) pipedPublish(t *testing.T, args ...string) *pipedPublish {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout) // a hang guard
	p := &pipedPublish{cancel: cancel}
	p.cmd = exec.CommandContext(ctx, enginetest.Binary(t), append([]string{"--server", s.url, "publish"}, args...)...)
	p.cmd.Env = cliEnv()
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewScanner(out)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

// send writes lines, each ended by a newline.
func (p *pipedPublish) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.stdin, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// results reads n result lines.
func (p *pipedPublish) results(t *testing.T, n int) []published {
	t.Helper()
	var out strings.Builder
	for i := range n {
		if !p.stdout.Scan() {
			t.Fatalf("result %d of %d: publish ended (%v); stderr:\n%s", i+1, n, p.stdout.Err(), p.stderr.String())
		}
		out.WriteString(p.stdout.Text() + "\n")
	}
	return parseResults(t, out.String(), n)
}

// exit waits for the command, its standard input still open (it must
// stop by itself), and returns its exit code and standard error lines.
func (p *pipedPublish) exit(t *testing.T) (int, []string) {
	t.Helper()
	for p.stdout.Scan() {
		t.Errorf("unexpected output: %s", p.stdout.Text())
	}
	p.cmd.Wait()
	p.cancel()
	return p.cmd.ProcessState.ExitCode(), splitLines(t, p.stderr.String())
}

// checkStderr compares stderr with want, whose last line is a prefix of
// the error line (its text may name addresses or the OS).
func checkStderr(t *testing.T, got, want []string) {
	t.Helper()
	if n := len(got); n > 0 && len(want) > 0 && strings.HasPrefix(got[n-1], want[len(want)-1]) {
		got = append(slices.Clone(got[:n-1]), want[len(want)-1])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}

// values replays topic and returns its records' values in offset order
// (one partition).
func (s *server) values(t *testing.T, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range parseReplay(t, s.ok(t, nil, "replay", topic, "--from", "earliest", "--format", "json")) {
		out = append(out, string(r.value))
	}
	return out
}

// TestPublishLineTooLong: a line over 16 MiB is named with the limit; the
// lines before it are stored, and the report says the rest was not sent.
// (It printed "bufio.Scanner: token too long" and nothing else.)
func TestPublishLineTooLong(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	// Just over the limit (the CLI measures the line), and 20 MB (the
	// line reader gives up first): the same report.
	for _, size := range []int{maxLineBytes + 1, 20 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			topic := fmt.Sprint("long-", size)
			s.ok(t, nil, "topic", "create", topic, "--partitions", "1")
			in := "a\nb\n" + strings.Repeat("x", size) + "\nc\n"
			r := s.cli(t, []byte(in), "publish", topic)
			if r.code != 1 {
				t.Errorf("exit code %d, want 1", r.code)
			}
			parseResults(t, r.stdout, 2)
			checkStderr(t, splitLines(t, r.stderr), []string{
				"stored: lines 1-2",
				"not sent: lines from 3 on (the input was not read further)",
				"to send the rest, run the same command on the same input with --from-line 3",
				"rewind: line 3: longer than 16 MiB, the most a line may be (no topic stores a larger record; a topic's own limit, 1 MiB unless it was created with another, may be lower)",
			})
			if got := s.values(t, topic); !cmp.Equal(got, []string{"a", "b"}) {
				t.Errorf("stored %q, want a and b", got)
			}
			// The rest, sent as the report says.
			parseResults(t, s.ok(t, []byte("a\nb\nshort\nc\n"), "publish", topic, "--from-line", "3"), 2)
			if got := s.values(t, topic); !cmp.Equal(got, []string{"a", "b", "short", "c"}) {
				t.Errorf("stored %q after --from-line 3, want a b short c", got)
			}
		})
	}
}

// TestPublishRecordOverTopicLimit: a line the topic refuses as too large
// is named with its size and the topic's limit; it was certainly not
// stored.
func TestPublishRecordOverTopicLimit(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "big", "--partitions", "1", "--max-record-bytes", "1000")
	p := s.pipedPublish(t, "big")
	p.send(t, "small")
	p.results(t, 1)
	p.send(t, strings.Repeat("x", 1001)) // alone: no request is out
	code, stderr := p.exit(t)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	checkStderr(t, stderr, []string{
		"stored: line 1",
		"not stored (safe to send again): line 2",
		"not sent: lines from 3 on (the input was not read further)",
		"to send the rest, run the same command on the same input with --from-line 2",
		"rewind: line 2: 1001 bytes (key, value, headers and idempotency key), over the topic's limit of 1000 bytes a record; a request is stored whole or not at all",
	})
}

// TestPublishBadJSONLine: a bad line in the middle of JSON input stops
// the run at that line, with an error in its terms; the lines before it
// are stored, the rest is not sent.
func TestPublishBadJSONLine(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "j", "--partitions", "1")
	in := `{"value":"one"}` + "\n" + `{"value":"two"}` + "\n" + `{"value":2}` + "\n" + `{"value":"four"}` + "\n"
	r := s.cli(t, []byte(in), "publish", "j", "--input", "json")
	if r.code != 1 {
		t.Errorf("exit code %d, want 1", r.code)
	}
	parseResults(t, r.stdout, 2)
	checkStderr(t, splitLines(t, r.stderr), []string{
		"stored: lines 1-2",
		"not sent: lines from 3 on (the input was not read further)",
		"to send the rest, run the same command on the same input with --from-line 3",
		`rewind: line 3: field "value": want a string, got the number 2`,
	})
	if got := s.values(t, "j"); !cmp.Equal(got, []string{"one", "two"}) {
		t.Errorf("stored %q, want one and two", got)
	}
}

// TestParseJSONLine: each kind of bad line gets an error that says what
// is wrong in the line's own terms (no Go types, no decoder internals).
func TestParseJSONLine(t *testing.T) {
	for _, c := range []struct{ line, err string }{
		{`{"value": nope}`, `not valid JSON: unexpected 'o' at column 12 (strings and field names go in double quotes)`},
		{`{'value':"v"}`, `not valid JSON: unexpected '\'' at column 2 (strings and field names go in double quotes)`},
		{`{"value":"v"} {}`, `not valid JSON: unexpected '{' at column 15`},
		{`{"value":"v"`, `not valid JSON: the line ends before the JSON object does`},
		{``, `empty line: want a JSON object such as {"key":"k","value":"v"}`},
		{`  `, `empty line: want a JSON object such as {"key":"k","value":"v"}`},
		{`["v"]`, `want a JSON object, got an array`},
		{`"v"`, `want a JSON object, got a string`},
		{`null`, `want a JSON object, got null`},
		{`{"value":1}`, `field "value": want a string, got the number 1`},
		{`{"value":{"a":1}}`, `field "value": want a string, got an object`},
		{`{"key":true,"value":"v"}`, `field "key": want a string, got a boolean`},
		{`{"value":"v","idempotency_key":7}`, `field "idempotency_key": want a string, got the number 7`},
		{`{"value":"v","partition":-1}`, `field "partition": want a partition number (0, 1, ...), got the number -1`},
		{`{"value":"v","partition":"1"}`, `field "partition": want a partition number (0, 1, ...), got a string`},
		{`{"value":"v","headers":["a"]}`, `field "headers": want an object of strings, got an array`},
		{`{"value":"v","headers":{"a":1}}`, `field "headers": header "a": want a string, got the number 1`},
		{`{"vaule":"v"}`, `unknown field "vaule" (the fields are key, value, headers, idempotency_key, partition)`},
	} {
		_, err := parseJSONLine([]byte(c.line))
		if err == nil || err.Error() != c.err {
			t.Errorf("%s:\n got %v\nwant %s", c.line, err, c.err)
		}
	}
	in, err := parseJSONLine([]byte(`{"key":"k","value":"v","headers":{"b":"1","a":"2"},"idempotency_key":"ik","partition":3}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(in)
	if want := `{"key":"k","value":"v","headers":[{"Key":"b","Value":"MQ=="},{"Key":"a","Value":"Mg=="}],"idempotency_key":"ik","partition":3}`; string(got) != want {
		t.Errorf("decoded %s, want %s", got, want)
	}
	if in, err := parseJSONLine([]byte(`{"key":null,"value":null,"headers":null}`)); err != nil || in.Key != nil || in.Value != "" || in.Headers != nil {
		t.Errorf("nulls: %+v, %v; want the fields absent", in, err)
	}
}

// TestPublishUnknownOutcome: the server is stopped while a request is out
// and then killed, as a tester's kill -9 in the middle of a large publish
// did. The report names the lines stored, the line whose outcome is
// unknown and the lines not sent, and says how to send again; sending
// again as it says, with line keys, leaves every line stored exactly
// once. (The CLI said only "lines from N on were not sent", though the
// request out when the server died may have been stored.)
func TestPublishUnknownOutcome(t *testing.T) {
	dir, addr := t.TempDir(), enginetest.FreeAddr(t)
	s := startServer(t, dir, addr)
	s.ok(t, nil, "topic", "create", "k", "--partitions", "1")
	keys := []string{"--idempotency-keys", "line", "--run-id", "kill-1"}
	p := s.pipedPublish(t, append([]string{"k"}, keys...)...)
	for i := 1; i <= 5; i++ {
		p.send(t, fmt.Sprint(i))
		p.results(t, 1)
	}
	// Line 6 goes alone to a server that does not answer; line 7 waits
	// behind it. Whether line 6 reached the server before it died, the
	// CLI cannot know: either way its outcome is unknown.
	if err := s.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	p.send(t, "6", "7")
	s.Kill()
	code, stderr := p.exit(t)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	checkStderr(t, stderr, []string{
		"stored: lines 1-5",
		"outcome unknown (may have been stored): line 6",
		"not sent: lines from 7 on (the input was not read further)",
		"to send again what was not stored, run the same command on the same input (the same --run-id) with --from-line 6: records stored before are answered as duplicates (within the topic's dedupe window), not stored twice",
		"rewind: ",
	})

	s = startServer(t, dir, addr)
	all := []byte("1\n2\n3\n4\n5\n6\n7\n")
	parseResults(t, s.ok(t, all, append([]string{"publish", "k", "--from-line", "6"}, keys...)...), 2)
	if got, want := s.values(t, "k"), []string{"1", "2", "3", "4", "5", "6", "7"}; !cmp.Equal(got, want) {
		t.Errorf("stored %q, want %q: each line once", got, want)
	}
}

// TestPublishLineKeys: with --idempotency-keys line, the same input sent
// again with the same run id stores nothing twice (each result says
// duplicate), whole or from a line on; another run id is another run.
func TestPublishLineKeys(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "lk", "--partitions", "2")
	lines := func(n int) []byte {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "v%d\n", i)
		}
		return []byte(b.String())
	}
	first := parseResults(t, s.ok(t, lines(5), "publish", "lk", "--idempotency-keys", "line", "--run-id", "r1"), 5)
	again := parseResults(t, s.ok(t, lines(8), "publish", "lk", "--idempotency-keys", "line", "--run-id", "r1"), 8)
	for i, r := range again {
		if dup := i < 5; r.duplicate != dup {
			t.Errorf("line %d sent again: duplicate %v, want %v", i+1, r.duplicate, dup)
		}
		if i < 5 && (r.partition != first[i].partition || r.offset != first[i].offset) {
			t.Errorf("line %d sent again: at %d@%d, want the first's %d@%d", i+1, r.partition, r.offset, first[i].partition, first[i].offset)
		}
	}
	for _, r := range parseResults(t, s.ok(t, lines(8), "publish", "lk", "--idempotency-keys", "line", "--run-id", "r1", "--from-line", "4"), 5) {
		if !r.duplicate {
			t.Errorf("--from-line 4 of a sent input stored a record again: %+v", r)
		}
	}
	recs := parseReplay(t, s.ok(t, nil, "replay", "lk", "--from", "earliest", "--format", "json"))
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.IdempotencyKey)
	}
	slices.Sort(keys)
	if want := []string{"r1:1", "r1:2", "r1:3", "r1:4", "r1:5", "r1:6", "r1:7", "r1:8"}; !cmp.Equal(keys, want) {
		t.Errorf("stored keys %q, want %q", keys, want)
	}
	for _, r := range parseResults(t, s.ok(t, lines(2), "publish", "lk", "--idempotency-keys", "line", "--run-id", "r2"), 2) {
		if r.duplicate {
			t.Errorf("another run id is another run: %+v is a duplicate", r)
		}
	}
	for _, c := range []struct{ args []string }{
		{[]string{"--idempotency-keys", "line"}},
		{[]string{"--run-id", "r1"}},
		{[]string{"--idempotency-keys", "content", "--run-id", "r1"}},
		{[]string{"--idempotency-keys", "line", "--run-id", "r1", "--idempotency-key", "ik"}},
		{[]string{"--from-line", "0"}},
	} {
		if r := s.cli(t, lines(1), append([]string{"publish", "lk"}, c.args...)...); r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, "rewind: --") && !strings.HasPrefix(r.stderr, "rewind: unknown --") {
			t.Errorf("publish %v: exit %d, stdout %q, stderr %q; want a flag error", c.args, r.code, r.stdout, r.stderr)
		}
	}
	if r := s.cli(t, nil, "publish", "lk", "v", "--run-id", "r1"); r.code != 1 || !strings.Contains(r.stderr, "not a VALUE argument") {
		t.Errorf("--run-id with a VALUE: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestLedgerRanges: outcomes noted line by line read back as merged
// ranges, at most maxRanges of them, with the count of the rest.
func TestLedgerRanges(t *testing.T) {
	var l ledger
	l.note(1, 3, outStored)
	l.note(4, 4, outStored) // merges with 1-3
	l.note(5, 5, outNotStored)
	l.note(6, 6, outStored)
	for i := 7; i < 7+2*maxRanges; i += 2 {
		l.note(i, i, outUnknown)
		l.note(i+1, i+1, outStored)
	}
	if got, want := l.ranges(outStored), "lines 1-4, 6, 8, 10, 12, 14, 16, 18, 20, 22 and 2 more ranges (15 lines in all)"; got != want {
		t.Errorf("stored: %q, want %q", got, want)
	}
	if got, want := l.ranges(outNotStored), "line 5"; got != want {
		t.Errorf("not stored: %q, want %q", got, want)
	}
	if got := l.ranges(outUnknown); !strings.HasPrefix(got, "lines 7, 9, 11,") {
		t.Errorf("unknown: %q", got)
	}
	if l.firstNot(outStored, 99) != 5 || !l.storedAfter(5) || l.storedAfter(26) {
		t.Errorf("firstNot %d, storedAfter(5) %v, storedAfter(26) %v", l.firstNot(outStored, 99), l.storedAfter(5), l.storedAfter(26))
	}
}
