//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestKeylessLinesSpreadOverPartitions: a line read while no request is out
// goes at once, alone, and each request's keyless records go to the
// partition given the fewest keyless bytes (ties in turn). So 100 piped
// lines use more than one partition (the first goes alone, the second in
// the next request), and lines typed one at a time into an empty topic
// take the partitions in turn.
func TestKeylessLinesSpreadOverPartitions(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "s", "--partitions", "3")

	var in strings.Builder
	for i := range 100 {
		fmt.Fprintf(&in, "line-%d\n", i)
	}
	res := parseResults(t, s.ok(t, []byte(in.String()), "publish", "s"), 100)
	if res[0].partition == res[1].partition {
		t.Errorf("piped lines 1 and 2 both went to partition %d; the first goes alone, the second in the next request", res[0].partition)
	}
	used := map[uint32]int{}
	for _, r := range res {
		used[r.partition]++
	}
	if len(used) < 2 {
		t.Errorf("100 piped lines went to partitions %v; want more than one", used)
	}

	// Typed: each line is answered before the next is written. (A CLI
	// that waits for the end of its input is killed after cmdTimeout.)
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	s.ok(t, nil, "topic", "create", "typed", "--partitions", "3")
	cmd := exec.CommandContext(ctx, enginetest.Binary(t), "--server", s.url, "publish", "typed")
	cmd.Env = cliEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var parts []uint32
	for i := range 6 {
		if _, err := io.WriteString(stdin, fmt.Sprintf("typed-%d\n", i)); err != nil {
			t.Fatal(err)
		}
		if !sc.Scan() {
			t.Fatalf("no result for typed line %d: %v", i, sc.Err())
		}
		parts = append(parts, parseResults(t, sc.Text()+"\n", 1)[0].partition)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("publish of typed lines: %v", err)
	}
	for i := 1; i < len(parts); i++ {
		if parts[i] != (parts[i-1]+1)%3 {
			t.Fatalf("typed lines went to partitions %v; want each in the next partition", parts)
		}
	}
}

// TestPublishSaysDuplicate: a record whose idempotency key was used before
// with the same contents is answered with where the first one is, and the
// text output says so.
func TestPublishSaysDuplicate(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "d", "--partitions", "1")
	first := parseResults(t, s.ok(t, nil, "publish", "d", "v", "--idempotency-key", "ik-1"), 1)[0]
	again := parseResults(t, s.ok(t, nil, "publish", "d", "v", "--idempotency-key", "ik-1"), 1)[0]
	if first.duplicate || !again.duplicate {
		t.Fatalf("duplicate marks: first %v, again %v; want false, true", first.duplicate, again.duplicate)
	}
	if again.offset != first.offset || again.id != first.id {
		t.Fatalf("the duplicate names offset %d (%s), want the first's %d (%s)", again.offset, again.id, first.offset, first.id)
	}
}

// TestPublishCtrlCWhileWaitingForInput: Ctrl-C ends a publish that waits
// for typed input, after the lines already typed are answered.
func TestPublishCtrlCWhileWaitingForInput(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "c", "--partitions", "1")
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, enginetest.Binary(t), "--server", s.url, "publish", "c")
	cmd.Env = cliEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if _, err := io.WriteString(stdin, "typed\n"); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("no result for the typed line: %v", sc.Err())
	}
	parseResults(t, sc.Text()+"\n", 1)
	// The input stays open: only the signal can end the command.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("publish did not exit after SIGINT while waiting for input; stderr:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("publish interrupted: %v; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted after reading 1 line: each was sent") {
		t.Errorf("stderr %q does not say what was sent", stderr.String())
	}
}

// TestPublishJSONKeepsHeaderOrder: the same JSON line with an idempotency
// key and several headers, published again and again, is a duplicate
// every time. (The headers went out in Go map order, and the payload hash
// covers them in order: about 1 republish in 5 was refused as another
// record.)
func TestPublishJSONKeepsHeaderOrder(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "h", "--partitions", "1")
	line := []byte(`{"key":"k","value":"v","headers":{"h1":"1","h2":"2","h3":"3","h4":"4","h5":"5","h6":"6"},"idempotency_key":"ik-h"}` + "\n")
	first := parseResults(t, s.ok(t, line, "publish", "h", "--input", "json"), 1)[0]
	for i := range 20 {
		again := parseResults(t, s.ok(t, line, "publish", "h", "--input", "json"), 1)[0]
		if !again.duplicate || again.offset != first.offset {
			t.Fatalf("republish %d: duplicate %v at offset %d, want a duplicate of offset %d", i+1, again.duplicate, again.offset, first.offset)
		}
	}
}

// TestOrderedHeaders: the headers of a JSON input line keep their order,
// and anything but an object of strings is refused.
func TestOrderedHeaders(t *testing.T) {
	var in jsonInput
	if err := json.Unmarshal([]byte(`{"headers":{"z":"1","a":"2","m":"3","a":"4"}}`), &in); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range in.Headers {
		got = append(got, h.Key+"="+string(h.Value))
	}
	if want := []string{"z=1", "a=2", "m=3", "a=4"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("headers %v, want %v in the line's order", got, want)
	}
	for _, bad := range []string{`{"headers":["a"]}`, `{"headers":{"a":1}}`, `{"headers":"a"}`} {
		if err := json.Unmarshal([]byte(bad), &in); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	if err := json.Unmarshal([]byte(`{"headers":null}`), &in); err != nil || in.Headers != nil {
		t.Errorf("null headers: %v %v", in.Headers, err)
	}
}
