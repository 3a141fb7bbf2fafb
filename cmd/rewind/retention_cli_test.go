package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestRetentionRecordsIsExact is issue 18's three steps, as a new user
// types them: a topic that keeps 100 records, 1,000 records piped to
// `rewind publish`, and a look at the partition. Retention used to remove
// whole batches, and the 1,000 records came in one or two batches, so the
// partition ended empty (log start 1000). Now it holds exactly offsets
// 900..999.
func TestRetentionRecordsIsExact(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "r", "--partitions", "1", "--retention-records", "100")
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "v%d\n", i)
	}
	parseResults(t, s.ok(t, []byte(in.String()), "publish", "r"), 1000)

	type part struct {
		LogStartOffset uint64 `json:"log_start_offset"`
		EndOffset      uint64 `json:"end_offset"`
		Records        uint64 `json:"records"`
	}
	var desc struct {
		PartitionInfo []part `json:"partition_info"`
	}
	// Retention runs once a second, maybe also while the lines were still
	// arriving: poll (liveness only) until it moved the log start to at
	// least 900, then check that it is exactly there.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := s.ok(t, nil, "topic", "describe", "r", "--format", "json")
		if err := json.Unmarshal([]byte(out), &desc); err != nil || len(desc.PartitionInfo) != 1 {
			t.Fatalf("topic describe --format json: %v\n%s", err, out)
		}
		if desc.PartitionInfo[0].LogStartOffset >= 900 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention did not run within 60s: %+v", desc.PartitionInfo[0])
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	if got, want := desc.PartitionInfo[0], (part{LogStartOffset: 900, EndOffset: 1000, Records: 100}); got != want {
		t.Fatalf("partition after retention: %+v, want %+v", got, want)
	}
	recs := parseReplay(t, s.ok(t, nil, "replay", "r", "--from", "earliest", "--format", "json"))
	if len(recs) != 100 || recs[0].Offset != 900 || string(recs[0].value) != "v900" || recs[99].Offset != 999 {
		t.Fatalf("replay from earliest: %d records, first %+v", len(recs), recs[0])
	}
}

// TestTieredStorageFromTheCommandLine: a user starts `rewind serve --tier
// file:///...`, creates a topic that keeps about 2 KiB per partition on
// disk, publishes 1,000 records, and still replays all of them from the
// earliest with the same command as always; `topic describe` shows where
// the history lives.
func TestTieredStorageFromTheCommandLine(t *testing.T) {
	tierDir := t.TempDir()
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t), "--tier", "file://"+tierDir, "--retention-interval", "50ms")
	s.ok(t, nil, "topic", "create", "h", "--partitions", "1", "--local-retention-bytes", "2KiB")
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "value-%04d-padding-padding-padding\n", i)
	}
	parseResults(t, s.ok(t, []byte(in.String()), "publish", "h"), 1000)
	type part struct {
		LogStartOffset   uint64 `json:"log_start_offset"`
		LocalStartOffset uint64 `json:"local_start_offset"`
		EndOffset        uint64 `json:"end_offset"`
		TieredSegments   uint32 `json:"tiered_segments"`
	}
	var desc struct {
		PartitionInfo []part `json:"partition_info"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := s.ok(t, nil, "topic", "describe", "h", "--format", "json")
		if err := json.Unmarshal([]byte(out), &desc); err != nil || len(desc.PartitionInfo) != 1 {
			t.Fatalf("topic describe --format json: %v\n%s", err, out)
		}
		if desc.PartitionInfo[0].LocalStartOffset > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing moved to tiered storage within 60s: %+v", desc.PartitionInfo[0])
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	if p := desc.PartitionInfo[0]; p.LogStartOffset != 0 || p.EndOffset != 1000 || p.TieredSegments == 0 {
		t.Fatalf("partition: %+v", p)
	}
	text := s.ok(t, nil, "topic", "describe", "h")
	if !strings.Contains(text, "LOCAL START") || !strings.Contains(text, "tiered storage") {
		t.Fatalf("topic describe does not show the tiered history:\n%s", text)
	}
	recs := parseReplay(t, s.ok(t, nil, "replay", "h", "--from", "earliest", "--format", "json"))
	if len(recs) != 1000 || recs[0].Offset != 0 || string(recs[0].value) != "value-0000-padding-padding-padding" || recs[999].Offset != 999 {
		t.Fatalf("replay from earliest: %d records, first %+v", len(recs), recs[0])
	}
	// Without --tier, local limits are refused with the reason.
	s2 := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	r := runCLI(t, nil, nil, "--server", s2.url, "topic", "create", "x", "--local-retention-age", "1h")
	if r.code == 0 || !strings.Contains(r.stderr, "--tier") {
		t.Fatalf("local retention without a tier: exit %d, stderr %q", r.code, r.stderr)
	}
}
