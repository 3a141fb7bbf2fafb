package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// startAuthServer starts `rewind serve --auth` and waits for its bootstrap
// token, then for the token to list topics; it returns the server and the
// token.
func startAuthServer(t *testing.T, dir, listen string, extra ...string) (*server, string) {
	t.Helper()
	var tok string
	s := startServerWith(t, &server{url: "http://" + listen}, enginetest.ProcessConfig{
		Addr: listen, Dir: dir, Args: append([]string{"--auth"}, extra...), LogLevel: "info",
		Ready: func(context.Context, *enginetest.Process) error {
			b, err := os.ReadFile(filepath.Join(dir, "bootstrap-token"))
			if err != nil || len(b) == 0 {
				return fmt.Errorf("no bootstrap token yet (%v)", err)
			}
			tok = strings.TrimSpace(string(b))
			if r := runCLI(t, nil, nil, "--server", "http://"+listen, "--token", tok, "topic", "list"); r.code != 0 {
				return fmt.Errorf("`topic list` with the bootstrap token: exit %d, stderr %q", r.code, r.stderr)
			}
			return nil
		},
	})
	return s, tok
}

// TestCLIAuth walks docs/security.md's first steps: the bootstrap token,
// a read-only principal that follows the tail but may not replay or reset,
// acl check, revocation, and the audit log.
func TestCLIAuth(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	s, root := startAuthServer(t, dir, enginetest.FreeAddr(t), "--audit-log", audit)
	fi, err := os.Stat(filepath.Join(dir, "bootstrap-token"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap token file: %v %v", fi, err)
	}
	if !strings.Contains(s.Log(), filepath.Join(dir, "bootstrap-token")) || strings.Contains(s.Log(), root) {
		t.Fatalf("the server log should name the token file and never the token:\n%s", s.Log())
	}
	as := func(tok string, args ...string) result {
		return runCLI(t, nil, nil, append([]string{"--server", s.url, "--token", tok}, args...)...)
	}
	must := func(r result) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		return r
	}

	if r := runCLI(t, nil, nil, "--server", s.url, "topic", "list"); r.code == 0 || !strings.Contains(r.stderr, "unauthenticated") || !strings.Contains(r.stderr, "--token") {
		t.Fatalf("anonymous topic list: exit %d, stderr %q", r.code, r.stderr)
	}
	// REWIND_TOKEN works as well as --token.
	if r := runCLI(t, nil, cliEnv("REWIND_TOKEN="+root), "--server", s.url, "topic", "create", "orders", "--partitions", "1"); r.code != 0 {
		t.Fatalf("topic create with REWIND_TOKEN: %s", r.stderr)
	}
	must(as(root, "publish", "orders", "old"))

	created := must(as(root, "user", "create", "reader", "--expires", "720h"))
	reader := strings.TrimSpace(created.stdout)
	if !strings.HasPrefix(reader, "rwd_") || !strings.Contains(created.stderr, "shown only now") {
		t.Fatalf("user create: %q / %q", created.stdout, created.stderr)
	}
	if r := must(as(root, "user", "list")); !strings.Contains(r.stdout, "reader") || strings.Contains(r.stdout, reader) {
		t.Fatalf("user list shows the reader without its secret:\n%s", r.stdout)
	}
	if r := must(as(root, "acl", "grant", "reader", "--topic", "orders", "--allow", "read,describe")); strings.TrimSpace(r.stdout) != "#1 allow reader describe,read topic:orders" {
		t.Fatalf("acl grant: %q", r.stdout)
	}
	must(as(root, "acl", "grant", "ops", "--group", "*", "--allow", "reset,describe"))
	if r := must(as(root, "acl", "list")); !strings.Contains(r.stdout, "superuser root") || !strings.Contains(r.stdout, "#2 allow ops describe,reset group:*") {
		t.Fatalf("acl list:\n%s", r.stdout)
	}
	if r := as(root, "acl", "check", "reader", "replay", "topic:orders"); r.code != 1 || !strings.Contains(r.stdout, "denied: no rule allows it") {
		t.Fatalf("acl check replay: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := must(as(root, "acl", "check", "reader", "read", "topic:orders")); !strings.Contains(r.stdout, "allowed by rule #1") {
		t.Fatalf("acl check read: %q", r.stdout)
	}
	if r := as(root, "acl", "grant", "x", "--topic", "a*b", "--allow", "read"); r.code == 0 || !strings.Contains(r.stderr, "invalid_argument") {
		t.Fatalf("bad pattern: exit %d %q", r.code, r.stderr)
	}

	// The reader follows the tail but is refused a replay and a reset.
	if r := as(reader, "replay", "orders", "--from", "earliest"); r.code == 0 || !strings.Contains(r.stderr, "permission_denied: permission denied: replay on topic:orders") {
		t.Fatalf("reader replay: exit %d %q", r.code, r.stderr)
	}
	if r := as(reader, "group", "reset", "billing", "--topic", "orders", "--to", "earliest", "--execute"); r.code == 0 || !strings.Contains(r.stderr, "permission_denied") {
		t.Fatalf("reader reset: exit %d %q", r.code, r.stderr)
	}
	if r := must(as(reader, "topic", "list")); !strings.Contains(r.stdout, "orders") {
		t.Fatalf("reader topic list: %q", r.stdout)
	}

	if r := must(as(root, "acl", "revoke", "reader", "--topic", "orders", "--allow", "describe")); !strings.Contains(r.stdout, "revoked #1") {
		t.Fatalf("acl revoke by match: %q", r.stdout)
	}
	if r := must(as(reader, "topic", "list")); strings.Contains(r.stdout, "orders") {
		t.Fatalf("without describe the reader still lists orders: %q", r.stdout)
	}
	must(as(root, "acl", "revoke", "2"))
	if r := as(root, "acl", "revoke", "2"); r.code == 0 || !strings.Contains(r.stderr, "not_found") {
		t.Fatalf("revoke a revoked rule: exit %d %q", r.code, r.stderr)
	}
	if r := must(as(root, "user", "revoke", "reader")); !strings.Contains(r.stdout, "revoked token") {
		t.Fatalf("user revoke: %q", r.stdout)
	}
	if r := as(reader, "topic", "list"); r.code == 0 || !strings.Contains(r.stderr, "unauthenticated") {
		t.Fatalf("revoked reader: exit %d %q", r.code, r.stderr)
	}

	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), root) || strings.Contains(string(b), reader) {
		t.Fatal("a token is in the audit log")
	}
	var sawDenial, sawAdmin bool
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		for _, k := range []string{"time", "principal", "operation", "resource", "outcome", "request_id"} {
			if _, ok := e[k]; !ok {
				t.Fatalf("audit line %q lacks %s", line, k)
			}
		}
		sawDenial = sawDenial || (e["principal"] == "reader" && e["operation"] == "replay" && e["outcome"] == "denied")
		sawAdmin = sawAdmin || (e["principal"] == "root" && e["operation"] == "CreateUser" && e["outcome"] == "ok")
	}
	if !sawDenial || !sawAdmin {
		t.Fatalf("audit log lacks the replay denial or the CreateUser:\n%s", b)
	}
}

