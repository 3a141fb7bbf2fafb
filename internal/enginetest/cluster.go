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
	// Config.Cluster.InitialMembers.
	Members map[uint64]string
	// ID is the cluster's id (engine.ClusterIDOf(Members)).
	ID uint64

	tb    testing.TB
	opts  []Option
	lns   []net.Listener  // by node id - 1; nil once started
	cfgs  []engine.Config // by node id - 1
	nodes []*Node         // by node id - 1; nil until started
}

// StartCluster starts n members, node ids 1 to n, on ports reserved before
// any opens: PrepareCluster, then Start of each. It does not wait for
// leaders: a test creates its topics and waits for what it needs. The
// test's end stops every member.
func StartCluster(tb testing.TB, n int, mutate func(id uint64, c *engine.Config), opts ...Option) *Cluster {
	tb.Helper()
	c := PrepareCluster(tb, n, mutate, opts...)
	for id := range uint64(n) {
		c.Start(id + 1)
	}
	return c
}

// PrepareCluster reserves n loopback ports and writes the members'
// configurations, and starts none: Start starts a member, for a test
// about members coming up one by one. Each member's configuration is
//
//	Dir: a temporary directory, NodeID: id, Logger: none,
//	Cluster: InitialMembers: Members, ID: ID, TickInterval: 20 ms,
//	Storage: StoreCacheBytes and TailCacheBytes: 8 MiB
//
// which mutate (nil: none) then changes member by member: security,
// faults (enginehook.Of(c).FS, .PeerDialer), limits.
func PrepareCluster(tb testing.TB, n int, mutate func(id uint64, c *engine.Config), opts ...Option) *Cluster {
	tb.Helper()
	c := &Cluster{Members: map[uint64]string{}, tb: tb, opts: opts,
		lns: make([]net.Listener, n), cfgs: make([]engine.Config, n), nodes: make([]*Node, n)}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		c.lns[i], c.Members[uint64(i+1)] = ln, ln.Addr().String()
	}
	c.ID = engine.ClusterIDOf(c.Members)
	for i := range n {
		id := uint64(i + 1)
		c.cfgs[i] = engine.Config{
			Dir: tb.TempDir(), NodeID: id, Logger: hclog.NewNullLogger(),
			Cluster: engine.ClusterConfig{InitialMembers: c.Members, ID: c.ID, TickInterval: 20 * time.Millisecond},
			Storage: engine.StorageConfig{StoreCacheBytes: 8 << 20, TailCacheBytes: 8 << 20},
		}
		if mutate != nil {
			mutate(id, &c.cfgs[i])
		}
	}
	tb.Cleanup(func() { // the ports of members never started
		for _, ln := range c.lns {
			if ln != nil {
				ln.Close()
			}
		}
	})
	return c
}

// Start starts prepared member id on its reserved port and returns it;
// the test's end stops it. Use Restart for a member that ran.
func (c *Cluster) Start(id uint64) *Node {
	c.tb.Helper()
	ln := c.lns[id-1]
	if ln == nil {
		c.tb.Fatalf("node %d was started already", id)
	}
	c.lns[id-1] = nil
	return c.start(id, c.cfgs[id-1], ln)
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

// Node returns member id (1 to n) as last started (nil before Start).
func (c *Cluster) Node(id uint64) *Node { return c.nodes[id-1] }

// Nodes returns the members as last started, by node id - 1.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// URLs returns the members' base URLs by node id - 1 (https:// for a
// member serving TLS; http:// for one not started yet).
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		if n == nil {
			urls[i] = "http://" + c.Members[uint64(i+1)]
		} else {
			urls[i] = n.URL
		}
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
