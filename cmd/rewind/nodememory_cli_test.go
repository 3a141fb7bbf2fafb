package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestCLIRemembersASilentNode: a run of the command given two addresses,
// whose first accepts connections and never answers (a paused node),
// goes on through the second once its attempt times out, and writes the
// silent node to its memory; the next run starts at the second node and
// never connects to the silent one.
func TestCLIRemembersASilentNode(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	if r := runCLI(t, nil, nil, "topic", "create", "mem", "--server", srv.url); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	// The silent node: connections accepted, held, never answered.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var held sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	held.Add(1)
	go func() {
		defer held.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		held.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	memory := filepath.Join(t.TempDir(), "nodes.json")
	env := cliEnv("REWIND_NODE_MEMORY=" + memory)
	servers := "http://" + ln.Addr().String() + "," + srv.url
	// A keyless publish is never hedged: it waits out its attempt on the
	// silent node, then goes to the next.
	if r := runCLI(t, nil, env, "publish", "mem", "first", "--server", servers); r.code != 0 {
		t.Fatalf("first run: exit %d, stderr %s", r.code, r.stderr)
	}
	if accepted.Load() == 0 {
		t.Fatal("the first run never tried the silent node: the test shows nothing")
	}
	b, err := os.ReadFile(memory)
	if err != nil {
		t.Fatalf("no memory written: %v", err)
	}
	var remembered map[string]time.Time
	if err := json.Unmarshal(b, &remembered); err != nil || len(remembered) != 1 {
		t.Fatalf("memory %s (%v), want the silent node alone", b, err)
	}
	for a := range remembered {
		if !strings.Contains(a, ln.Addr().String()) {
			t.Fatalf("memory names %s, want the silent node %s", a, ln.Addr())
		}
	}
	before := accepted.Load()
	if r := runCLI(t, nil, env, "publish", "mem", "second", "--server", servers); r.code != 0 {
		t.Fatalf("second run: exit %d, stderr %s", r.code, r.stderr)
	}
	if n := accepted.Load(); n != before {
		t.Fatalf("the second run connected to the silent node (%d connections, were %d): the memory was not used", n, before)
	}
	r := runCLI(t, nil, nil, "replay", "mem", "--from", "earliest", "--to", "end", "--server", srv.url)
	if r.code != 0 || !strings.Contains(r.stdout, "first") || !strings.Contains(r.stdout, "second") {
		t.Fatalf("replay: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}
