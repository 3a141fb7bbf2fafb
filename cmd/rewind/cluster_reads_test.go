package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/gen/rewind/peer/v1/peerv1connect"
	"github.com/rewind-io/rewind/sdk/client"
)

// counter reads a counter from a node's /metrics.
func counter(t *testing.T, addr, name string) uint64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			// The exposition writes numbers as floats (1.234567e+06).
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return uint64(n)
		}
	}
	t.Fatalf("%s: no %s in /metrics", addr, name)
	return 0
}

const fetchedBytes = "rewind_leader_fetch_bytes_served_total"

// replayDense replays topic from addr to its end and checks the offsets are
// dense from 0 in every partition.
func replayDense(t *testing.T, addr, topic string, opts ...client.SubscribeOption) map[uint32][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub, err := client.New(addr).Subscribe(ctx, topic, append(opts, client.From(client.Earliest()), client.Until(client.End()))...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32][]string{}
	for r, err := range sub.Records() {
		if err != nil {
			t.Fatalf("replay %s from %s: %v", topic, addr, err)
		}
		if want := uint64(len(out[r.Partition])); r.Offset != want {
			t.Fatalf("replay %s from %s: partition %d offset %d, want %d", topic, addr, r.Partition, r.Offset, want)
		}
		out[r.Partition] = append(out[r.Partition], string(r.Value))
	}
	return out
}

