//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/internal/enginetest"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// partlyFailing is a node whose partition 1 fails publishes with
// Unavailable, certainly not stored (its leader is unreachable), and
// partition 2 with DeadlineExceeded, outcome unknown, while partition 0
// stores: the partial answer a cluster gives when one partition's leader
// is stopped or stuck, without a cluster's timing. It records the values
// of each request.
type partlyFailing struct {
	rewindv1connect.UnimplementedPublishServiceHandler
	mu struct {
		sync.Mutex
		requests [][]string
		next     uint64 // partition 0's next offset
	}
}

func (p *partlyFailing) Publish(_ context.Context, req *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
	if !req.GetPartial() {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the test node answers partial publishes only"))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var values []string
	out := &rewindv1.PublishResponse{}
	for _, r := range req.GetRecords() {
		values = append(values, string(r.GetValue()))
		res := &rewindv1.PublishResult{Partition: r.GetPartition()}
		switch r.GetPartition() {
		case 1:
			res.Error = &rewindv1.PublishError{Code: uint32(connect.CodeUnavailable), Message: "node 3, the leader of partition 1, is unreachable", NotStored: true}
		case 2:
			res.Error = &rewindv1.PublishError{Code: uint32(connect.CodeDeadlineExceeded), Message: "no quorum for partition 2 in time"}
		default:
			res.Offset = p.mu.next
			res.MessageId = fmt.Sprintf("m-0-%d", p.mu.next)
			p.mu.next++
		}
		out.Results = append(out.Results, res)
	}
	p.mu.requests = append(p.mu.requests, values)
	return out, nil
}

// TestPublishPartlyFailed: lines whose partition failed get a line each on
// stderr (line number, partition, error, whether it was certainly not
// stored), the stored ones their usual result on stdout, the lines not
// sent after the failure are named, and the exit code is 1. How lines
// after the first are batched depends on timing, so the expected output is
// computed from the requests the node received.
func TestPublishPartlyFailed(t *testing.T) {
	for _, parts := range [][]int{
		{0, 1, 0, 2, 0, 0}, // line 1 alone, then (usually) all the rest
		{1, 0, 0},          // line 1 alone fails: nothing more is sent
		{0, 0, 1, 0},       // (usually) a line stored after one not stored
	} {
		t.Run(fmt.Sprint(parts), func(t *testing.T) { publishPartlyFailed(t, parts) })
	}
}

// publishPartlyFailed publishes a line to each of parts (partitions) of a
// partlyFailing node and checks the output.
func publishPartlyFailed(t *testing.T, parts []int) {
	node := &partlyFailing{}
	mux := http.NewServeMux()
	mux.Handle(rewindv1connect.NewPublishServiceHandler(node))
	url := enginetest.ServeHandler(t, mux)

	var in strings.Builder
	for i, p := range parts {
		fmt.Fprintf(&in, `{"value":"%d","partition":%d}`+"\n", i+1, p)
	}
	r := runCLI(t, []byte(in.String()), nil, "--server", url, "publish", "t", "--input", "json")

	node.mu.Lock()
	requests := node.mu.requests
	node.mu.Unlock()
	if len(requests) == 0 || !cmp.Equal(requests[0], []string{"1"}) {
		t.Fatalf("requests %v: want line 1 alone first", requests)
	}
	var stdout, stderr []string
	var stored, notStored, unknown []int
	line, offset := 0, 0
	for _, req := range requests {
		for range req {
			line++
			switch parts[line-1] {
			case 0:
				stdout = append(stdout, fmt.Sprintf("partition=0 offset=%d message_id=m-0-%d", offset, offset))
				stored = append(stored, line)
				offset++
			case 1:
				stderr = append(stderr, fmt.Sprintf("line %d: not acknowledged (partition 1: unavailable: node 3, the leader of partition 1, is unreachable); it was certainly not stored (safe to send again)", line))
				notStored = append(notStored, line)
			case 2:
				stderr = append(stderr, fmt.Sprintf("line %d: not acknowledged (partition 2: deadline_exceeded: no quorum for partition 2 in time); it may have been stored (sending it again without an idempotency key may store it twice)", line))
				unknown = append(unknown, line)
			}
		}
	}
	// The summary: what became of each line. Whether the CLI saw the end
	// of its input before it stopped depends on timing; both are right.
	var notSent []string
	if line < len(parts) {
		notSent = []string{fmt.Sprintf("lines from %d on (the input was not read further)", line+1), testRanges(seq(line+1, len(parts)))}
	}
	if len(stored) == 0 && len(unknown) == 0 {
		stderr = append(stderr, "nothing was stored (lines from 1 on; the input was not read further)|nothing was stored ("+testRanges(seq(1, len(parts)))+")")
	} else {
		for _, o := range []struct {
			what  string
			lines []int
		}{{"stored", stored}, {"not stored (safe to send again)", notStored}, {"outcome unknown (may have been stored)", unknown}} {
			if len(o.lines) > 0 {
				stderr = append(stderr, o.what+": "+testRanges(o.lines))
			}
		}
		if notSent != nil {
			stderr = append(stderr, "not sent: "+strings.Join(notSent, "|not sent: "))
		}
		switch resend := slices.Min(append(append([]int{line + 1}, notStored...), unknown...)); {
		case len(unknown) > 0:
			stderr = append(stderr, "a line whose outcome is unknown may be stored twice if sent again: check with `rewind replay` which were stored, or publish with --idempotency-keys line --run-id ID, which makes sending again safe (rewind publish --help)")
		case slices.Max(stored) > resend:
			stderr = append(stderr, fmt.Sprintf("sending again from line %d would store twice the lines after it that were stored: send the lines not stored alone, or publish with --idempotency-keys line --run-id ID, which makes sending again safe (rewind publish --help)", resend))
		default:
			stderr = append(stderr, fmt.Sprintf("to send the rest, run the same command on the same input with --from-line %d", resend))
		}
	}
	gotErr := splitLines(t, r.stderr)
	if len(gotErr) == 0 || !strings.HasPrefix(gotErr[len(gotErr)-1], "rewind: publish partly failed: ") {
		t.Errorf("stderr does not end with the error: %q", r.stderr)
	} else {
		gotErr = gotErr[:len(gotErr)-1]
	}
	if r.code != 1 {
		t.Errorf("exit code %d, want 1", r.code)
	}
	if diff := cmp.Diff(stdout, splitLines(t, r.stdout)); diff != "" {
		t.Errorf("stdout (-want +got), requests %v:\n%s", requests, diff)
	}
	// A want line "a|b" matches either.
	for i := range min(len(stderr), len(gotErr)) {
		if slices.Contains(strings.Split(stderr[i], "|"), gotErr[i]) {
			stderr[i] = gotErr[i]
		}
	}
	if diff := cmp.Diff(stderr, gotErr); diff != "" {
		t.Errorf("stderr (-want +got), requests %v:\n%s", requests, diff)
	}
	t.Logf("requests: %v", requests)
}

// testRanges writes ascending line numbers as the publish summary does:
// "line 4", "lines 1, 3, 5-6".
func testRanges(lines []int) string {
	var list []string
	for i := 0; i < len(lines); {
		j := i
		for j+1 < len(lines) && lines[j+1] == lines[j]+1 {
			j++
		}
		if i == j {
			list = append(list, strconv.Itoa(lines[i]))
		} else {
			list = append(list, fmt.Sprintf("%d-%d", lines[i], lines[j]))
		}
		i = j + 1
	}
	if len(lines) == 1 {
		return "line " + list[0]
	}
	return "lines " + strings.Join(list, ", ")
}

// seq is the lines from to to.
func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
