package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rewind-io/rewind/internal/identity"
	"github.com/rewind-io/rewind/scenarios/faultnet"
)

// cluster is the scenario's `rewind serve` processes on loopback, with a
// faultnet proxy on every directed link between two of them.
type cluster struct {
	binary string
	dir    string
	env    []string
	mu     sync.Mutex // guards nodes and proxies while members join
	// nodes are every member the run started, by id - 1 (removed ones
	// included).
	nodes   []*node
	proxies map[[2]uint64]*faultnet.Proxy
	initial string
	// id is the cluster id every member's probes must name (identity.
	// ClusterIDOf of the initial members; 0 for a node run alone).
	id   uint64
	logf func(format string, args ...any)
}

// node is one member.
type node struct {
	id   uint64
	addr string // host:port, clients' and peers' address
	dir  string // data directory
	log  string // its log file
	join string // set for a member added during the run: whom it joins through

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process exited
	paused  bool
	running bool
	removed bool // removed from the cluster (replaced): not a member any more
	// corrupt: a failpoint corrupted its store (bitflip): it cannot be
	// started again, only replaced.
	corrupt bool
	// stopping: the runner asked it to stop (SIGTERM); it may still run
	// while it shuts down, but no longer answers as a member.
	stopping bool
	// live: it answered /livez since its last start.
	live bool
	// epoch counts the runner's starts and stops of the node, so that a
	// request it answered no more can tell a stop from a crash.
	epoch int
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// newCluster prepares n members under dir (not started).
func newCluster(binary, dir string, n int, env []string, logf func(string, ...any)) (*cluster, error) {
	c := &cluster{binary: binary, dir: dir, env: env, proxies: map[[2]uint64]*faultnet.Proxy{}, logf: logf}
	var parts []string
	members := map[uint64]string{}
	// The nodes' ports stay taken until the proxies have theirs, or a
	// proxy could get a port a node is about to listen on.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		addr := l.Addr().String()
		id := uint64(i + 1)
		nd := &node{id: id, addr: addr, dir: filepath.Join(dir, fmt.Sprintf("node-%d", id)), log: filepath.Join(dir, fmt.Sprintf("node-%d.log", id))}
		c.nodes = append(c.nodes, nd)
		parts = append(parts, fmt.Sprintf("%d=%s", id, addr))
		members[id] = addr
	}
	if n > 1 {
		c.initial = strings.Join(parts, ",")
		c.id = identity.ClusterIDOf(members)
	}
	if n > 1 {
		for _, a := range c.nodes {
			for _, b := range c.nodes {
				if a == b {
					continue
				}
				p, err := faultnet.Listen(b.addr)
				if err != nil {
					c.close()
					return nil, err
				}
				c.proxies[[2]uint64{a.id, b.id}] = p
			}
		}
	}
	return c, nil
}

// startAttempts bounds the fresh sets of ports startCluster tries.
const startAttempts = 3

// beforeStart, if set, is called with each cluster startCluster prepares,
// before its nodes start (attempt counts from 1). It is a test's seam: a
// test occupies a node's port there, as another process might, instead of
// racing for it. Nil outside tests.
var beforeStart func(attempt int, c *cluster)

// startCluster prepares and starts a new cluster of n members under dir
// and waits until each answers as itself. newCluster's ports are free when
// it picks them, but cannot stay held while the nodes start (each binds its
// own): another process may bind one in between. The node that cannot bind
// exits; the whole cluster is then stopped, its data directories removed
// (its stores carry the old addresses' cluster id) and the cluster started
// again on new ports, up to startAttempts times. Any other failure is
// returned at once. The nodes' logs are kept: each start is marked in them.
func startCluster(ctx context.Context, binary, dir string, n int, env []string, logf func(string, ...any)) (*cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := newCluster(binary, dir, n, env, logf)
		if err != nil {
			return nil, err
		}
		if beforeStart != nil {
			beforeStart(attempt, c)
		}
		err = c.startAll(ctx)
		if err == nil {
			return c, nil
		}
		c.close()
		if !errors.Is(err, errPortTaken) || attempt == startAttempts || ctx.Err() != nil {
			return nil, err
		}
		logf("start %d of %d failed: %v; starting a new cluster on other ports", attempt, startAttempts, err)
		for _, nd := range c.nodes {
			if err := os.RemoveAll(nd.dir); err != nil {
				return nil, err
			}
		}
	}
}