// TestClusterReadsFromLeaders: by default a stream reads every partition
// from its leader, relayed by the node the client is connected to, so any
// node serves any topic (also one with no replica there) and a record
// acknowledged before a stream opens is always in it; a request (or a
// node's --follower-reads) reads the node's own replicas instead, and the
// leader then serves nothing.
func TestClusterReadsFromLeaders(t *testing.T) {
	c := prepareCluster(t, 3)
	c.start(t, 1)
	c.start(t, 2)
	c.start(t, 3, "--follower-reads")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := client.New(strings.Join(c.Addrs, ","))

	// Replication factor 1: every partition lives on one node only, and
	// every node replays all of it, in order.
	c.nodes[0].ok(t, nil, "topic", "create", "solo", "--partitions", "3", "--replication-factor", "1")
	want := map[uint32][]string{}
	for i := range 60 {
		p := uint32(i % 3)
		v := fmt.Sprintf("s%d", i)
		if _, err := cl.Publish(ctx, "solo", client.Message{Value: []byte(v), Partition: &p}); err != nil {
			t.Fatal(err)
		}
		want[p] = append(want[p], v)
	}
	for _, addr := range c.Addrs {
		for _, opts := range [][]client.SubscribeOption{nil, {client.FollowerReads()}, {client.LeaderReads()}} {
			got := replayDense(t, addr, "solo", opts...)
			for p := range uint32(3) {
				if fmt.Sprint(got[p]) != fmt.Sprint(want[p]) {
					t.Fatalf("replay of solo from %s %v: partition %d has %v, want %v", addr, opts, p, got[p], want[p])
				}
			}
		}
	}

	// Replication factor 3, led by node 1 or 2, whichever does not lead
	// the metadata group (which coordinates subscriber groups, below); node
	// 3 reads its replicas by its setting.
	st, err := cl.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leaderID, followerID := uint64(1), uint64(2)
	if st.GetMetadataLeader() == 1 {
		leaderID, followerID = 2, 1
	}
	c.nodes[0].ok(t, nil, "topic", "create", "rf3", "--partitions", "1", "--replication-factor", "3")
	for c.leaderOf(t, "rf3", 0) != leaderID {
		c.nodes[0].cli(t, nil, "cluster", "transfer-leader", "rf3", "0", fmt.Sprint(leaderID))
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	leader, follower, followerReader := c.Addrs[leaderID-1], c.Addrs[followerID-1], c.Addrs[2]
	// Read your writes: a record acknowledged is in a stream opened on a
	// follower right after, every time: reading from the leader, and by
	// default (history from the follower's replica when it has it, the
	// rest from the leader).
	p0 := uint32(0)
	before := counter(t, leader, fetchedBytes)
	for i := range 50 {
		v := fmt.Sprintf("r%d", i)
		res, err := client.New(leader).Publish(ctx, "rf3", client.Message{Value: []byte(v), Partition: &p0})
		if err != nil {
			t.Fatal(err)
		}
		opts := []client.SubscribeOption{client.From(client.Offset(res[0].Offset)), client.Until(client.End()), client.Partitions(0)}
		if i%2 == 1 {
			opts = append(opts, client.LeaderReads())
		}
		sub, err := client.New(follower).Subscribe(ctx, "rf3", opts...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for r, err := range sub.Records() {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(r.Value))
		}
		if len(got) != 1 || got[0] != v {
			t.Fatalf("stream on node 2 from the offset just acknowledged (%d): %q, want [%s]", res[0].Offset, got, v)
		}
	}
	if after := counter(t, leader, fetchedBytes); after <= before {
		t.Fatalf("the leader served %d bytes to the follower's leader reads", after-before)
	}
	if n := counter(t, follower, "rewind_remote_partition_reads_total"); n < 50 {
		t.Fatalf("node 2 read %d partitions through the leader, want at least 50", n)
	}

	// Follower reads serve the follower's replica: the leader serves
	// nothing. Node 2 by request, node 3 by its setting.
	c.waitCaughtUp(t, follower)
	c.waitCaughtUp(t, followerReader)
	before = counter(t, leader, fetchedBytes)
	for _, r := range []struct {
		addr string
		opts []client.SubscribeOption
	}{{follower, []client.SubscribeOption{client.FollowerReads()}}, {followerReader, nil}} {
		if got := replayDense(t, r.addr, "rf3", r.opts...); len(got[0]) != 50 {
			t.Fatalf("follower read from %s: %d records, want 50", r.addr, len(got[0]))
		}
	}
	if after := counter(t, leader, fetchedBytes); after != before {
		t.Fatalf("follower reads made the leader serve %d bytes", after-before)
	}
	// By default a follower catches up from its own replica: a replay of
	// the history it holds costs the leader nothing, and it is the
	// leader's history, exactly.
	if got := replayDense(t, follower, "rf3"); len(got[0]) != 50 {
		t.Fatalf("default read from node 2: %d records, want 50", len(got[0]))
	}
	if after := counter(t, leader, fetchedBytes); after != before {
		t.Fatalf("a default replay on a caught-up follower made the leader serve %d bytes", after-before)
	}
	// A request overrides the node's setting.
	if got := replayDense(t, followerReader, "rf3", client.LeaderReads()); len(got[0]) != 50 {
		t.Fatalf("leader read from node 3: %d records, want 50", len(got[0]))
	}
	if after := counter(t, leader, fetchedBytes); after == before {
		t.Fatal("a leader read on a --follower-reads node was not served by the leader")
	}

	// A subscriber group member's partitions are read from their leaders
	// too: its stream runs on the coordinator, which does not lead rf3.
	before = counter(t, leader, fetchedBytes)
	gctx, stopGroup := context.WithCancel(ctx)
	defer stopGroup()
	sub, err := cl.Subscribe(gctx, "rf3", client.Group("g"), client.From(client.Earliest()), client.LeaderReads())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for r, err := range sub.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset != uint64(len(got)) {
			t.Fatalf("group member: offset %d after %d records", r.Offset, len(got))
		}
		if got = append(got, string(r.Value)); len(got) == 50 {
			break
		}
	}
	stopGroup()
	if after := counter(t, leader, fetchedBytes); after == before {
		t.Fatal("a group member's stream was not served by the partition's leader")
	}
}

