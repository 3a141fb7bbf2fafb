package kafka_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// kcat runs kcat (librdkafka) with args and stdin, failing the test on a
// non-zero exit; it returns the output lines.
func kcat(t *testing.T, stdin string, args ...string) []string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: install it (apt-get install kcat; .ci/run does) — these tests run it as a real Kafka client and do not skip")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	s := strings.TrimRight(string(out), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestKcat runs kcat against `rewind serve --kafka-listen` (the real
// binary): -L lists the node and the topic; -P -z lz4 produces keyed
// records with a header; -C reads them back from the beginning, the last
// 10 (-o -10) and from a timestamp (-o s@ms), each ending at the end of
// the partition (-e).
func TestKcat(t *testing.T) {
	addrs := enginetest.FreeAddrs(t, 2)
	kafkaAddr := addrs[1]
	enginetest.StartProcess(t, enginetest.ProcessConfig{Addr: addrs[0], Args: []string{"--kafka-listen", kafkaAddr}})
	n := &kafkaNode{Kafka: kafkaAddr}
	createTopic(t, n.client(t), "kc", 1)

	meta := strings.Join(kcat(t, "", "-b", kafkaAddr, "-L", "-t", "kc"), "\n")
	for _, want := range []string{"1 brokers:", "broker 1 at " + kafkaAddr, `topic "kc" with 1 partitions:`, "partition 0, leader 1, replicas: 1, isrs: 1"} {
		if !strings.Contains(meta, want) {
			t.Fatalf("kcat -L lacks %q:\n%s", want, meta)
		}
	}

	var first strings.Builder
	for i := range 20 {
		fmt.Fprintf(&first, "k%d:value %d\n", i, i)
	}
	kcat(t, first.String(), "-b", kafkaAddr, "-t", "kc", "-P", "-z", "lz4", "-K", ":", "-H", "origin=kcat")
	format := "%k|%s|%o|%T|%h\n"
	all := kcat(t, "", "-b", kafkaAddr, "-t", "kc", "-C", "-o", "beginning", "-e", "-f", format)
	if len(all) != 20 {
		t.Fatalf("-o beginning: %d records, want 20:\n%s", len(all), strings.Join(all, "\n"))
	}
	for i, line := range all {
		f := strings.Split(line, "|")
		if want := fmt.Sprintf("k%d|value %d|%d", i, i, i); strings.Join(f[:3], "|") != want || f[4] != "origin=kcat" {
			t.Fatalf("record %d: %q, want %q with header origin=kcat", i, line, want)
		}
	}
	last10 := kcat(t, "", "-b", kafkaAddr, "-t", "kc", "-C", "-o", "-10", "-e", "-f", "%o\n")
	if len(last10) != 10 || last10[0] != "10" || last10[9] != "19" {
		t.Fatalf("-o -10: offsets %v, want 10 to 19", last10)
	}

	// A second produce in a later millisecond, then a seek to its time.
	lastTS, _ := strconv.ParseInt(strings.Split(all[19], "|")[3], 10, 64)
	for time.Now().UnixMilli() <= lastTS {
		time.Sleep(time.Millisecond)
	}
	kcat(t, "k20:later\nk21:later\n", "-b", kafkaAddr, "-t", "kc", "-P", "-z", "lz4", "-K", ":")
	later := kcat(t, "", "-b", kafkaAddr, "-t", "kc", "-C", "-o", "beginning", "-e", "-f", format)
	ts := strings.Split(later[20], "|")[3]
	fromTS := kcat(t, "", "-b", kafkaAddr, "-t", "kc", "-C", "-o", "s@"+ts, "-e", "-f", format)
	if len(fromTS) != 2 || !strings.HasPrefix(fromTS[0], "k20|later|20|") {
		t.Fatalf("-o s@%s: %v, want the records at 20 and 21", ts, fromTS)
	}
}
