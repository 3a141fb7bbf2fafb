package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/identity"
)

// foreign is another process's HTTP server on a port a node wanted: it
// answers every request with 200 and the given headers.
type foreign struct {
	srv   *http.Server
	addr  string
	livez atomic.Int64 // /livez requests answered
	asked chan struct{}
}

// serveForeign serves a foreign server on ln.
func serveForeign(t *testing.T, ln net.Listener, header http.Header) *foreign {
	t.Helper()
	f := &foreign{addr: ln.Addr().String(), asked: make(chan struct{}, 100)}
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		if r.URL.Path == "/livez" {
			f.livez.Add(1)
			select {
			case f.asked <- struct{}{}:
			default:
			}
		}
		fmt.Fprintln(w, "ok")
	})}
	go f.srv.Serve(ln)
	t.Cleanup(func() { f.srv.Close() })
	return f
}

// lockedLog collects a cluster's log lines.
type lockedLog struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func (l *lockedLog) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.t.Log(line)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

func (l *lockedLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// TestWaitLiveWantsTheNodeItself: a /livez answer counts only when it
// names the node and the cluster waited for. An answer from anything else
// on the node's address (a server that names no node, another node, the
// same node id of another cluster) keeps waitLive polling; it returns only
// when its context ends. No process runs here: the node never exits.
func TestWaitLiveWantsTheNodeItself(t *testing.T) {
	const ours, theirs = 0x1111_2222_3333_4444, 0x5555_6666_7777_8888
	named := func(node, cluster uint64) http.Header {
		h := http.Header{}
		identity.SetHeaders(h, node, cluster)
		return h
	}
	for _, tc := range []struct {
		what   string
		header http.Header
		live   bool
	}{
		{"a server naming no node", http.Header{}, false},
		{"node 2 of another cluster", named(2, theirs), false},
		{"node 3 of this cluster", named(3, ours), false},
		{"node 2 of this cluster", named(2, ours), true},
	} {
		t.Run(tc.what, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			f := serveForeign(t, ln, tc.header)
			log := &lockedLog{t: t}
			c := &cluster{id: ours, logf: log.logf}
			n := &node{id: 2, addr: f.addr, log: filepath.Join(t.TempDir(), "node-2.log"), done: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := make(chan error, 1)
			go func() { res <- c.waitLive(ctx, n, 0) }()
			if tc.live {
				if err := <-res; err != nil {
					t.Fatalf("waitLive: %v, want live", err)
				}
				return
			}
			// Let it be asked three times, then stop waiting.
			for range 3 {
				select {
				case <-f.asked:
				case err := <-res:
					t.Fatalf("waitLive took an answer from %s: %v, want it still waiting", tc.what, err)
				}
			}
			cancel()
			if err := <-res; !errors.Is(err, context.Canceled) {
				t.Fatalf("waitLive after %d answers from %s: %v, want it still waiting", f.livez.Load(), tc.what, err)
			}
			if !log.has("not ours") {
				t.Errorf("the foreign answer was not logged")
			}
		})
	}
}

// TestWaitLiveTellsATakenPort: a node that exits while starting is
// reported as such; the error is errPortTaken when this start's output
// says its address was in use, and only then (an earlier start's output
// does not count).
func TestWaitLiveTellsATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers: only the exit ends the wait
	earlier := "rewind: --listen: listen tcp " + addr + ": bind: address already in use\n--- runner: starting node 1\n"
	for _, tc := range []struct {
		what, log string
		taken     bool
	}{
		{"bind failed", "--- runner: starting node 1\nrewind: --listen: listen tcp " + addr + ": bind: address already in use\n", true},
		{"another failure", "--- runner: starting node 1\nrewind: open store: permission denied\n", false},
		{"bind failed in an earlier start", earlier + "rewind: open store: permission denied\n", false},
	} {
		path := filepath.Join(t.TempDir(), "node-1.log")
		if err := os.WriteFile(path, []byte(tc.log), 0o644); err != nil {
			t.Fatal(err)
		}
		from := int64(0)
		if strings.HasPrefix(tc.log, earlier) {
			from = int64(len(earlier))
		}
		done := make(chan struct{})
		close(done)
		c := &cluster{logf: t.Logf}
		err := c.waitLive(context.Background(), &node{id: 1, addr: addr, log: path, done: done}, from)
		if err == nil || !strings.Contains(err.Error(), "exited while starting") || errors.Is(err, errPortTaken) != tc.taken {
			t.Errorf("%s: %v, want an exit (port taken: %v)", tc.what, err, tc.taken)
		}
	}
}

