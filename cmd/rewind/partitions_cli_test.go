//go:build unix

package main

// End-to-end tests of partition counts through the real binary: keyless
// lines spread evenly over the partitions whether they arrive one at a
// time or in one large pipe (issue 28), and `topic alter --partitions`
// grows a topic, refuses to shrink one or to grow one with the key index,
// and keeps an idempotency key's retry a duplicate across the growth.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os/exec"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// describeCounts returns the records in each partition of topic.
func describeCounts(t *testing.T, srv *server, topic string) []uint64 {
	t.Helper()
	var d struct {
		Partitions    int `json:"partitions"`
		PartitionInfo []struct {
			Records uint64 `json:"records"`
		} `json:"partition_info"`
	}
	if err := json.Unmarshal([]byte(srv.ok(t, nil, "topic", "describe", topic, "--format", "json")), &d); err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(d.PartitionInfo))
	for i, p := range d.PartitionInfo {
		out[i] = p.Records
	}
	return out
}

// within10 fails unless every count is within ±10% of their mean.
func within10(t *testing.T, what string, counts []uint64) {
	t.Helper()
	var sum uint64
	for _, c := range counts {
		sum += c
	}
	mean := float64(sum) / float64(len(counts))
	for _, c := range counts {
		if d := float64(c) - mean; d > mean/10 || -d > mean/10 {
			t.Errorf("%s: records per partition %v; want each within ±10%% of %.0f", what, counts, mean)
			return
		}
	}
}

func TestKeylessLinesSpreadEvenlyCLI(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	srv.ok(t, nil, "topic", "create", "typed", "--partitions", "4")
	srv.ok(t, nil, "topic", "create", "piped", "--partitions", "4")

	// 4,000 lines, each written once the previous one's result is out:
	// one request per line, as when a user types them.
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, enginetest.Binary(t), "--server", srv.url, "publish", "typed")
	cmd.Env = cliEnv()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	results := bufio.NewScanner(outPipe)
	for i := range 4000 {
		fmt.Fprintf(in, "line %d\n", i)
		if !results.Scan() {
			t.Fatalf("no result for line %d: %v", i, results.Err())
		}
		if !strings.HasPrefix(results.Text(), "partition=") {
			t.Fatalf("line %d: result %q", i, results.Text())
		}
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	within10(t, "4,000 lines one at a time", describeCounts(t, srv, "typed"))

	// 300,000 lines in one pipe: requests of up to 1,000 lines.
	var sb strings.Builder
	for i := 1; i <= 300_000; i++ {
		fmt.Fprintf(&sb, "%d\n", i)
	}
	if r := srv.cli(t, []byte(sb.String()), "publish", "piped"); r.code != 0 {
		t.Fatalf("publish 300,000 lines: exit %d, stderr %q", r.code, r.stderr)
	}
	within10(t, "300,000 piped lines", describeCounts(t, srv, "piped"))
}

// homeMoves returns an idempotency key whose home partition (FNV-1a
// modulo the count, broker.PartitionForKey) differs under from and to.
func homeMoves(from, to uint32) string {
	home := func(k string, n uint32) uint32 {
		h := fnv.New32a()
		h.Write([]byte(k))
		return h.Sum32() % n
	}
	for i := 0; ; i++ {
		if k := fmt.Sprintf("order-%d", i); home(k, from) != home(k, to) {
			return k
		}
	}
}

func TestTopicAlterPartitionsCLI(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	srv.ok(t, nil, "topic", "create", "orders", "--partitions", "1", "--key-index=false")
	line := fmt.Sprintf(`{"value":"paid","idempotency_key":%q}`+"\n", homeMoves(1, 3))
	first := parseResults(t, srv.ok(t, []byte(line), "publish", "orders", "--input", "json"), 1)[0]

	if out := srv.ok(t, nil, "topic", "alter", "orders", "--partitions", "3"); out != "altered topic orders: 3 partitions (was 1)\n" {
		t.Errorf("topic alter --partitions 3 printed %q", out)
	}
	if got := describeCounts(t, srv, "orders"); len(got) != 3 {
		t.Fatalf("after growing to 3: partitions %v", got)
	}
	// The retry of a record published before the growth is a duplicate,
	// although its key's home is another partition now.
	again := parseResults(t, srv.ok(t, []byte(line), "publish", "orders", "--input", "json"), 1)[0]
	if !again.duplicate || again.partition != first.partition || again.offset != first.offset {
		t.Errorf("retry after the growth: partition %d offset %d duplicate %v; want a duplicate of partition %d offset %d",
			again.partition, again.offset, again.duplicate, first.partition, first.offset)
	}
	if out := srv.ok(t, nil, "topic", "alter", "orders", "--partitions", "3"); out != "topic orders has 3 partitions already\n" {
		t.Errorf("growing to the same count printed %q", out)
	}
	// Retention alone leaves the partitions, and partitions alone the
	// retention.
	srv.ok(t, nil, "topic", "alter", "orders", "--retention-records", "1000")
	srv.ok(t, nil, "topic", "alter", "orders", "--partitions", "4")
	var d struct {
		Partitions int `json:"partitions"`
		Retention  struct {
			MaxRecords int `json:"max_records"`
		} `json:"retention"`
	}
	if err := json.Unmarshal([]byte(srv.ok(t, nil, "topic", "describe", "orders", "--format", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Partitions != 4 || d.Retention.MaxRecords != 1000 {
		t.Errorf("after altering retention, then partitions: %d partitions, max records %d; want 4 and 1000", d.Partitions, d.Retention.MaxRecords)
	}

	srv.ok(t, nil, "topic", "create", "events", "--partitions", "1")
	srv.fails(t, "invalid_argument", "topic", "alter", "orders", "--partitions", "2")
	srv.fails(t, "never removed", "topic", "alter", "orders", "--partitions", "2")
	srv.fails(t, "failed_precondition", "topic", "alter", "events", "--partitions", "2")
	srv.fails(t, "keeps the key index", "topic", "alter", "events", "--partitions", "2")
	srv.fails(t, "use 1 to 1024", "topic", "alter", "orders", "--partitions", "2000")
	srv.fails(t, "not a partition count: use a whole number from 1 to 1024", "topic", "alter", "orders", "--partitions", "4294967296")
	srv.fails(t, "not a partition count: use a whole number from 1 to 1024", "topic", "create", "big", "--partitions", "4294967296")
	if out := srv.ok(t, nil, "topic", "create", "one"); !strings.HasSuffix(out, "with 1 partition\n") {
		t.Errorf("topic create with one partition printed %q", out)
	}
}