// TestCLIQuota: an operator sets a principal's quota and the default with
// `rewind quota set` and reads them back with `rewind quota list`; a
// principal without the cluster admin right cannot. A principal over its
// topics or partitions quota is refused `topic create` with
// resource_exhausted naming the limit, and `quota list` shows what it owns.
func TestCLIQuota(t *testing.T) {
	s, root := startAuthServer(t, t.TempDir(), enginetest.FreeAddr(t))
	as := func(tok string, args ...string) result {
		return runCLI(t, nil, nil, append([]string{"--server", s.url, "--token", tok}, args...)...)
	}
	for _, args := range [][]string{
		{"quota", "set", "etl", "--publish-bytes-per-sec", "10KB", "--streams", "2", "--topics", "2", "--partitions", "3"},
		{"quota", "set", "--default", "--replay-bytes-per-sec", "1MiB"},
	} {
		if r := as(root, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	r := as(root, "quota", "list", "--format", "json")
	var got struct {
		Quotas map[string]struct {
			PublishBytesPerSec uint64 `json:"publish_bytes_per_sec"`
			Streams            int    `json:"streams"`
			Topics             int    `json:"topics"`
			Partitions         int    `json:"partitions"`
		} `json:"quotas"`
		DefaultQuota struct {
			ReplayBytesPerSec uint64 `json:"replay_bytes_per_sec"`
		} `json:"default_quota"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Quotas["etl"].PublishBytesPerSec != 10000 ||
		got.Quotas["etl"].Streams != 2 || got.Quotas["etl"].Topics != 2 || got.Quotas["etl"].Partitions != 3 ||
		got.DefaultQuota.ReplayBytesPerSec != 1048576 {
		t.Fatalf("quota list: %v\n%s", err, r.stdout)
	}
	if r := as(root, "quota", "set", "--default", "etl"); r.code == 0 {
		t.Fatal("a principal and --default together were accepted")
	}
	tok := strings.TrimSpace(strings.Fields(as(root, "user", "create", "reader").stdout)[0])
	if r := as(tok, "quota", "set", "reader", "--streams", "100"); r.code == 0 || !strings.Contains(r.stderr, "permission_denied") {
		t.Fatalf("a reader setting its own quota: exit %d, stderr %q", r.code, r.stderr)
	}

	etl := strings.TrimSpace(strings.Fields(as(root, "user", "create", "etl").stdout)[0])
	if r := as(root, "acl", "grant", "etl", "--topic", "*", "--allow", "create"); r.code != 0 {
		t.Fatalf("acl grant: %s", r.stderr)
	}
	if r := as(etl, "topic", "create", "e1", "--partitions", "2"); r.code != 0 {
		t.Fatalf("topic create within the quota: %s", r.stderr)
	}
	if r := as(etl, "topic", "create", "e2", "--partitions", "2"); r.code == 0 || !strings.Contains(r.stderr, "resource_exhausted") ||
		!strings.Contains(r.stderr, "may have 3 partitions in all and has 2") {
		t.Fatalf("topic create past the partitions quota: exit %d, stderr %q", r.code, r.stderr)
	}
	r = as(root, "quota", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "TOPICS") || !regexp.MustCompile(`(?m)^etl\s.*\s1\s+2\s*$`).MatchString(r.stdout) {
		t.Fatalf("quota list does not show etl's 1 topic of 2 partitions:\n%s", r.stdout)
	}
}