// TestClusterRelayedStreamSurvivesItsNodeStopping: a live stream that a
// follower relays from the leader ends when the follower is stopped
// (SIGTERM) as any stream there does, with Unavailable, and the Go client,
// which knows every node, carries it on elsewhere from its last token:
// every record once, in order.
func TestClusterRelayedStreamSurvivesItsNodeStopping(t *testing.T) {
	c := startCluster(t, 3)
	c.nodes[0].ok(t, nil, "topic", "create", "t", "--partitions", "1", "--replication-factor", "3")
	leader := c.leaderOf(t, "t", 0)
	relay := leader%3 + 1
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var order []string
	order = append(order, c.Addrs[relay-1])
	for i, a := range c.Addrs {
		if uint64(i+1) != relay {
			order = append(order, a)
		}
	}
	sub, err := client.New(strings.Join(order, ",")).Subscribe(ctx, "t", client.From(client.Earliest()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub := client.New(c.Addrs[leader-1])
	p0 := uint32(0)
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := pub.Publish(ctx, "t", client.Message{Value: []byte(fmt.Sprint(i)), Partition: &p0}); err != nil {
				t.Fatal(err)
			}
		}
	}
	next := 0
	read := func(to int) {
		t.Helper()
		for r, err := range sub.Records() {
			if err != nil {
				t.Fatalf("live stream after %d records: %v", next, err)
			}
			if r.Offset != uint64(next) || string(r.Value) != fmt.Sprint(next) {
				t.Fatalf("record %d@%d %q, want offset %d", r.Partition, r.Offset, r.Value, next)
			}
			if next++; next == to {
				return
			}
		}
	}
	publish(0, 50)
	read(50)
	c.nodes[relay-1].Stop(t)
	publish(50, 100)
	read(100)
	if sub.Resumes() == 0 {
		t.Fatal("the stream went on without moving off the stopped node")
	}
}

// TestClusterPartitionServiceRefusesMisuse: the members' read service
// answers only its own cluster, only for partitions its node leads (naming
// the leader), and refuses bad requests with the right code.
func TestClusterPartitionServiceRefusesMisuse(t *testing.T) {
	c := startCluster(t, 3)
	c.nodes[0].ok(t, nil, "topic", "create", "t", "--partitions", "1", "--replication-factor", "3")
	leader := c.leaderOf(t, "t", 0)
	follower := leader%3 + 1
	members := map[uint64]string{}
	for i, a := range c.Addrs {
		members[uint64(i+1)] = a
	}
	cluster := engine.ClusterIDOf(members)
	ctx := context.Background()
	desc, _, err := client.New(c.Addrs[0]).DescribeTopic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	topicID := desc.ID
	call := func(node uint64, ref *peerv1.PartitionRef) error {
		pc := peerv1connect.NewPartitionServiceClient(http.DefaultClient, "http://"+c.Addrs[node-1])
		_, err := pc.Fetch(ctx, &peerv1.FetchRequest{Partition: ref, MaxBytes: 1 << 20})
		return err
	}
	for _, tc := range []struct {
		name   string
		node   uint64
		ref    *peerv1.PartitionRef
		code   connect.Code
		header string
	}{
		{"another cluster", leader, &peerv1.PartitionRef{ClusterId: cluster + 1, TopicId: topicID}, connect.CodeFailedPrecondition, ""},
		{"not the leader", follower, &peerv1.PartitionRef{ClusterId: cluster, TopicId: topicID}, connect.CodeUnavailable, fmt.Sprint(leader)},
		{"no such topic", leader, &peerv1.PartitionRef{ClusterId: cluster, TopicId: topicID + 100}, connect.CodeNotFound, ""},
		{"no such partition", leader, &peerv1.PartitionRef{ClusterId: cluster, TopicId: topicID, Partition: 7}, connect.CodeInvalidArgument, ""},
	} {
		err := call(tc.node, tc.ref)
		if connect.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
			continue
		}
		var ce *connect.Error
		if tc.header != "" && (!errors.As(err, &ce) || ce.Meta().Get("Rewind-Leader") != tc.header) {
			t.Errorf("%s: leader hint %v, want %s", tc.name, err, tc.header)
		}
	}
	// The leader answers its own cluster.
	if err := call(leader, &peerv1.PartitionRef{ClusterId: cluster, TopicId: topicID}); err != nil {
		t.Fatalf("fetch from the leader: %v", err)
	}
}

// waitCaughtUp waits until the node at addr has applied what the leaders
// committed.
func (c *cluster) waitCaughtUp(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !c.caughtUp(context.Background(), addr) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not catch up in 30s", addr)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}
