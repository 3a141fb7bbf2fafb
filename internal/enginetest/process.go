//go:build unix

package enginetest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/identity"
)

// ProcessConfig says how StartProcess runs `rewind serve`. The zero value
// runs the release build alone on a free port with its data in a
// temporary directory.
type ProcessConfig struct {
	// Bin is the rewind binary. Default: Binary(tb).
	Bin string
	// Addr is --listen. Default: FreeAddr(tb).
	Addr string
	// Dir is --data. Default: a new temporary directory.
	Dir string
	// Args are more serve flags, after --listen, --data and --log-level:
	// --node-id and --initial-cluster (which name the node the start
	// waits for), --auth, TLS files, limits.
	Args []string
	// LogLevel is --log-level. Default "warn".
	LogLevel string
	// Env is the process's environment. Default: the test's.
	Env []string
	// TLS says the node serves TLS: its URL is https:// and Probe must
	// trust its certificate.
	TLS bool
	// Probe is the HTTP client that asks /livez. Default
	// http.DefaultClient.
	Probe *http.Client
	// Ready, when set, is called once the node is live until it returns
	// nil (every 50 ms): what "ready" means to the test (a CLI command
	// that succeeds, a bootstrap token on disk).
	Ready func(ctx context.Context, p *Process) error
	// Timeout bounds the wait for live and Ready together. Default 60 s.
	Timeout time.Duration
}

// Process is `rewind serve` running as a child process.
type Process struct {
	// URL is the node's base URL, http://ADDR or https://ADDR.
	URL string
	// Addr is its --listen address; Dir its --data directory.
	Addr, Dir string
	// Cmd is the process (Cmd.Process to signal it; Cmd.ProcessState
	// once Done).
	Cmd *exec.Cmd
	// LogPath is the file that holds its stdout and stderr.
	LogPath string

	done chan struct{}
}

// StartProcess starts `rewind serve` as cfg says, and waits until it
// answers /livez as itself: the answer must name the node id and the
// cluster id of its flags (internal/identity's headers; a joining node's
// cluster is not checked), so another process that took the port in the
// meantime is not taken for it. Then it waits for cfg.Ready. If the
// process exits first, or the wait times out, the test fails with its
// log. The test's end kills it unless it was stopped.
func StartProcess(tb testing.TB, cfg ProcessConfig) *Process {
	tb.Helper()
	if cfg.Bin == "" {
		cfg.Bin = Binary(tb)
	}
	if cfg.Addr == "" {
		cfg.Addr = FreeAddr(tb)
	}
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(tb.TempDir(), "data")
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
	}
	if cfg.Probe == nil {
		cfg.Probe = http.DefaultClient
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	scheme := "http://"
	if cfg.TLS {
		scheme = "https://"
	}
	p := &Process{URL: scheme + cfg.Addr, Addr: cfg.Addr, Dir: cfg.Dir, LogPath: filepath.Join(tb.TempDir(), "serve.log"), done: make(chan struct{})}
	logf, err := os.Create(p.LogPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	args := append([]string{"serve", "--listen", cfg.Addr, "--data", cfg.Dir, "--log-level", cfg.LogLevel}, cfg.Args...)
	p.Cmd = exec.Command(cfg.Bin, args...)
	p.Cmd.Env = cfg.Env
	p.Cmd.Stdout, p.Cmd.Stderr = logf, logf
	if err := p.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		p.Cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(p.Kill)

	node, cluster, anyCluster := whoIs(cfg.Args)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	live := false
	var last error
	for {
		select {
		case <-p.done:
			tb.Fatalf("rewind serve on %s exited before it was ready (exit code %d)\nlog:\n%s", p.Addr, p.Cmd.ProcessState.ExitCode(), p.Log())
		default:
		}
		if !live {
			last = p.livez(ctx, cfg.Probe, node, cluster, anyCluster)
			live = last == nil
		}
		if live {
			if cfg.Ready == nil {
				return p
			}
			if last = cfg.Ready(ctx, p); last == nil {
				return p
			}
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("rewind serve on %s not ready after %s: %v\nlog:\n%s", p.Addr, cfg.Timeout, last, p.Log())
		case <-time.After(50 * time.Millisecond): // poll interval
		}
	}
}

// livez asks the node's /livez once: nil if it answers as node of
// cluster.
func (p *Process) livez(ctx context.Context, hc *http.Client, node, cluster uint64, anyCluster bool) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, p.URL+"/livez", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	n, c, ok := identity.FromHeaders(resp.Header)
	if resp.StatusCode != http.StatusOK || !ok || n != node || (!anyCluster && c != cluster) {
		return fmt.Errorf("/livez answered %s as node %q of cluster %q: not node %d of cluster %s", resp.Status,
			resp.Header.Get(identity.NodeHeader), resp.Header.Get(identity.ClusterHeader), node, identity.FormatCluster(cluster))
	}
	return nil
}

