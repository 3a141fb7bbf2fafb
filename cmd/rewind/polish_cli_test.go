//go:build unix

package main

// The CLI at its edges: numeric flags that must not wrap, mistyped
// subcommands, version, usage, serve's early checks and shell completion.

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestPartitionFlagsRefuseOutOfRange checks every --partition: a value
// that does not fit a uint32, or is negative, is an error before anything
// connects. It used to wrap: publish --partition 4294967296 published to
// partition 0, and -2 meant "no partition".
func TestPartitionFlagsRefuseOutOfRange(t *testing.T) {
	t.Parallel()
	// Nothing listens here: a command that got past its flags would fail
	// with Unavailable instead.
	server := "http://" + enginetest.FreeAddr(t)
	commands := [][]string{
		{"publish", "t", "v"},
		{"replay", "t", "--from", "earliest"},
		{"group", "reset", "g", "--topic", "t", "--to", "earliest"},
		{"plugin", "test", "x.wasm", "--topic", "t"},
	}
	values := map[string]string{
		"4294967296": "out of range",
		"4294967297": "out of range",
		"-2":         "negative",
		"-1":         "negative",
		"1,x":        "not a partition number",
	}
	for _, c := range commands {
		for v, want := range values {
			args := append(append([]string{"--server", server}, c...), "--partition", v)
			r := runCLI(t, nil, nil, args...)
			if r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "--partition") {
				t.Errorf("rewind %s: exit %d, stderr %q; want exit 1 and an error about --partition saying %q",
					strings.Join(args[2:], " "), r.code, r.stderr, want)
			}
		}
	}
}

// TestPartitionFlagsTakeTheirRange checks the largest partition number
// reaches the server unchanged (which refuses it: no such partition).
func TestPartitionFlagsTakeTheirRange(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	srv.ok(t, nil, "topic", "create", "t", "--partitions", "2")
	srv.fails(t, "4294967295", "publish", "t", "v", "--partition", "4294967295")
	out := srv.ok(t, nil, "publish", "t", "v", "--partition", "1")
	if !strings.HasPrefix(out, "partition=1 ") {
		t.Errorf("publish --partition 1 printed %q", out)
	}
	srv.fails(t, "4294967295", "replay", "t", "--from", "earliest", "--partition", "0", "--partition", "4294967295")
	if recs := parseReplay(t, srv.ok(t, nil, "replay", "t", "--from", "earliest", "--partition", "0,1", "--format", "json")); len(recs) != 1 || recs[0].Partition != 1 {
		t.Errorf("replay --partition 0,1: %+v", recs)
	}
}

// commandGroups returns the paths of every command with subcommands
// (without the root), as the real binary has them.
func commandGroups() [][]string {
	var out [][]string
	var rec func(c *cobra.Command, path []string)
	rec = func(c *cobra.Command, path []string) {
		if c.HasSubCommands() && len(path) > 0 {
			out = append(out, path)
		}
		for _, s := range c.Commands() {
			rec(s, append(slices.Clone(path), s.Name()))
		}
	}
	rec(newRoot(), nil)
	return out
}