// TestStartMovesOffATakenPort starts a real 3-node cluster whose node 2
// port another process (a server answering /livez with 200 as node 2 of
// another cluster) took between newCluster and the start. The first
// start must fail on node 2 (the foreign answers are not node 2's, and
// our node 2 exits on its bind error), and the second, on new ports, must
// bring up the cluster, every node answering as itself.
func TestStartMovesOffATakenPort(t *testing.T) {
	bin := enginetest.Binary(t) // the runner starts its own processes: it is what is tested
	var taken *foreign
	attempts := 0
	beforeStart = func(attempt int, c *cluster) {
		attempts = attempt
		if attempt > 1 {
			return
		}
		// newCluster let go of the port when it returned: take it.
		ln, err := net.Listen("tcp", c.nodes[1].addr)
		if err != nil {
			t.Fatalf("take node 2's port %s: %v", c.nodes[1].addr, err)
		}
		h := http.Header{}
		identity.SetHeaders(h, 2, c.id^1)
		taken = serveForeign(t, ln, h)
	}
	defer func() { beforeStart = nil }()
	log := &lockedLog{t: t}
	dir := t.TempDir()
	c, err := startCluster(context.Background(), bin, dir, 3, nil, log.logf)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer c.close()
	if attempts != 2 || !log.has("start 1 of 3 failed") || !log.has(errPortTaken.Error()) {
		t.Fatalf("%d attempts; the log does not say the first start failed on a taken port", attempts)
	}
	t.Logf("the foreign server answered /livez %d time(s)", taken.livez.Load())
	members := map[uint64]string{}
	for _, nd := range c.nodes {
		members[nd.id] = nd.addr
	}
	if members[2] == taken.addr {
		t.Fatalf("node 2 is still on the taken port %s", taken.addr)
	}
	if c.id != identity.ClusterIDOf(members) {
		t.Fatalf("cluster id %x, not the new members' %x", c.id, identity.ClusterIDOf(members))
	}
	for _, nd := range c.nodes {
		if !c.up(nd.id) {
			t.Errorf("node %d is not up", nd.id)
		}
		resp, err := http.Get("http://" + nd.addr + "/livez")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if id, cl, ok := identity.FromHeaders(resp.Header); !ok || id != nd.id || cl != c.id {
			t.Errorf("%s answers as node %d of %x, want node %d of %x", nd.addr, id, cl, nd.id, c.id)
		}
	}
}

// TestStartGivesUpOnTakenPorts: when every attempt finds the node's port
// taken, the start gives up after startAttempts, saying why.
func TestStartGivesUpOnTakenPorts(t *testing.T) {
	bin := enginetest.Binary(t) // the runner starts its own processes: it is what is tested
	attempts := 0
	beforeStart = func(attempt int, c *cluster) {
		attempts = attempt
		ln, err := net.Listen("tcp", c.nodes[0].addr)
		if err != nil {
			t.Fatalf("take node 1's port %s: %v", c.nodes[0].addr, err)
		}
		serveForeign(t, ln, http.Header{})
	}
	defer func() { beforeStart = nil }()
	log := &lockedLog{t: t}
	_, err := startCluster(context.Background(), bin, t.TempDir(), 1, nil, log.logf)
	if !errors.Is(err, errPortTaken) || attempts != startAttempts {
		t.Fatalf("after %d attempts: %v, want errPortTaken after %d", attempts, err, startAttempts)
	}
}
