//go:build unix

package main

// End-to-end tests of the real rewind binary against a real server process:
// a new user starts the server, creates a topic, publishes, replays from
// every kind of start position, sees ordering hold per partition, restarts
// the server and replays the same history again.
//
// The binary is internal/enginetest's (built once per source tree, shared
// with every package's tests); the tests exec it. One server serves most
// subtests of TestCLI, which run in order because they build on each other's
// records.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// ---------------------------------------------------------------------------
// Processes

// cmdTimeout bounds every client command: a hang fails the test instead of
// blocking it. It detects hangs, and is no budget: `plugin build` of an
// AssemblyScript project (npm ci, then asc) took over 30 s at load 12 on 2
// cores.
const cmdTimeout = 10 * time.Minute

type result struct {
	stdout, stderr string
	code           int
}

// cliEnv is the environment for child processes, without REWIND_SERVER
// (tests pass the address explicitly) plus extra.
func cliEnv(extra ...string) []string {
	// No memory of failed nodes across runs (nodememory.go) unless a test
	// asks for one: runs of different tests share no cache.
	env := []string{"REWIND_NODE_MEMORY=off"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REWIND_SERVER=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// runCLI runs the binary to completion with stdin (nil: /dev/null) and
// returns its output and exit code.
func runCLI(t testing.TB, stdin []byte, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, enginetest.Binary(t), args...)
	cmd.Env = env
	if cmd.Env == nil {
		cmd.Env = cliEnv()
	}
	cmd.WaitDelay = 5 * time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("rewind %s: did not exit within %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), cmdTimeout, out.String(), errb.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("rewind %s: %v", strings.Join(args, " "), err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
}

// server is a `rewind serve` child process (enginetest.Process) and how
// client commands reach it.
type server struct {
	*enginetest.Process
	url string // http://127.0.0.1:port, or https://
	// clientFlags go before every client command's own (TLS files).
	clientFlags []string
}

// startServer starts `rewind serve` on listen with its data in dir and
// waits until it answers `topic list`; extra are more serve flags. Cleanup
// kills it if a test has not stopped it.
func startServer(t testing.TB, dir, listen string, extra ...string) *server {
	t.Helper()
	return startServerWith(t, &server{url: "http://" + listen}, enginetest.ProcessConfig{Addr: listen, Dir: dir, Args: extra})
}

// startServerWith starts s's process as pc says, with the binary under
// test and the environment of client commands; unless pc has a Ready of
// its own, the server is ready once `topic list` succeeds with s's
// client flags.
func startServerWith(t testing.TB, s *server, pc enginetest.ProcessConfig) *server {
	t.Helper()
	pc.Bin, pc.Env = enginetest.Binary(t), cliEnv()
	if pc.Ready == nil {
		pc.Ready = func(context.Context, *enginetest.Process) error {
			r := runCLI(t, nil, nil, append(append([]string{"--server", s.url}, s.clientFlags...), "topic", "list")...)
			if r.code != 0 {
				return fmt.Errorf("`topic list`: exit %d, stderr %q", r.code, r.stderr)
			}
			return nil
		}
	}
	s.Process = enginetest.StartProcess(t, pc)
	return s
}

// cli runs a client command against s.
func (s *server) cli(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	return runCLI(t, stdin, nil, append(append([]string{"--server", s.url}, s.clientFlags...), args...)...)
}

// ok runs a client command that must succeed and returns its stdout.
func (s *server) ok(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	r := s.cli(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("rewind %s: exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs a client command that must fail with exit code 1, print
// nothing on stdout and mention want on stderr.
func (s *server) fails(t *testing.T, want string, args ...string) {
	t.Helper()
	r := s.cli(t, nil, args...)
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, want) {
		t.Errorf("rewind %s: exit code %d, stdout %q, stderr %q; want exit code 1, no stdout, stderr containing %q",
			strings.Join(args, " "), r.code, r.stdout, r.stderr, want)
	}
}

// ---------------------------------------------------------------------------
// Output

// published is one record the test published, with what the CLI said about
// where it went.
type published struct {
	partition uint32
	offset    uint64
	id        string
	key       string
	value     []byte
	headers   []outHeader
	idem      string
	duplicate bool // the CLI said "duplicate": stored before, nothing new
}

var resultLine = regexp.MustCompile(`^partition=(\d+) offset=(\d+) message_id=([A-Za-z0-9_-]+)( key_version=\d+)?( duplicate)?$`)

// parseResults parses publish output: one line per record.
func parseResults(t *testing.T, out string, n int) []published {
	t.Helper()
	lines := splitLines(t, out)
	if len(lines) != n {
		t.Fatalf("publish printed %d lines, want %d:\n%s", len(lines), n, out)
	}
	res := make([]published, n)
	for i, l := range lines {
		m := resultLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("publish output line %q: want partition=N offset=N message_id=ID", l)
		}
		p, _ := strconv.ParseUint(m[1], 10, 32)
		o, _ := strconv.ParseUint(m[2], 10, 64)
		res[i] = published{partition: uint32(p), offset: o, id: m[3], duplicate: m[5] != ""}
	}
	return res
}

func splitLines(t *testing.T, out string) []string {
	t.Helper()
	if out == "" {
		return nil
	}
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end with a newline: %q", out)
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// record is one line of `replay --format json`.
type record struct {
	Partition      uint32      `json:"partition"`
	Offset         uint64      `json:"offset"`
	MessageID      string      `json:"message_id"`
	AppendTime     string      `json:"append_time"`
	Key            *string     `json:"key"`
	Value          *string     `json:"value"`
	ValueBase64    *string     `json:"value_base64"`
	Headers        []outHeader `json:"headers"`
	IdempotencyKey string      `json:"idempotency_key"`
	KeyVersion     *uint64     `json:"key_version"`

	line  string    // as printed
	at    time.Time // AppendTime
	value []byte    // Value, or ValueBase64 decoded
}

func (r record) pos() string { return fmt.Sprintf("p%d@%d", r.Partition, r.Offset) }

var (
	textKeys   = []string{"append_time", "headers", "idempotency_key", "key", "message_id", "offset", "partition", "value"}
	binaryKeys = []string{"append_time", "headers", "idempotency_key", "key", "message_id", "offset", "partition", "value_base64"}
)

// parseReplay parses `replay --format json` output and checks the shape of
// every line (exact key set, RFC 3339 nanosecond append time) and that
// within each partition offsets are dense and strictly increasing.
func parseReplay(t *testing.T, out string) []record {
	t.Helper()
	var recs []record
	for _, line := range splitLines(t, out) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("replay line is not a JSON object: %v\n%s", err, line)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			if k == "key_version" {
				// Present exactly when the record has a key.
				if string(m["key"]) == `""` || m["key"] == nil {
					t.Fatalf("a record without a key has a key_version: %s", line)
				}
				continue
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := textKeys
		if _, ok := m["value_base64"]; ok {
			want = binaryKeys
		}
		if d := cmp.Diff(want, keys); d != "" {
			t.Fatalf("replay line keys (-want +got):\n%s\nline: %s", d, line)
		}
		var r record
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("replay line: %v\n%s", err, line)
		}
		if r.Key == nil || (r.Value == nil) == (r.ValueBase64 == nil) || r.Headers == nil {
			t.Fatalf("replay line: want a string key, one of value and value_base64, a headers array\n%s", line)
		}
		r.line = line
		at, err := time.Parse(time.RFC3339Nano, r.AppendTime)
		if err != nil {
			t.Fatalf("append_time %q is not RFC 3339: %v", r.AppendTime, err)
		}
		if got := at.UTC().Format(time.RFC3339Nano); got != r.AppendTime {
			t.Fatalf("append_time %q is not canonical RFC 3339 UTC with nanoseconds (want %q)", r.AppendTime, got)
		}
		r.at = at
		if r.ValueBase64 != nil {
			r.value, err = base64.StdEncoding.DecodeString(*r.ValueBase64)
			if err != nil {
				t.Fatalf("value_base64: %v\n%s", err, line)
			}
		} else {
			r.value = []byte(*r.Value)
		}
		for _, h := range r.Headers {
			if h.Value == nil || h.ValueBase64 != nil {
				t.Fatalf("header %q: want a text value\n%s", h.Key, line)
			}
		}
		recs = append(recs, r)
	}
	checkDense(t, recs)
	return recs
}

type outHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64"`
}

func hdr(k, v string) outHeader { return outHeader{Key: k, Value: &v} }

// checkDense checks that within each partition the offsets of recs are
// strictly increasing by one.
func checkDense(t *testing.T, recs []record) {
	t.Helper()
	last := map[uint32]uint64{}
	for _, r := range recs {
		if prev, ok := last[r.Partition]; ok && r.Offset != prev+1 {
			t.Fatalf("partition %d: offset %d follows %d; want strictly increasing, dense offsets", r.Partition, r.Offset, prev)
		}
		last[r.Partition] = r.Offset
	}
}

// byPartition groups the printed lines of recs by partition, in output order.
func byPartition(recs []record) map[uint32][]string {
	m := map[uint32][]string{}
	for _, r := range recs {
		m[r.Partition] = append(m[r.Partition], r.line)
	}
	return m
}

// subset is byPartition of the records of all that keep accepts.
func subset(all []record, keep func(record) bool) map[uint32][]string {
	var rs []record
	for _, r := range all {
		if keep(r) {
			rs = append(rs, r)
		}
	}
	return byPartition(rs)
}

func count(m map[uint32][]string) int {
	n := 0
	for _, ls := range m {
		n += len(ls)
	}
	return n
}

// ---------------------------------------------------------------------------
// Tests

func TestServerUnavailable(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, nil, "--server", "http://"+enginetest.FreeAddr(t), "topic", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "unavailable") || !strings.Contains(r.stderr, "rewind serve") {
		t.Errorf("topic list without a server: exit code %d, stderr %q; want 1 and an unavailable error that suggests `rewind serve`", r.code, r.stderr)
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, nil, "demo")
	if r.code != 0 {
		t.Fatalf("rewind demo: exit code %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"from a timestamp", "from a message ID", "# wave 3", "created topic orders (id 1) with 3 partitions"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rewind demo output does not mention %q:\n%s", want, r.stdout)
		}
	}
	// It prints what the commands print: publish's result lines and
	// replay's text lines; and its orders spread over every partition.
	parts := map[string]bool{}
	var results, records int
	textLine := regexp.MustCompile(`^(\d+)\t\d+\t\S+Z\torder-\d+\t\{.*\}$`)
	for _, l := range strings.Split(r.stdout, "\n") {
		if m := resultLine.FindStringSubmatch(l); m != nil {
			results++
			parts[m[1]] = true
		}
		if textLine.MatchString(l) {
			records++
		}
	}
	if results != 12 || records == 0 || len(parts) != 3 {
		t.Errorf("rewind demo printed %d publish results (want 12) over partitions %v (want 0, 1 and 2), and %d replayed records in replay's text format:\n%s",
			results, slices.Sorted(maps.Keys(parts)), records, r.stdout)
	}
}

func TestCompletionBash(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, nil, "completion", "bash")
	if r.code != 0 {
		t.Fatalf("rewind completion bash: exit code %d, stderr %q", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "# bash completion") ||
		!regexp.MustCompile(`(?m)^\s*complete .*-F __start_rewind rewind$`).MatchString(r.stdout) {
		t.Fatalf("rewind completion bash did not print a bash completion script for rewind:\n%.500s", r.stdout)
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		check := exec.Command(bash, "-n")
		check.Stdin = strings.NewReader(r.stdout)
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("bash -n on the completion script: %v\n%s", err, out)
		}
	}
}

