package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRetentionRecordsIsExact is issue 18's three steps, as a new user
// types them: a topic that keeps 100 records, 1,000 records piped to
// `rewind publish`, and a look at the partition. Retention used to remove
// whole batches, and the 1,000 records came in one or two batches, so the
// partition ended empty (log start 1000). Now it holds exactly offsets
// 900..999.
func TestRetentionRecordsIsExact(t *testing.T) {
	s := startServer(t, t.TempDir(), freeAddr(t))
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
