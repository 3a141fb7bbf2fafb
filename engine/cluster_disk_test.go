package engine_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// startCluster runs n nodes in this process, on loopback, as one cluster
// (TLS on the port when the configuration asks);
// mutate adjusts each node's configuration. It returns their base URLs,
// and functions that stop them, by node id - 1.
func startCluster(t testing.TB, n int, mutate func(id uint64, c *engine.Config)) (urls []string, stops []func()) {
	t.Helper()
	urls, stops, _ = startClusterNodes(t, n, mutate)
	return urls, stops
}

// startClusterNodes is startCluster that also returns the nodes.
func startClusterNodes(t testing.TB, n int, mutate func(id uint64, c *engine.Config)) (urls []string, stops []func(), nodes []*engine.Node) {
	t.Helper()
	members := map[uint64]string{}
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], members[uint64(i+1)] = ln, ln.Addr().String()
	}
	urls, stops, nodes = make([]string, n), make([]func(), n), make([]*engine.Node, n)
	for i := range n {
		id := uint64(i + 1)
		cfg := engine.Config{
			Dir: t.TempDir(), NodeID: id, Logger: hclog.NewNullLogger(), InitialCluster: members,
			ClusterID: engine.ClusterIDOf(members), TickInterval: 20 * time.Millisecond,
			StoreCacheBytes: 8 << 20, TailCacheBytes: 8 << 20,
		}
		if mutate != nil {
			mutate(id, &cfg)
		}
		node, err := engine.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = node
		srv := engine.NewHTTPServer(node.Handler())
		ln, scheme := lns[i], "http://"
		if node.TLSConfig() != nil {
			ln, scheme = node.Listener(ln), "https://"
		}
		go srv.Serve(ln)
		var once sync.Once
		stops[i] = func() {
			once.Do(func() {
				node.Drain()
				srv.Close()
				node.Close()
			})
		}
		t.Cleanup(stops[i])
		urls[i] = scheme + members[id]
	}
	return urls, stops, nodes
}

// TestLeaderLowOnDiskHandsItsPartitionsAway reproduces issue 14's fourth
// defect: node 3 is always below its --min-free-disk, so the partitions it
// leads refused every publish (ResourceExhausted) for as long as it kept
// leading, although nodes 1 and 2 could lead them. Now it hands them to
// another replica: every partition soon accepts publishes through every
// node. (Which node leads at a given moment is not asserted: the balancer
// may hand a partition back to node 3 once, which hands it on again.)
func TestLeaderLowOnDiskHandsItsPartitionsAway(t *testing.T) {
	urls, _ := startCluster(t, 3, func(id uint64, c *engine.Config) {
		c.HousekeepingInterval = 10 * time.Millisecond
		c.LeaderBalanceInterval = 200 * time.Millisecond
		if id == 3 {
			c.MinFreeBytes = 1 << 62
		}
	})
	ctx := context.Background()
	topics := rewindv1connect.NewTopicServiceClient(http.DefaultClient, urls[0])
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 3, ReplicationFactor: 3}})
		if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create topic: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll: the cluster elects its first leaders
	}
	// Every partition accepts a publish through every node, soon (before,
	// the one node 3 led refused until the deadline).
	for p := range uint32(3) {
		for _, u := range urls {
			pub := rewindv1connect.NewPublishServiceClient(http.DefaultClient, u)
			req := &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: []byte(fmt.Sprint(p)), Partition: &p}}}
			var last error
			for {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, last = pub.Publish(cctx, req)
				cancel()
				if last == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("publish to partition %d through %s: %v", p, u, last)
				}
				time.Sleep(50 * time.Millisecond) // poll: leadership moves
			}
		}
	}
}