// startAll starts every member at once and waits until each is live.
func (c *cluster) startAll(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, nd := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.start(ctx, nd.id) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// addrs is every member's address, for a client: "http://a,http://b".
func (c *cluster) addrs() string {
	var out []string
	for _, n := range c.members() {
		out = append(out, "http://"+n.addr)
	}
	return strings.Join(out, ",")
}

// members are the nodes that are members now (not removed).
func (c *cluster) members() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node
	for _, n := range c.nodes {
		n.mu.Lock()
		if !n.removed {
			out = append(out, n)
		}
		n.mu.Unlock()
	}
	return out
}

func (c *cluster) node(id uint64) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id-1]
}

func (c *cluster) proxy(from, to uint64) *faultnet.Proxy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxies[[2]uint64{from, to}]
}

// start starts member id and waits until it answers /livez.
func (c *cluster) start(ctx context.Context, id uint64) error {
	n := c.node(id)
	args := []string{"serve", "--listen", n.addr, "--data", n.dir, "--log-level", "info"}
	if n.join != "" {
		// A member added during the run joins through the others; it
		// dials them directly (--peer-via needs --initial-cluster).
		args = append(args, "--node-id", fmt.Sprint(id), "--join", n.join)
	} else if c.initial != "" {
		args = append(args, "--node-id", fmt.Sprint(id), "--initial-cluster", c.initial)
		var via []string
		for _, o := range c.members() {
			if o != n {
				via = append(via, fmt.Sprintf("%d=%s", o.id, c.proxy(id, o.id).Addr()))
			}
		}
		args = append(args, "--peer-via", strings.Join(via, ","))
	}
	logFile, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	fmt.Fprintf(logFile, "--- runner: starting node %d at %s\n", id, time.Now().UTC().Format(time.RFC3339Nano))
	// What this start writes follows: waitLive reads it if the node exits.
	st, err := logFile.Stat()
	if err != nil {
		return err
	}
	logFrom := st.Size()
	cmd := exec.Command(c.binary, args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a Ctrl-C of the runner is not sent to the nodes: the runner stops them
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node %d: %w", id, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done, n.paused, n.running, n.stopping, n.live = cmd, done, false, true, false, false
	n.epoch++
	n.mu.Unlock()
	if err := c.waitLive(ctx, n, logFrom); err != nil {
		return err
	}
	n.mu.Lock()
	n.live = true
	n.mu.Unlock()
	return nil
}

// errPortTaken: a node exited while starting because another process had
// bound its address (its log says so).
var errPortTaken = errors.New("its address is taken by another process")

// waitLive waits until n answers /livez (its HTTP server runs) as itself:
// the answer must name n's id and the cluster's (identity.NodeHeader and
// ClusterHeader). Another process may have bound n's port between
// newCluster and the start (a concurrent run's node, an outgoing
// connection): its answers are not n's, and waitLive goes on polling until
// n, which cannot bind, exits. Its error then wraps errPortTaken if n's log
// since logFrom (this start's output) says the address was in use.
func (c *cluster) waitLive(ctx context.Context, n *node, logFrom int64) error {
	deadline := time.Now().Add(60 * time.Second)
	warned := false
	for {
		select {
		case <-n.done:
			err := fmt.Errorf("node %d exited while starting (see %s)", n.id, n.log)
			if logSays(n.log, logFrom, syscall.EADDRINUSE.Error()) {
				err = fmt.Errorf("%w: %w", err, errPortTaken)
			}
			return err
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr+"/livez", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				node, cluster, ok := identity.FromHeaders(resp.Header)
				if ok && node == n.id && cluster == c.id {
					return nil
				}
				if !warned {
					warned = true
					c.logf("node %d: %s answers /livez as another (node %q, cluster %q): not ours; waiting",
						n.id, n.addr, resp.Header.Get(identity.NodeHeader), resp.Header.Get(identity.ClusterHeader))
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d not live after 60s (see %s)", n.id, n.log)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// logSays reports whether the file at path holds what from offset on.
func logSays(path string, from int64, what string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, from, 1<<20))
	return err == nil && bytes.Contains(b, []byte(what))
}

// signal sends sig to member id's process.
func (c *cluster) signal(id uint64, sig syscall.Signal) error {
	n := c.node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running {
		return fmt.Errorf("node %d is not running", id)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return err
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	return nil
}

// kill kill -9s member id and waits until it is gone.
func (c *cluster) kill(id uint64) error {
	n := c.node(id)
	n.mu.Lock()
	if !n.running {
		n.mu.Unlock()
		return nil
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	n.epoch++
	n.stopping = true
	done := n.done
	n.mu.Unlock()
	<-done
	n.mu.Lock()
	n.running, n.paused = false, false
	n.mu.Unlock()
	return nil
}

// stop stops member id gracefully (SIGTERM; SIGKILL after timeout).
func (c *cluster) stop(id uint64, timeout time.Duration) error {
	n := c.node(id)
	n.mu.Lock()
	if !n.running {
		n.mu.Unlock()
		return nil
	}
	if n.paused {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	n.epoch++
	n.stopping = true
	done := n.done
	n.mu.Unlock()
	var err error
	select {
	case <-done:
	case <-time.After(timeout):
		err = fmt.Errorf("node %d did not stop within %s of SIGTERM: killed", id, timeout)
		_ = c.kill(id)
	}
	n.mu.Lock()
	n.running, n.paused = false, false
	n.mu.Unlock()
	return err
}

// epochOf is member id's epoch (see node.epoch) and whether it is up.
func (c *cluster) epochOf(id uint64) (int, bool) {
	n := c.node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.epoch, n.running && n.live && !n.paused && !n.stopping
}

// exited reports whether member id was started and its process ended by
// itself (not stopped by the runner).
func (c *cluster) exited(id uint64) bool {
	n := c.node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running {
		return false
	}
	select {
	case <-n.done:
		n.running, n.paused = false, false
		return true
	default:
		return false
	}
}

// up reports whether member id runs and is not paused.
func (c *cluster) up(id uint64) bool {
	n := c.node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running && n.live && !n.paused && !n.stopping
}

// cut cuts (or heals) the links between a and b, both ways.
func (c *cluster) cut(a, b uint64, cut bool) {
	for _, k := range [][2]uint64{{a, b}, {b, a}} {
		if p := c.proxy(k[0], k[1]); p != nil {
			p.SetCut(cut)
		}
	}
}

// healAll heals every link and resumes every paused node.
func (c *cluster) healAll() {
	c.mu.Lock()
	proxies := maps.Clone(c.proxies)
	nodes := slices.Clone(c.nodes)
	c.mu.Unlock()
	for _, p := range proxies {
		p.SetCut(false)
	}
	for _, n := range nodes {
		n.mu.Lock()
		if n.running && n.paused {
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			n.paused = false
		}
		n.mu.Unlock()
	}
}

// failpoint sets (value != "" or set) or clears a failpoint on member id
// (a binary built with -tags failpoints).
func (c *cluster) failpoint(ctx context.Context, id uint64, name, value string, set bool) error {
	n := c.node(id)
	var req *http.Request
	if set {
		body := url.Values{name: {value}}.Encode()
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "http://"+n.addr+"/debug/failpoints", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req, _ = http.NewRequestWithContext(ctx, http.MethodDelete, "http://"+n.addr+"/debug/failpoints?name="+url.QueryEscape(name), nil)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("failpoint %s on node %d: %w", name, id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return errors.New("the binary has no failpoints: build it with `go build -tags failpoints ./cmd/rewind` and pass --binary")
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("failpoint %s on node %d: HTTP %d", name, id, resp.StatusCode)
	}
	return nil
}

// close stops every member and proxy.
func (c *cluster) close() {
	c.healAll()
	c.mu.Lock()
	nodes := slices.Clone(c.nodes)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.stop(n.id, 15*time.Second) }()
	}
	wg.Wait()
	for _, p := range c.proxies {
		p.Close()
	}
}

// add prepares a new member (the next id) that joins through the current
// members; start starts it.
func (c *cluster) add() (uint64, error) {
	addr, err := freeAddr()
	if err != nil {
		return 0, err
	}
	var join []string
	for _, m := range c.members() {
		join = append(join, m.addr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := uint64(len(c.nodes) + 1)
	c.nodes = append(c.nodes, &node{id: id, addr: addr, join: strings.Join(join, ","),
		dir: filepath.Join(c.dir, fmt.Sprintf("node-%d", id)), log: filepath.Join(c.dir, fmt.Sprintf("node-%d.log", id))})
	return id, nil
}

// remove marks member id removed (it was stopped and removed from the
// cluster).
func (c *cluster) remove(id uint64) {
	n := c.node(id)
	n.mu.Lock()
	n.removed = true
	n.mu.Unlock()
}
