package main

import (
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// The live-first machinery as an operator sees it: the serve flags are
// checked, every publish is timed in /metrics, and a replay of history
// takes catch-up turns that /metrics counts.
func TestLiveFirstMetricsAndFlags(t *testing.T) {
	for _, bad := range []string{"0", "-0.5", "1.5", "nan"} {
		r := runCLI(t, nil, nil, "serve", "--data", t.TempDir(), "--listen", enginetest.FreeAddr(t), "--replay-share", bad)
		if r.code == 0 || !strings.Contains(r.stderr, "--replay-share") {
			t.Errorf("--replay-share %s: exit %d, stderr %q; want a refusal naming the flag", bad, r.code, r.stderr)
		}
	}
	if r := runCLI(t, nil, nil, "serve", "--data", t.TempDir(), "--listen", enginetest.FreeAddr(t), "--gc-heap-target", "lots"); r.code == 0 || !strings.Contains(r.stderr, "--gc-heap-target") {
		t.Errorf("--gc-heap-target lots: exit %d, stderr %q", r.code, r.stderr)
	}

	addr := enginetest.FreeAddr(t)
	s := startServer(t, t.TempDir(), addr, "--replay-share", "0.5", "--gc-heap-target", "256MiB")
	s.ok(t, nil, "topic", "create", "t", "--partitions", "1")
	const n = 20
	for i := range n {
		s.ok(t, nil, "publish", "t", strings.Repeat("x", i+1))
	}
	for _, name := range []string{"rewind_publish_queue_seconds_count", "rewind_publish_store_seconds_count"} {
		if got := counter(t, addr, name); got != n {
			t.Errorf("%s = %d after %d publishes", name, got, n)
		}
	}
	if got := counter(t, addr, "rewind_raft_sync_seconds_count"); got < n {
		t.Errorf("rewind_raft_sync_seconds_count = %d after %d single publishes (one sync each at least)", got, n)
	}
	// A replay from the first record is catch-up work: it takes turns.
	before := counter(t, addr, "rewind_replay_turns_total")
	if out := s.ok(t, nil, "replay", "t", "--from", "earliest"); len(splitLines(t, out)) != n {
		t.Fatalf("replay printed %d lines, want %d", len(splitLines(t, out)), n)
	}
	if after := counter(t, addr, "rewind_replay_turns_total"); after <= before {
		t.Errorf("a replay of history took no catch-up turn (%d before, %d after)", before, after)
	}
}
