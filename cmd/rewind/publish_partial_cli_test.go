//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	line, offset := 0, 0
	for _, req := range requests {
		for range req {
			line++
			switch parts[line-1] {
			case 0:
				stdout = append(stdout, fmt.Sprintf("partition=0 offset=%d message_id=m-0-%d", offset, offset))
				offset++
			case 1:
				stderr = append(stderr, fmt.Sprintf("line %d: not acknowledged (partition 1: unavailable: node 3, the leader of partition 1, is unreachable); it was certainly not stored (safe to send again)", line))
			case 2:
				stderr = append(stderr, fmt.Sprintf("line %d: not acknowledged (partition 2: deadline_exceeded: no quorum for partition 2 in time); it may have been stored (sending it again without an idempotency key may store it twice)", line))
			}
		}
	}
	if line < len(parts) {
		stderr = append(stderr, fmt.Sprintf("lines from %d on were not sent: publishing stops at the first failure", line+1))
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
	if diff := cmp.Diff(stderr, gotErr); diff != "" {
		t.Errorf("stderr (-want +got), requests %v:\n%s", requests, diff)
	}
	t.Logf("requests: %v", requests)
}