func TestCLI(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	listen := enginetest.FreeAddr(t)
	srv := startServer(t, dataDir, listen)

	var pubs []published // every record published to orders, in order
	var all []record     // orders replayed from earliest
	pubsOf := func(t *testing.T, stdin []byte, n int, args ...string) []published {
		t.Helper()
		return parseResults(t, srv.ok(t, stdin, append([]string{"publish", "orders"}, args...)...), n)
	}
	find := func(id string) record {
		t.Helper()
		for _, r := range all {
			if r.MessageID == id {
				return r
			}
		}
		t.Fatalf("message %s not in the replay", id)
		return record{}
	}

	ok := t.Run("topics", func(t *testing.T) {
		out := srv.ok(t, nil, "topic", "create", "orders", "--partitions", "3")
		if !regexp.MustCompile(`^created topic orders \(id \d+\) with 3 partitions\n$`).MatchString(out) {
			t.Errorf("topic create orders printed %q", out)
		}
		var created map[string]any
		if err := json.Unmarshal([]byte(srv.ok(t, nil, "topic", "create", "scratch", "--format", "json")), &created); err != nil {
			t.Fatal(err)
		}
		if created["name"] != "scratch" || created["partitions"] != 1.0 {
			t.Errorf("topic create scratch --format json = %v; want name scratch with 1 partition", created)
		}

		// Text list: a header and one row per topic.
		lines := splitLines(t, srv.ok(t, nil, "topic", "list"))
		if len(lines) == 0 || !slices.Equal(strings.Fields(lines[0]), []string{"NAME", "ID", "PARTITIONS", "CREATED"}) {
			t.Fatalf("topic list header: %q", lines)
		}
		rows := map[string]string{}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) != 4 {
				t.Fatalf("topic list row %q: want 4 columns", l)
			}
			if _, err := time.Parse(time.RFC3339, f[3]); err != nil {
				t.Errorf("topic list row %q: CREATED: %v", l, err)
			}
			rows[f[0]] = f[2]
		}
		if d := cmp.Diff(map[string]string{"orders": "3", "scratch": "1"}, rows); d != "" {
			t.Errorf("topic list: name -> partitions (-want +got):\n%s", d)
		}

		// JSON list, with the server taken from REWIND_SERVER.
		listJSON := func() map[string]float64 {
			t.Helper()
			r := runCLI(t, nil, cliEnv("REWIND_SERVER="+srv.url), "topic", "list", "--format", "json")
			if r.code != 0 {
				t.Fatalf("REWIND_SERVER=%s rewind topic list --format json: exit %d, stderr %q", srv.url, r.code, r.stderr)
			}
			var ts []map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &ts); err != nil {
				t.Fatalf("topic list --format json: %v\n%s", err, r.stdout)
			}
			m := map[string]float64{}
			for _, tp := range ts {
				name, _ := tp["name"].(string)
				m[name], _ = tp["partitions"].(float64)
			}
			return m
		}
		if d := cmp.Diff(map[string]float64{"orders": 3, "scratch": 1}, listJSON()); d != "" {
			t.Errorf("topic list --format json (-want +got):\n%s", d)
		}

		if out := srv.ok(t, nil, "topic", "delete", "scratch"); out != "deleted topic scratch\n" {
			t.Errorf("topic delete scratch printed %q", out)
		}
		if d := cmp.Diff(map[string]float64{"orders": 3}, listJSON()); d != "" {
			t.Errorf("topic list after deleting scratch (-want +got):\n%s", d)
		}

		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"topic", "create", "orders"}, "already_exists"},
			{[]string{"topic", "create", "orders", "--partitions", "3"}, "already_exists"},
			{[]string{"topic", "describe", "unknown"}, "not_found"},
			{[]string{"topic", "describe", "scratch"}, "not_found"},
			{[]string{"topic", "delete", "scratch"}, "not_found"},
			{[]string{"topic", "create", "bad name!"}, "invalid_argument"},
			{[]string{"topic", "create", "zero", "--partitions", "0"}, "invalid_argument"},
		} {
			srv.fails(t, tc.want, tc.args...)
		}
	})
	if !ok {
		return
	}

	keys := []string{"k1", "k2", "k3", "k4"}
	ok = t.Run("publish", func(t *testing.T) {
		add := func(ps []published, msgs ...published) {
			t.Helper()
			for i := range ps {
				ps[i].key, ps[i].value, ps[i].headers, ps[i].idem = msgs[i].key, msgs[i].value, msgs[i].headers, msgs[i].idem
			}
			pubs = append(pubs, ps...)
		}
		keyPartition := map[string]uint32{}

		// Wave 1: one record per key, VALUE on the command line.
		for _, k := range keys {
			ps := pubsOf(t, nil, 1, k+"-created", "--key", k)
			keyPartition[k] = ps[0].partition
			add(ps, published{key: k, value: []byte(k + "-created")})
		}

		// Nine lines on stdin, three commands of three: one result line
		// each. Each request's keyless records take the next partition,
		// and a command's first line goes alone, so its second is in
		// another partition; six requests or more cover all three.
		spread := map[uint32]bool{}
		for r := range 3 {
			var in bytes.Buffer
			var msgs []published
			for i := range 3 {
				fmt.Fprintf(&in, "line-%d\n", 3*r+i)
				msgs = append(msgs, published{value: fmt.Appendf(nil, "line-%d", 3*r+i)})
			}
			ps := pubsOf(t, in.Bytes(), 3)
			add(ps, msgs...)
			if ps[0].partition == ps[1].partition {
				t.Errorf("the first two of 3 lines without key or partition both went to partition %d; the first goes alone", ps[0].partition)
			}
			for _, p := range ps {
				spread[p.partition] = true
			}
		}
		if len(spread) != 3 {
			t.Errorf("3 commands of records without key or partition went to partitions %v; want all 3", spread)
		}

		// Wave 2: --input json with key, value, headers and idempotency key.
		var in bytes.Buffer
		var msgs []published
		for _, k := range keys {
			fmt.Fprintf(&in, `{"key":%q,"value":%q,"headers":{"source":"web-%s"},"idempotency_key":"pay-%s"}`+"\n", k, k+"-paid", k, k)
			msgs = append(msgs, published{key: k, value: []byte(k + "-paid"), headers: []outHeader{hdr("source", "web-"+k)}, idem: "pay-" + k})
		}
		ps := pubsOf(t, in.Bytes(), 4, "--input", "json")
		for i, p := range ps {
			if p.partition != keyPartition[keys[i]] {
				t.Errorf("key %s went to partition %d, earlier to %d", keys[i], p.partition, keyPartition[keys[i]])
			}
		}
		add(ps, msgs...)

		// Repeated --header (order kept, '=' allowed in the value), an
		// --idempotency-key and an explicit --partition.
		ps = pubsOf(t, nil, 1, "with-headers", "--header", "trace=abc", "--header", "tenant=acme=1", "--idempotency-key", "hdr-1", "--partition", "2")
		if ps[0].partition != 2 {
			t.Errorf("--partition 2: stored in partition %d", ps[0].partition)
		}
		add(ps, published{value: []byte("with-headers"), headers: []outHeader{hdr("trace", "abc"), hdr("tenant", "acme=1")}, idem: "hdr-1"})

		// A value that is not UTF-8, from stdin without a trailing newline.
		raw := []byte("x\xff\xfey")
		ps = pubsOf(t, raw, 1, "--partition", "1")
		if ps[0].partition != 1 {
			t.Errorf("--partition 1: stored in partition %d", ps[0].partition)
		}
		add(ps, published{value: raw})

		// --format json result.
		var jr struct {
			Partition  *uint32 `json:"partition"`
			Offset     *uint64 `json:"offset"`
			MessageID  string  `json:"message_id"`
			Duplicate  *bool   `json:"duplicate"`
			KeyVersion *uint64 `json:"key_version"`
			AppendTime string  `json:"append_time"`
		}
		out := srv.ok(t, nil, "publish", "orders", "k2-note", "--key", "k2", "--format", "json")
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&jr); err != nil {
			t.Fatalf("publish --format json: %v\n%s", err, out)
		}
		if jr.Partition == nil || *jr.Partition != keyPartition["k2"] || jr.Offset == nil || jr.Duplicate == nil || *jr.Duplicate || jr.MessageID == "" || jr.KeyVersion == nil {
			t.Fatalf("publish --format json printed %s; want partition %d, an offset, duplicate false, a message_id", out, keyPartition["k2"])
		}
		if at, err := time.Parse(time.RFC3339Nano, jr.AppendTime); err != nil || time.Since(at) > time.Hour || at.After(time.Now().Add(time.Minute)) {
			t.Fatalf("publish --format json printed append_time %q (%v); want the record's append time", jr.AppendTime, err)
		}
		pubs = append(pubs, published{partition: *jr.Partition, offset: *jr.Offset, id: jr.MessageID, key: "k2", value: []byte("k2-note")})

		// Wave 3: one more record per key.
		for _, k := range keys {
			add(pubsOf(t, nil, 1, k+"-shipped", "--key", k), published{key: k, value: []byte(k + "-shipped")})
		}

		// Describe: end offsets add up to what was published.
		var desc struct {
			Name          string `json:"name"`
			Partitions    int    `json:"partitions"`
			PartitionInfo []struct {
				Partition      uint32 `json:"partition"`
				LogStartOffset uint64 `json:"log_start_offset"`
				EndOffset      uint64 `json:"end_offset"`
				Records        uint64 `json:"records"`
			} `json:"partition_info"`
		}
		out = srv.ok(t, nil, "topic", "describe", "orders", "--format", "json")
		if err := json.Unmarshal([]byte(out), &desc); err != nil {
			t.Fatalf("topic describe --format json: %v\n%s", err, out)
		}
		wantEnd := map[uint32]uint64{}
		for _, p := range pubs {
			wantEnd[p.partition]++
		}
		gotEnd := map[uint32]uint64{}
		var sum uint64
		for _, p := range desc.PartitionInfo {
			if p.LogStartOffset != 0 || p.Records != p.EndOffset {
				t.Errorf("partition %d: log start %d, records %d, end %d; want 0, end, end", p.Partition, p.LogStartOffset, p.Records, p.EndOffset)
			}
			gotEnd[p.Partition] = p.EndOffset
			sum += p.EndOffset
		}
		if desc.Name != "orders" || desc.Partitions != 3 || sum != uint64(len(pubs)) {
			t.Errorf("describe: name %q, %d partitions, end offsets sum to %d; want orders, 3, %d", desc.Name, desc.Partitions, sum, len(pubs))
		}
		if d := cmp.Diff(wantEnd, gotEnd); d != "" {
			t.Errorf("end offset per partition (-published +described):\n%s", d)
		}
	})
	if !ok {
		return
	}

	ok = t.Run("replay earliest", func(t *testing.T) {
		out := srv.ok(t, nil, "replay", "orders", "--from", "earliest", "--format", "json")
		all = parseReplay(t, out)
		if len(all) != len(pubs) {
			t.Fatalf("replay printed %d records, published %d", len(all), len(pubs))
		}
		byID := map[string]record{}
		for _, r := range all {
			if _, dup := byID[r.MessageID]; dup {
				t.Fatalf("message ID %s appears twice", r.MessageID)
			}
			byID[r.MessageID] = r
		}
		// Every published record, as published, at the position publish
		// reported.
		for _, p := range pubs {
			r, ok := byID[p.id]
			if !ok {
				t.Errorf("published %s (p%d@%d) missing from the replay", p.id, p.partition, p.offset)
				continue
			}
			if r.Partition != p.partition || r.Offset != p.offset {
				t.Errorf("%s: replayed at %s, published at p%d@%d", p.id, r.pos(), p.partition, p.offset)
			}
			if !bytes.Equal(r.value, p.value) || *r.Key != p.key || r.IdempotencyKey != p.idem {
				t.Errorf("%s: replayed key %q value %q idempotency key %q; published %q %q %q", p.id, *r.Key, r.value, r.IdempotencyKey, p.key, p.value, p.idem)
			}
			if (r.ValueBase64 != nil) == utf8.Valid(p.value) {
				t.Errorf("%s: value %q printed as %s; want value_base64 exactly when it is not UTF-8", p.id, p.value, r.line)
			}
			wantHeaders := p.headers
			if wantHeaders == nil {
				wantHeaders = []outHeader{} // printed as []
			}
			if d := cmp.Diff(wantHeaders, r.Headers); d != "" {
				t.Errorf("%s: headers (-published +replayed):\n%s", p.id, d)
			}
		}
		// Each partition starts at 0 (parseReplay checked density).
		first := map[uint32]uint64{}
		for _, r := range slices.Backward(all) {
			first[r.Partition] = r.Offset
		}
		if d := cmp.Diff(map[uint32]uint64{0: 0, 1: 0, 2: 0}, first); d != "" {
			t.Errorf("first offset per partition (-want +got):\n%s", d)
		}
		// Records of one key replay in the order they were published.
		for _, k := range keys {
			var published, replayed []string
			for _, p := range pubs {
				if p.key == k {
					published = append(published, p.id)
				}
			}
			for _, r := range all {
				if *r.Key == k {
					replayed = append(replayed, r.MessageID)
				}
			}
			if d := cmp.Diff(published, replayed); d != "" {
				t.Errorf("key %s: message IDs in replay order (-published +replayed):\n%s", k, d)
			}
		}

		// Text format: one line per record, same positions, non-UTF-8 as base64.
		text := splitLines(t, srv.ok(t, nil, "replay", "orders", "--from", "earliest"))
		if len(text) != len(all) {
			t.Fatalf("text replay printed %d lines, want %d", len(text), len(all))
		}
		for i, l := range text {
			f := strings.Split(l, "\t")
			if len(f) < 5 || f[0] != strconv.Itoa(int(all[i].Partition)) || f[1] != strconv.FormatUint(all[i].Offset, 10) || f[2] != all[i].AppendTime {
				t.Errorf("text replay line %d = %q; json had %s", i, l, all[i].line)
			}
			if all[i].ValueBase64 != nil && f[4] != "base64:"+*all[i].ValueBase64 {
				t.Errorf("text replay of a non-UTF-8 value: %q, want base64:%s", f[4], *all[i].ValueBase64)
			}
		}
	})
	if !ok {
		return
	}

	if len(all) == 0 {
		t.Skip("the later subtests build on topics, publish and replay earliest: run TestCLI as a whole")
	}
	// Times for timestamp positions, from the replay: the largest gap
	// between consecutive append times lies between two publish commands.
	var times []time.Time
	for _, r := range all {
		times = append(times, r.at)
	}
	slices.SortFunc(times, time.Time.Compare)
	times = slices.CompactFunc(times, time.Time.Equal)
	if len(times) < 2 {
		t.Fatalf("all records have one append time")
	}
	gap := 1
	for i := 2; i < len(times); i++ {
		if times[i].Sub(times[i-1]) > times[gap].Sub(times[gap-1]) {
			gap = i
		}
	}
	tAfter := times[gap]                                       // first append time after the gap: a record's exact time
	tMid := times[gap-1].Add(times[gap].Sub(times[gap-1]) / 2) // strictly inside the gap
	tMs := time.UnixMilli(tMid.UnixMilli())
	end := map[uint32]uint64{}
	for _, r := range all {
		end[r.Partition] = r.Offset + 1
	}
	// The record for id:: the fifth stdin line, not first in its batch, so
	// earlier records of its partition may share its append time.
	var idRec record
	for _, p := range pubs {
		if string(p.value) == "line-4" {
			idRec = find(p.id)
		}
	}
	if idRec.Offset == 0 {
		t.Fatalf("line-4 is first in partition %d; the id: cases want a record in the middle", idRec.Partition)
	}
	notBefore := func(t0 time.Time) func(record) bool { return func(r record) bool { return !r.at.Before(t0) } }

	type posCase struct {
		name   string
		args   []string
		keep   func(record) bool
		proper bool // the expected set must be neither empty nor everything
	}
	check := func(t *testing.T, tc posCase) {
		t.Helper()
		want := subset(all, tc.keep)
		if tc.proper && (count(want) == 0 || count(want) == len(all)) {
			t.Fatalf("test setup: %v selects %d of %d records; want a proper subset", tc.args, count(want), len(all))
		}
		args := append([]string{"replay", "orders", "--format", "json"}, tc.args...)
		r := srv.cli(t, nil, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("rewind %s: exit code %d, stderr %q; want 0 and nothing on stderr (not a terminal)", strings.Join(args, " "), r.code, r.stderr)
		}
		got := byPartition(parseReplay(t, r.stdout))
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("replay orders %s: lines per partition (-want +got):\n%s", strings.Join(tc.args, " "), d)
		}
	}

	t.Run("start positions", func(t *testing.T) {
		for _, tc := range []posCase{
			{name: "earliest", args: []string{"--from", "earliest"}, keep: func(record) bool { return true }},
			{name: "offset", args: []string{"--from", "1", "--partition", "1"}, keep: func(r record) bool { return r.Partition == 1 && r.Offset >= 1 }, proper: true},
			{name: "offset two partitions", args: []string{"--from", "2", "--partition", "2", "--partition", "0"},
				keep: func(r record) bool { return r.Partition != 1 && r.Offset >= 2 }, proper: true},
			{name: "time exact", args: []string{"--from", "@" + tAfter.UTC().Format(time.RFC3339Nano)}, keep: notBefore(tAfter), proper: true},
			{name: "time between publishes", args: []string{"--from", "@" + tMid.UTC().Format(time.RFC3339Nano)}, keep: notBefore(tMid), proper: true},
			{name: "unix ms", args: []string{"--from", "@" + strconv.FormatInt(tMs.UnixMilli(), 10)}, keep: notBefore(tMs), proper: true},
			{name: "duration ago", args: []string{"--from", "-1h"}, keep: func(record) bool { return true }},
			{name: "records back", args: []string{"--from", "-2"}, keep: func(r record) bool { return r.Offset+2 >= end[r.Partition] }, proper: true},
			{name: "message id", args: []string{"--from", "id:" + idRec.MessageID}, keep: func(r record) bool {
				if r.Partition == idRec.Partition {
					return r.Offset >= idRec.Offset
				}
				return !r.at.Before(idRec.at)
			}, proper: true},
			{name: "latest without follow", args: []string{"--from", "latest"}, keep: func(record) bool { return false }},
		} {
			t.Run(tc.name, func(t *testing.T) { check(t, tc) })
		}

		t.Run("resume token mid-stream", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
			defer cancel()
			sub, err := client.New(srv.url).Subscribe(ctx, "orders", client.From(client.Earliest()), client.Until(client.End()), client.MaxRecordsPerEvent(2))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for len(seen) < 5 && sub.Next() {
				if e, ok := sub.Event().(*client.Records); ok {
					for _, r := range e.Records {
						seen[fmt.Sprintf("p%d@%d", r.Partition, r.Offset)] = true
					}
				}
			}
			tok := sub.ResumeToken()
			sub.Close()
			if len(seen) < 5 || len(seen) == len(all) {
				t.Fatalf("read %d records of %d before taking the token (stream error %v)", len(seen), len(all), sub.Err())
			}
			check(t, posCase{args: []string{"--from", "token:" + tok}, keep: func(r record) bool { return !seen[r.pos()] }, proper: true})
		})

		t.Run("resume token after a bounded replay", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
			defer cancel()
			sub, err := client.New(srv.url).Subscribe(ctx, "orders", client.From(client.Offset(1)), client.Until(client.Offset(3)), client.Partitions(2))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for r, err := range sub.Records() {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("p%d@%d", r.Partition, r.Offset))
			}
			tok := sub.ResumeToken()
			sub.Close()
			if d := cmp.Diff([]string{"p2@1", "p2@2"}, got); d != "" {
				t.Fatalf("client replay --from 1 --to 3 --partition 2 (-want +got):\n%s", d)
			}
			// The token carries partition 2 only: without --partition the
			// stream reads the token's partitions; another partition is
			// refused.
			rest := func(r record) bool { return r.Partition == 2 && r.Offset >= 3 }
			check(t, posCase{args: []string{"--from", "token:" + tok, "--partition", "2"}, keep: rest, proper: true})
			check(t, posCase{args: []string{"--from", "token:" + tok}, keep: rest, proper: true})
			srv.fails(t, "invalid_argument", "replay", "orders", "--from", "token:"+tok, "--partition", "0")
		})
	})

	t.Run("stops", func(t *testing.T) {
		for _, tc := range []posCase{
			{name: "offset", args: []string{"--from", "earliest", "--to", "2", "--partition", "1"}, keep: func(r record) bool { return r.Partition == 1 && r.Offset < 2 }, proper: true},
			{name: "offset range", args: []string{"--from", "1", "--to", "3", "--partition", "0"}, keep: func(r record) bool { return r.Partition == 0 && r.Offset >= 1 && r.Offset < 3 }, proper: true},
			{name: "time exact", args: []string{"--from", "earliest", "--to", "@" + tAfter.UTC().Format(time.RFC3339Nano)}, keep: func(r record) bool { return r.at.Before(tAfter) }, proper: true},
			{name: "time unix ms", args: []string{"--from", "earliest", "--to", "@" + strconv.FormatInt(tMs.UnixMilli(), 10)}, keep: func(r record) bool { return r.at.Before(tMs) }, proper: true},
			{name: "message id", args: []string{"--from", "earliest", "--to", "id:" + idRec.MessageID}, keep: func(r record) bool {
				if r.Partition == idRec.Partition {
					return r.Offset < idRec.Offset
				}
				return r.at.Before(idRec.at)
			}, proper: true},
			{name: "time to message id", args: []string{"--from", "@" + tMid.UTC().Format(time.RFC3339Nano), "--to", "id:" + all[len(all)-1].MessageID}, keep: func(r record) bool {
				last := all[len(all)-1]
				if r.Partition == last.Partition {
					return !r.at.Before(tMid) && r.Offset < last.Offset
				}
				return !r.at.Before(tMid) && r.at.Before(last.at)
			}},
			{name: "explicit end", args: []string{"--from", "-3", "--to", "end"}, keep: func(r record) bool { return r.Offset+3 >= end[r.Partition] }, proper: true},
			// Without --to the replay stops by itself at the end as of its
			// start (check runs it to exit code 0 under a timeout).
			{name: "default end", args: []string{"--from", "1"}, keep: func(r record) bool { return r.Offset >= 1 }, proper: true},
		} {
			t.Run(tc.name, func(t *testing.T) { check(t, tc) })
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"replay", "orders", "--from", "garbage"}, `--from: position "garbage"`},
			{[]string{"replay", "orders", "--from", "id:notanid"}, "invalid_argument"},
			{[]string{"replay", "orders", "--from", "token:notatoken"}, "invalid_argument"},
			{[]string{"replay", "orders", "--from", "999999", "--partition", "0"}, "out_of_range"},
			{[]string{"replay", "orders", "--from", "earliest", "--to", "garbage"}, "--to:"},
			{[]string{"replay", "orders", "--from", "earliest", "--to", "5", "--follow"}, "exclude each other"},
			{[]string{"replay", "orders"}, `"from" not set`},
			{[]string{"replay", "unknown", "--from", "earliest"}, "not_found"},
			{[]string{"publish", "unknown", "v"}, "not_found"},
			{[]string{"publish", "orders", "v", "--header", "novalue"}, "want key=value"},
		} {
			srv.fails(t, tc.want, tc.args...)
		}
	})

	t.Run("follow latest", func(t *testing.T) {
		srv.ok(t, nil, "topic", "create", "live")
		old := parseResults(t, srv.ok(t, nil, "publish", "live", "before-follow"), 1)[0]

		cmd := exec.Command(enginetest.Binary(t), "--server", srv.url, "replay", "live", "--from", "latest", "--follow", "--format", "json")
		cmd.Env = cliEnv()
		stderrPath := filepath.Join(t.TempDir(), "follow.stderr")
		stderrFile, err := os.Create(stderrPath)
		if err != nil {
			t.Fatal(err)
		}
		defer stderrFile.Close()
		cmd.Stderr = stderrFile
		stderr := func() string { b, _ := os.ReadFile(stderrPath); return string(b) }
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 100)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		exited := false
		t.Cleanup(func() {
			if !exited {
				cmd.Process.Kill()
				for range lines {
				}
				cmd.Wait()
			}
		})

		// Publish until the follower prints something: then it is
		// subscribed, and everything published from then on must follow.
		ids := map[string]bool{}
		var got []record
		for attempt := 0; len(got) == 0; attempt++ {
			if attempt == 40 {
				t.Fatalf("replay --from latest --follow printed nothing after %d publishes; stderr %q", attempt, stderr())
			}
			ids[parseResults(t, srv.ok(t, nil, "publish", "live", fmt.Sprintf("probe-%d", attempt)), 1)[0].id] = true
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("follower exited early; stderr %q", stderr())
				}
				got = append(got, parseReplay(t, l+"\n")...)
			case <-time.After(250 * time.Millisecond):
			}
		}
		final := parseResults(t, srv.ok(t, nil, "publish", "live", "live-final", "--key", "fin", "--header", "kind=final"), 1)[0]
		ids[final.id] = true
		timeout := time.After(cmdTimeout)
		for got[len(got)-1].MessageID != final.id {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("follower exited early; stderr %q", stderr())
				}
				got = append(got, parseReplay(t, l+"\n")...)
			case <-timeout:
				t.Fatalf("the record published while following never arrived; got %d lines", len(got))
			}
		}
		checkDense(t, got)
		for _, r := range got {
			if !ids[r.MessageID] || r.Partition != 0 || r.Offset <= old.offset {
				t.Errorf("follower printed %s (%s); want only records published after it started", r.pos(), r.line)
			}
		}
		last := got[len(got)-1]
		if string(last.value) != "live-final" || *last.Key != "fin" || last.Offset != final.offset ||
			len(last.Headers) != 1 || last.Headers[0].Key != "kind" || *last.Headers[0].Value != "final" {
			t.Errorf("live record = %s; want key fin, value live-final, header kind=final at offset %d", last.line, final.offset)
		}

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		timeout = time.After(cmdTimeout)
	drain:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break drain
				}
				t.Errorf("follower printed %q after the last publish", l)
			case <-timeout:
				t.Fatalf("follower did not exit within %s of SIGTERM", cmdTimeout)
			}
		}
		err = cmd.Wait()
		exited = true
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("follower exit code after SIGTERM = %d (%v), want 0; stderr %q", code, err, stderr())
		}
	})

	t.Run("restart", func(t *testing.T) {
		before := srv.ok(t, nil, "replay", "orders", "--from", "earliest", "--format", "json")
		beforeLive := srv.ok(t, nil, "replay", "live", "--from", "earliest", "--format", "json")
		beforeDesc := srv.ok(t, nil, "topic", "describe", "orders", "--format", "json")
		if d := cmp.Diff(byPartition(all), byPartition(parseReplay(t, before))); d != "" {
			t.Fatalf("orders changed before the restart (-first replay +now):\n%s", d)
		}

		srv.Stop(t)
		srv = startServer(t, dataDir, listen)

		if after := srv.ok(t, nil, "replay", "orders", "--from", "earliest", "--format", "json"); after != before {
			t.Errorf("replay of orders after restart differs (-before +after):\n%s", cmp.Diff(before, after))
		}
		if after := srv.ok(t, nil, "replay", "live", "--from", "earliest", "--format", "json"); after != beforeLive {
			t.Errorf("replay of live after restart differs (-before +after):\n%s", cmp.Diff(beforeLive, after))
		}
		if after := srv.ok(t, nil, "topic", "describe", "orders", "--format", "json"); after != beforeDesc {
			t.Errorf("describe orders after restart differs (-before +after):\n%s", cmp.Diff(beforeDesc, after))
		}

		// Publishing continues each partition's offsets densely.
		next := maps.Clone(end)
		fresh := pubsOf(t, []byte("after-0\nafter-1\nafter-2\nafter-3\nafter-4\nafter-5\n"), 6)
		fresh = append(fresh, pubsOf(t, nil, 1, "k1-returned", "--key", "k1")...)
		for _, p := range fresh {
			if p.offset != next[p.partition] {
				t.Errorf("after restart: %s stored at p%d@%d, want offset %d", p.id, p.partition, p.offset, next[p.partition])
			}
			next[p.partition] = p.offset + 1
		}
		afterRecs := parseReplay(t, srv.ok(t, nil, "replay", "orders", "--from", "earliest", "--format", "json"))
		if len(afterRecs) != len(all)+len(fresh) {
			t.Errorf("after publishing %d more: %d records, want %d", len(fresh), len(afterRecs), len(all)+len(fresh))
		}
		old, now := byPartition(all), byPartition(afterRecs)
		for p, lines := range old {
			if len(now[p]) < len(lines) || !slices.Equal(now[p][:len(lines)], lines) {
				t.Errorf("partition %d: history before the restart is not a prefix of the history after it", p)
			}
		}
		var k1 []string
		for _, r := range afterRecs {
			if *r.Key == "k1" {
				k1 = append(k1, string(r.value))
			}
		}
		if d := cmp.Diff([]string{"k1-created", "k1-paid", "k1-shipped", "k1-returned"}, k1); d != "" {
			t.Errorf("key k1 after restart (-want +got):\n%s", d)
		}

		srv.Stop(t)
	})
}