// whoIs reads the node id and cluster id serve's flags give a node:
// --node-id (default 1) and --initial-cluster (none: cluster 0); with
// --join the cluster is the one joined (any).
func whoIs(args []string) (node, cluster uint64, anyCluster bool) {
	node = 1
	members := map[uint64]string{}
	for i := 0; i < len(args); i++ {
		name, value, ok := strings.Cut(args[i], "=")
		if !ok && i+1 < len(args) {
			value = args[i+1]
		}
		switch strings.TrimLeft(name, "-") {
		case "node-id":
			node, _ = strconv.ParseUint(value, 10, 64)
		case "initial-cluster":
			for _, m := range strings.Split(value, ",") {
				id, addr, _ := strings.Cut(strings.TrimSpace(m), "=")
				n, _ := strconv.ParseUint(id, 10, 64)
				members[n] = addr
			}
		case "join":
			anyCluster = true
		}
	}
	return node, identity.ClusterIDOf(members), anyCluster
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Log returns what the process has written to stdout and stderr.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Kill kills the process (SIGKILL) unless it has exited, and waits for
// it.
func (p *Process) Kill() {
	select {
	case <-p.done:
	default:
		p.Cmd.Process.Kill()
		<-p.done
	}
}

// Stop sends SIGTERM and fails the test unless the process exits with
// status 0 (a graceful shutdown) within 30 s.
func (p *Process) Stop(tb testing.TB) {
	tb.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("SIGTERM to rewind serve on %s: %v", p.Addr, err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.Kill()
		tb.Fatalf("rewind serve on %s did not exit within 30s of SIGTERM\nlog:\n%s", p.Addr, p.Log())
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		tb.Fatalf("rewind serve on %s exited with %d after SIGTERM, want 0 (graceful shutdown)\nlog:\n%s", p.Addr, code, p.Log())
	}
}

// ProcessMembers are what n `rewind serve` processes of one cluster are
// told: their addresses, data directories and --initial-cluster. Start a
// member with StartProcess(tb, m.Config(id, ...)).
type ProcessMembers struct {
	// Addrs and Dirs are the members' --listen and --data, by node id - 1.
	Addrs, Dirs []string
	// Initial is the --initial-cluster value: 1=ADDR,2=ADDR,...
	Initial string
}

// PrepareProcessCluster picks n free loopback addresses and n data
// directories (not created: the node creates its own); it starts nothing.
func PrepareProcessCluster(tb testing.TB, n int) ProcessMembers {
	tb.Helper()
	var m ProcessMembers
	parts := make([]string, n)
	addrs := FreeAddrs(tb, n)
	for i := range n {
		m.Addrs = append(m.Addrs, addrs[i])
		m.Dirs = append(m.Dirs, filepath.Join(tb.TempDir(), fmt.Sprintf("d%d", i+1)))
		parts[i] = fmt.Sprintf("%d=%s", i+1, m.Addrs[i])
	}
	m.Initial = strings.Join(parts, ",")
	return m
}

// Config returns member id's ProcessConfig (id 1 to n): its address and
// directory, and --node-id and --initial-cluster before extra.
func (m ProcessMembers) Config(id int, extra ...string) ProcessConfig {
	return ProcessConfig{
		Addr: m.Addrs[id-1], Dir: m.Dirs[id-1],
		Args: append([]string{"--node-id", strconv.Itoa(id), "--initial-cluster", m.Initial}, extra...),
	}
}
