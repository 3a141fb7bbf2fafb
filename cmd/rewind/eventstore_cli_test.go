package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestCLIEventStore: the event-store spellings of the CLI against a real
// `rewind serve`: publish --expect-version (none, N; a stale N exits 1
// naming the expected and actual versions, storing nothing), --tag and
// --type, key_version in the results, and replay --key with --from v:N
// and -N, in text and JSON.
func TestCLIEventStore(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "orders", "--partitions", "3")
	out := s.ok(t, nil, "publish", "orders", "created", "--key", "order-1", "--expect-version", "none", "--type", "OrderCreated", "--tag", "customer:7")
	if !strings.Contains(out, "key_version=0") {
		t.Fatalf("publish --expect-version none printed %q", out)
	}
	s.ok(t, nil, "publish", "orders", "noise", "--key", "order-2")
	out = s.ok(t, nil, "publish", "orders", "paid", "--key", "order-1", "--expect-version", "0", "--format", "json")
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["key_version"] != 1.0 {
		t.Fatalf("publish --format json printed %q (%v)", out, err)
	}
	s.fails(t, "expected 0, actual 1", "publish", "orders", "shipped", "--key", "order-1", "--expect-version", "0")
	s.fails(t, "expected none, actual 1", "publish", "orders", "again", "--key", "order-1", "--expect-version", "none")
	s.fails(t, "--expect-version", "publish", "orders", "x", "--key", "order-1", "--expect-version", "latest")

	replay := func(args ...string) []string {
		t.Helper()
		var values []string
		for _, line := range strings.Split(strings.TrimSpace(s.ok(t, nil, append([]string{"replay", "orders", "--key", "order-1", "--format", "json"}, args...)...)), "\n") {
			if line == "" {
				continue
			}
			var r struct {
				Value      string  `json:"value"`
				KeyVersion *uint64 `json:"key_version"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil || r.KeyVersion == nil {
				t.Fatalf("replay line %q: %v", line, err)
			}
			values = append(values, r.Value)
		}
		return values
	}
	if got := strings.Join(replay("--from", "earliest"), ","); got != "created,paid" {
		t.Fatalf("replay --key from earliest: %s", got)
	}
	if got := strings.Join(replay("--from", "v:1"), ","); got != "paid" {
		t.Fatalf("replay --key --from v:1: %s", got)
	}
	if got := strings.Join(replay("--from", "-1"), ","); got != "paid" {
		t.Fatalf("replay --key --from -1: %s", got)
	}
	if got := strings.Join(replay("--from", "-5"), ","); got != "created,paid" {
		t.Fatalf("replay --key --from -5: %s", got)
	}
	// A topic without the key index refuses a conditional publish, and
	// describe says so.
	s.ok(t, nil, "topic", "create", "fast", "--key-index=false")
	if out := s.ok(t, nil, "topic", "describe", "fast"); !strings.Contains(out, "key index off") {
		t.Fatalf("topic describe:\n%s", out)
	}
	s.fails(t, "key index", "publish", "fast", "v", "--key", "k", "--expect-version", "none")
	// The stale publishes stored nothing: the partition holds two records
	// of the key and nothing else of it.
	text := s.ok(t, nil, "replay", "orders", "--key", "order-1", "--from", "earliest")
	if n := strings.Count(text, "order-1"); n != 2 || !strings.Contains(text, "rewind-tag=customer:7") {
		t.Fatalf("replay --key text:\n%s", text)
	}
}
