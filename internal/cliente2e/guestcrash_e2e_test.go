package cliente2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
	"github.com/rewind-io/rewind/sdk/guest/build"
)

// TestGuestOutOfMemoryReachesTheClient replays a topic through a Go
// filter that asks for a 4 GiB block on one record (the sandbox's
// testdata/goguest/crash). The Go runtime prints why on stderr and traps
// with a bare "unreachable"; the client gets the reason, on one line with
// no stack, with the offset of the record the guest was on, and the
// FilterError detail says the same.
func TestGuestOutOfMemoryReachesTheClient(t *testing.T) {
	wasm, err := build.Go(context.Background(), filepath.Join("..", "..", "sandbox", "testdata", "goguest", "crash"))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "oom", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	msgs := make([]client.Message, 300)
	for i := range msgs {
		msgs[i] = client.Message{Key: []byte(fmt.Sprint("k", i)), Value: []byte("v")}
	}
	msgs[157].Key = []byte("oom")
	if _, err := c.Publish(ctx, "oom", msgs...); err != nil {
		t.Fatal(err)
	}
	err = subscribeErr(c, "oom", client.InlineFilter(wasm, nil))
	const why = "runtime: out of memory: cannot allocate 4294967296-byte block"
	msg := fmt.Sprint(err)
	if code(err) != connect.CodeAborted || !strings.Contains(msg, why) || !strings.Contains(msg, "partition 0, record at offset 157: trap:") || strings.Contains(msg, "\n") {
		t.Fatalf("replay ended with %q (%v);\nwant Aborted, one line, saying %q at partition 0, offset 157", msg, code(err), why)
	}
	t.Logf("the client got: %s", msg)
	fe := client.FilterFailureOf(err)
	if fe == nil || !strings.HasPrefix(fe.GetReason(), "record at offset 157: trap: rewind_filter: "+why) || strings.Contains(fe.GetReason(), "\n") || fe.GetOffset() > 157 || fe.GetResumeToken() == "" {
		t.Errorf("FilterError %+v; want the reason at offset 157 on one line, a resume offset at most 157 and a token", fe)
	}
}