// TestMistypedSubcommandFails checks every command group: an unknown
// subcommand exits 1 with a suggestion, as at the top level; `rewind
// topic lst` used to print help and exit 0, so scripts missed the typo.
func TestMistypedSubcommandFails(t *testing.T) {
	t.Parallel()
	groups := commandGroups()
	for _, want := range []string{"topic", "group", "plugin", "cluster", "bench", "completion"} {
		if !slices.ContainsFunc(groups, func(p []string) bool { return p[0] == want }) {
			t.Errorf("command group %s not found in %v", want, groups)
		}
	}
	root := newRoot()
	for _, path := range groups {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		sub := cmd.Commands()[0].Name()
		typo := sub[:len(sub)-1] // drop the last letter: one edit away
		r := runCLI(t, nil, nil, append(slices.Clone(path), typo)...)
		if r.code != 1 || !strings.Contains(r.stderr, `unknown command "`+typo+`"`) || !strings.Contains(r.stderr, "Did you mean this?\n\t"+sub) {
			t.Errorf("rewind %s %s: exit %d, stderr %q; want exit 1, unknown command, and the suggestion %q",
				strings.Join(path, " "), typo, r.code, r.stderr, sub)
		}
		r = runCLI(t, nil, nil, append(slices.Clone(path), "zzzz")...)
		if r.code != 1 || !strings.Contains(r.stderr, `unknown command "zzzz"`) {
			t.Errorf("rewind %s zzzz: exit %d, stderr %q; want exit 1 and unknown command", strings.Join(path, " "), r.code, r.stderr)
		}
		// The group alone still shows its help.
		if r := runCLI(t, nil, nil, path...); r.code != 0 || !strings.Contains(r.stdout, "Available Commands") {
			t.Errorf("rewind %s: exit %d, stdout %q; want its help", strings.Join(path, " "), r.code, r.stdout)
		}
	}
	r := runCLI(t, nil, nil, "topc")
	if r.code != 1 || !strings.Contains(r.stderr, "Did you mean this?\n\ttopic") {
		t.Errorf("rewind topc: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	a := runCLI(t, nil, nil, "version")
	b := runCLI(t, nil, nil, "--version")
	if a.code != 0 || b.code != 0 || a.stdout != b.stdout {
		t.Fatalf("rewind version: exit %d, %q; rewind --version: exit %d, %q; want both 0 and the same", a.code, a.stdout, b.code, b.stdout)
	}
	for _, want := range []string{"rewind ", "\ncommit ", runtime.Version()} {
		if !strings.Contains(a.stdout, want) {
			t.Errorf("rewind version printed %q; want it to contain %q", a.stdout, want)
		}
	}
}

// TestMissingArgumentsShowUsage: `rewind publish` alone exits 1 and shows
// how to call it.
func TestMissingArgumentsShowUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"publish"}, {"replay"}, {"topic", "create"}, {"group", "describe"}} {
		r := runCLI(t, nil, nil, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "Usage:\n  rewind "+strings.Join(args, " ")) || !strings.Contains(r.stderr, "Flags:") {
			t.Errorf("rewind %s: exit %d, stderr %q; want exit 1 and the usage", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// TestServeBadFlagsCreateNothing: a --listen that cannot be bound, or a
// MiB flag that would wrap, fails before the data directory is created.
func TestServeBadFlagsCreateNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range [][]string{
		{"--listen", "127.0.0.1:99999"},
		{"--listen", "127.0.0.1:-1"},
		{"--listen", "not an address"},
		{"--filter-memory-mib", "268435456"}, // 2^32 pages: wrapped to 0, the default
		{"--filter-memory-mib", "-1"},
		{"--tail-cache-mib", "9223372036854775807"},
		{"--failure-detect-ticks", "10"}, // not below --election-ticks (10)
		{"--failure-detect-ticks", "1"},  // would fire between two heartbeats
	} {
		data := filepath.Join(t.TempDir(), "data")
		r := runCLI(t, nil, nil, append([]string{"serve", "--data", data}, tc...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc[0]) {
			t.Errorf("serve %s: exit %d, stderr %q; want exit 1 and an error about %s", strings.Join(tc, " "), r.code, r.stderr, tc[0])
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("serve %s created its data directory (stat: %v)", strings.Join(tc, " "), err)
		}
	}
}

// complete runs cobra's hidden completion command and returns the
// suggestions (without descriptions) and the directive line.
func complete(t *testing.T, server string, args ...string) ([]string, string) {
	t.Helper()
	r := runCLI(t, nil, nil, append([]string{"--server", server, "__complete"}, args...)...)
	if r.code != 0 {
		t.Fatalf("__complete %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	lines := splitLines(t, r.stdout)
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("__complete %s: no directive line in %q", strings.Join(args, " "), r.stdout)
	}
	var out []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		out = append(out, name)
	}
	return out, lines[len(lines)-1]
}

// TestCompletion checks names completed from the server and fixed values
// completed from the flags, and that a server that cannot be reached
// gives no suggestions rather than an error.
func TestCompletion(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	srv.ok(t, nil, "topic", "create", "orders")
	srv.ok(t, nil, "topic", "create", "payments")
	srv.ok(t, nil, "topic", "create", "users")
	srv.ok(t, nil, "publish", "orders", "v")
	srv.ok(t, nil, "group", "reset", "billing", "--topic", "orders", "--to", "earliest", "--execute", "--create")
	names := []string{"orders", "payments", "users"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"topic", ""}, []string{"alter", "create", "delete", "describe", "list"}}, // groups still complete their subcommands
		{[]string{"topic", "describe", ""}, names},
		{[]string{"topic", "describe", "p"}, []string{"payments"}},
		{[]string{"publish", ""}, names},
		{[]string{"replay", "o"}, []string{"orders"}},
		{[]string{"replay", "orders", ""}, []string{"--from"}}, // no second argument; cobra offers the required flag
		{[]string{"subscribe", "orders", "--group", ""}, []string{"billing"}},
		{[]string{"group", "describe", ""}, []string{"billing"}},
		{[]string{"group", "reset", "billing", "--topic", "u"}, []string{"users"}},
		{[]string{"replay", "orders", "--from", ""}, []string{"earliest", "latest", "-15m", "-1h", "-7d", "-10", "@", "id:", "token:"}},
		{[]string{"topic", "create", "x", "--cleanup", ""}, []string{"delete", "compact", "compact,delete"}},
		{[]string{"topic", "list", "--format", ""}, []string{"text", "json"}},
		{[]string{"replay", "orders", "--format", ""}, []string{"text", "json", "{{.Offset}} {{.Value}}"}},
	} {
		got, _ := complete(t, srv.url, tc.args...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("complete %q: %q, want %q", tc.args, got, tc.want)
		}
	}
	// Plugin names: none registered yet, and an empty list is no error.
	if got, _ := complete(t, srv.url, "plugin", "get", ""); len(got) != 0 {
		t.Errorf("complete plugin get: %q, want nothing", got)
	}
	got, directive := complete(t, "http://"+enginetest.FreeAddr(t), "topic", "describe", "")
	if len(got) != 0 || directive != ":4" {
		t.Errorf("complete without a server: %q %s; want no suggestions and no file completion (:4)", got, directive)
	}
}

// TestGroupResetOfAMissingGroup: a reset of a group that has nothing on
// the topic says so (NotFound), in the plan and with --execute, rather
// than creating the group under a mistyped name; --create creates it.
func TestGroupResetOfAMissingGroup(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	srv.ok(t, nil, "topic", "create", "orders", "--partitions", "2")
	srv.ok(t, nil, "topic", "create", "other")
	srv.ok(t, nil, "publish", "orders", "v", "--key", "k")
	srv.fails(t, "not_found: no such group", "group", "reset", "billing", "--topic", "orders", "--to", "latest", "--execute")
	srv.fails(t, `"billing"`, "group", "reset", "billing", "--topic", "orders", "--to", "latest")
	srv.fails(t, "not_found", "group", "describe", "billing") // nothing was created

	out := srv.ok(t, nil, "group", "reset", "billing", "--topic", "orders", "--to", "latest", "--execute", "--create")
	if !strings.Contains(out, "reset executed") {
		t.Fatalf("reset --execute --create:\n%s", out)
	}
	srv.ok(t, nil, "group", "describe", "billing")
	// Now it exists on orders: no --create needed there; on another topic
	// the group is still not found.
	srv.ok(t, nil, "group", "reset", "billing", "--topic", "orders", "--to", "earliest", "--execute")
	srv.fails(t, "not_found", "group", "reset", "billing", "--topic", "other", "--to", "earliest", "--execute")
}

// TestBenchTopicDefaults guards the README's `rewind bench replay` line:
// publish, replay and ttfm share the "bench" topic by default, and no two
// subcommands share the variable behind --topic (once they did, and the
// last default registered, "lat", won for all of them).
func TestBenchTopicDefaults(t *testing.T) {
	root := newRoot()
	want := map[string]string{"publish": "bench", "replay": "bench", "ttfm": "bench", "latency": "lat"}
	for name, topic := range want {
		cmd, _, err := root.Find([]string{"bench", name})
		if err != nil {
			t.Fatalf("bench %s: %v", name, err)
		}
		if got := cmd.Flags().Lookup("topic").Value.String(); got != topic {
			t.Errorf("bench %s --topic defaults to %q, want %q", name, got, topic)
		}
	}
}

// TestReplayRefusesAnEmptyRange: --to not after --from (offsets or times)
// is an error naming both, not a silent empty replay (issue 28).
func TestReplayRefusesAnEmptyRange(t *testing.T) {
	t.Parallel()
	server := "http://" + enginetest.FreeAddr(t) // never reached: refused first
	for _, c := range [][2]string{
		{"10", "5"}, {"7", "7"},
		{"@2026-12-01T10:00:00Z", "@2026-12-01T09:00:00Z"},
	} {
		r := runCLI(t, nil, nil, "--server", server, "replay", "t", "--partition", "0", "--from", c[0], "--to", c[1])
		if r.code != 1 || !strings.Contains(r.stderr, "--to "+c[1]+" is not after --from "+c[0]) {
			t.Errorf("replay --from %s --to %s: exit %d, stderr %q", c[0], c[1], r.code, r.stderr)
		}
	}
}

// TestMaxRecordBytesTakesUnits: --max-record-bytes takes a size with a
// unit, as --retention-bytes does (issue 28).
func TestMaxRecordBytesTakesUnits(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "big", "--max-record-bytes", "2MiB")
	if out := s.ok(t, nil, "topic", "describe", "big"); !strings.Contains(out, "max record 2097152 bytes") {
		t.Fatalf("topic describe:\n%s", out)
	}
	s.fails(t, "--max-record-bytes", "topic", "create", "bad", "--max-record-bytes", "lots")
}
