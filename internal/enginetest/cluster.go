package enginetest

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
)

// Cluster is n members of one cluster served in this process on loopback,
// each by StartNode's machinery.
type Cluster struct {
	// Members are the members' addresses (host:port) by node id, as in
	// Config.InitialCluster.
	Members map[uint64]string
	// ID is the cluster's id (engine.ClusterIDOf(Members)).
	ID uint64

	tb    testing.TB
	opts  []Option
	nodes []*Node // by node id - 1
}

// StartCluster starts n members, node ids 1 to n, on ports reserved before
// any opens. Each member's configuration is
//
//	Dir: a temporary directory, NodeID: id, Logger: none,
//	InitialCluster: Members, ClusterID: ID,
//	TickInterval: 20 ms, StoreCacheBytes and TailCacheBytes: 8 MiB
//
// which mutate (nil: none) then changes member by member: security,
// faults (FS, PeerDialer), limits. It does not wait for leaders: a test
// creates its topics and waits for what it needs. The test's end stops
// every member.
func StartCluster(tb testing.TB, n int, mutate func(id uint64, c *engine.Config), opts ...Option) *Cluster {
	tb.Helper()
	c := &Cluster{Members: map[uint64]string{}, tb: tb, opts: opts, nodes: make([]*Node, n)}
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		lns[i], c.Members[uint64(i+1)] = ln, ln.Addr().String()
	}
	c.ID = engine.ClusterIDOf(c.Members)
	for i := range n {
		id := uint64(i + 1)
		cfg := engine.Config{
			Dir: tb.TempDir(), NodeID: id, Logger: hclog.NewNullLogger(), InitialCluster: c.Members,
			ClusterID: c.ID, TickInterval: 20 * time.Millisecond,
			StoreCacheBytes: 8 << 20, TailCacheBytes: 8 << 20,
		}
		if mutate != nil {
			mutate(id, &cfg)
		}
		c.start(id, cfg, lns[i])
	}
	return c
}

// start serves member id with cfg on ln and stops it at the test's end.
func (c *Cluster) start(id uint64, cfg engine.Config, ln net.Listener) *Node {
	c.tb.Helper()
	n, err := serve(cfg, ln, collect(c.opts))
	if err != nil {
		c.tb.Fatalf("open node %d: %v", id, err)
	}
	c.nodes[id-1] = n
	// A member's stop error is not the test's: stopping members is how
	// cluster tests make faults.
	c.tb.Cleanup(func() { _ = n.Stop() })
	return n
}

// Node returns member id (1 to n) as last started.
func (c *Cluster) Node(id uint64) *Node { return c.nodes[id-1] }

// Nodes returns the members as last started, by node id - 1.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// URLs returns the members' base URLs by node id - 1 (https:// for a
// member serving TLS).
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = n.URL
	}
	return urls
}

// Stop stops member id: it drains, its connections close at once, its
// store closes. Stopping a stopped member does nothing.
func (c *Cluster) Stop(id uint64) { _ = c.Node(id).Stop() }

// Restart stops member id if it runs and starts it again with the same
// configuration (so the same data directory or FS) on the same port, and
// returns it.
func (c *Cluster) Restart(id uint64) *Node {
	c.tb.Helper()
	old := c.Node(id)
	_ = old.Stop()
	ln, err := net.Listen("tcp", old.Addr)
	if err != nil {
		c.tb.Fatalf("restart node %d on %s: %v", id, old.Addr, err)
	}
	return c.start(id, old.Config, ln)
}
