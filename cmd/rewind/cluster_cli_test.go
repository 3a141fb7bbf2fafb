package main

import (
	"context"
	"encoding/binary"
	"fmt"
	raftpb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// cluster is `rewind serve` processes of one cluster on loopback.
type cluster struct {
	enginetest.ProcessMembers
	nodes []*server // by node id - 1
}

func startCluster(t testing.TB, n int, extra ...string) *cluster {
	t.Helper()
	c := prepareCluster(t, n)
	for i := range n {
		c.nodes[i] = c.start(t, i+1, extra...)
	}
	return c
}

// prepareCluster prepares n members' addresses and directories
// (enginetest.PrepareProcessCluster); start them with c.start.
func prepareCluster(t testing.TB, n int) *cluster {
	t.Helper()
	m := enginetest.PrepareProcessCluster(t, n)
	return &cluster{ProcessMembers: m, nodes: make([]*server, n)}
}

func (c *cluster) start(t testing.TB, id int, extra ...string) *server {
	t.Helper()
	s := startServerWith(t, &server{url: "http://" + c.Addrs[id-1]}, c.Config(id, extra...))
	c.nodes[id-1] = s
	return s
}

// leaderOf asks every live node until one names partition p's leader.
func (c *cluster) leaderOf(t *testing.T, topic string, p uint32) uint64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, addr := range c.Addrs {
			st, err := client.New(addr).ClusterStatus(context.Background())
			if err != nil {
				continue
			}
			for _, ps := range st.GetPartitions() {
				if ps.GetTopic() == topic && ps.GetPartition() == p && ps.GetLeader() != 0 && len(ps.GetProgress()) > 0 {
					return ps.GetLeader()
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	t.Fatalf("no leader for %s/%d after 30s", topic, p)
	return 0
}

// TestClusterSurvivesKillingALeader runs three real processes, publishes
// continuously through every node, kill -9s the leader of partition 0,
// restarts it, and checks that every acknowledged record is present exactly
// once, in offset order, in a full replay from each node, and that the
// cluster kept accepting writes to that partition after the election.
func TestClusterSurvivesKillingALeader(t *testing.T) {
	testKillALeader(t, nil, nil)
}

// TestClusterSurvivesKillingALeaderWithTiering is the same with tiered
// storage on (a file:// store the three share) and a local limit of a few
// hundred bytes per partition: history moves to the store all along, so
// the leader dies while uploads and local truncates are in flight. Every
// acknowledged record must still be replayed from offset 0, in order, by
// every node, across the boundary between tiered and local history.
func TestClusterSurvivesKillingALeaderWithTiering(t *testing.T) {
	tierDir := t.TempDir()
	testKillALeader(t, []string{"--tier", "file://" + tierDir, "--retention-interval", "50ms"},
		[]string{"--local-retention-bytes", "512"})
}

// testKillALeader is TestClusterSurvivesKillingALeader with serve's extra
// flags and topic create's; with a local retention limit, it also waits
// for tiered history before the kill and before the replays.
func testKillALeader(t *testing.T, serve, create []string) {
	c := startCluster(t, 3, serve...)
	c.nodes[1].ok(t, nil, append([]string{"topic", "create", "orders", "--partitions", "2", "--replication-factor", "3"}, create...)...)
	tiering := len(create) > 0
	ctx := context.Background()
	victim := c.leaderOf(t, "orders", 0)
	// Two live subscribers on another node must see every record once, in
	// order, through the leader change: one reads through the leader (the
	// default: that node relays partition 0 from the victim, then from
	// whichever node is elected), the other that node's own replica.
	watcher := victim%3 + 1
	liveCtx, stopLive := context.WithCancel(ctx)
	defer stopLive()
	watch := func(addrs string, opts ...client.SubscribeOption) <-chan client.Record {
		t.Helper()
		live, err := client.New(addrs).Subscribe(liveCtx, "orders", append(opts, client.From(client.Earliest()))...)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan client.Record, 1<<16)
		go func() {
			defer close(got)
			for r, err := range live.Records() {
				if err != nil {
					t.Logf("live stream via %s: %v", addrs, err)
					return
				}
				got <- r
			}
		}()
		return got
	}
	// A third, connected to the victim but given every node, resumes on
	// another node from its last token when the victim dies.
	others := slices.DeleteFunc(slices.Clone(c.Addrs), func(a string) bool { return a == c.Addrs[victim-1] })
	lives := map[string]<-chan client.Record{
		"through the leader":                 watch(c.Addrs[watcher-1]),
		"from its replica":                   watch(c.Addrs[watcher-1], client.FollowerReads()),
		"resumed after the victim's kill -9": watch(strings.Join(append([]string{c.Addrs[victim-1]}, others...), ",")),
	}

	type acked struct {
		partition uint32
		offset    uint64
	}
	var (
		mu       sync.Mutex
		ack      = map[string]acked{} // value -> where it landed
		afterP0  atomic.Int64         // acks for partition 0 after the kill
		killed   atomic.Bool
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		failures atomic.Int64
	)
	// Each worker's client knows every node, starting at its own: it
	// moves on when the node it uses dies.
	clients := make([]*client.Client, len(c.Addrs))
	for i := range c.Addrs {
		clients[i] = client.New(strings.Join(append(slices.Clone(c.Addrs[i:]), c.Addrs[:i]...), ","),
			// Eight attempts, 10 ms doubling: about 1.3 s of waits,
			// which outlasts an election however fast each attempt
			// fails. With three, an election, a cut-short forward and
			// a "stored already, retry to learn its offset" answer
			// could use them all up on a busy machine (seen once in
			// CI): an outcome that depended on the machine's speed.
			client.WithPublishRetry(8, 10*time.Millisecond, 10*time.Second))
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", w, seq)
				p := uint32(seq % 2)
				cl := clients[w]
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, err := cl.Publish(pctx, "orders", client.Message{Value: []byte(v), IdempotencyKey: v, Partition: &p})
				cancel()
				if err != nil {
					if failures.Add(1) <= 5 {
						t.Logf("publish %s through %d: %v", v, w, err)
					}
					continue
				}
				mu.Lock()
				ack[v] = acked{res[0].Partition, res[0].Offset}
				mu.Unlock()
				if p == 0 && killed.Load() {
					afterP0.Add(1)
				}
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond) // poll interval
		}
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(ack) }
	// tiered reports whether node addr's replica of each partition keeps
	// history from before offset from only in the tier store.
	tiered := func(addr string, from uint64) bool {
		_, parts, err := client.New(addr).DescribeTopic(ctx, "orders")
		if err != nil || len(parts) != 2 {
			return false
		}
		for _, p := range parts {
			if p.LogStartOffset != 0 || p.LocalStartOffset < from {
				return false
			}
		}
		return true
	}
	waitFor("200 acks before the kill", func() bool { return count() >= 200 })
	if tiering {
		waitFor("tiered history before the kill", func() bool { return tiered(c.Addrs[victim-1], 1) })
	}
	c.nodes[victim-1].Kill()
	killed.Store(true)
	waitFor("100 acks to partition 0 after the kill", func() bool { return afterP0.Load() >= 100 })
	if l := c.leaderOf(t, "orders", 0); l == victim {
		t.Fatalf("node %d was killed but is still named leader", victim)
	}
	c.start(t, int(victim), serve...)
	before := count()
	waitFor("100 more acks after the restart", func() bool { return count() >= before+100 })
	close(stop)
	wg.Wait()
	t.Logf("%d acks, %d failed publishes, %d acks to partition 0 after the kill", count(), failures.Load(), afterP0.Load())
	if n := failures.Load(); n > 0 {
		// Every publish has an idempotency key and a client that knows
		// every node: a dead node or an election must not fail it.
		t.Errorf("%d publishes failed", n)
	}

	// The live streams on the watcher must see everything once, in order
	// (checked against the watcher's replay below).
	// Every node has every acknowledged record exactly once, in order: each
	// replays its own replica.
	for id, addr := range c.Addrs {
		waitFor(fmt.Sprintf("node %d to catch up", id+1), func() bool { return c.caughtUp(ctx, addr) })
		if tiering {
			// Its local copy of each partition starts past the first 50
			// records: the replay below reads them from the store.
			waitFor(fmt.Sprintf("node %d to read early history from the tier", id+1), func() bool { return tiered(addr, 50) })
		}
		seen := map[string]acked{}
		next := map[uint32]uint64{}
		sub, err := client.New(addr).Subscribe(ctx, "orders", client.From(client.Earliest()), client.Until(client.End()), client.FollowerReads())
		if err != nil {
			t.Fatal(err)
		}
		for r, err := range sub.Records() {
			if err != nil {
				t.Fatalf("node %d: replay: %v", id+1, err)
			}
			if r.Offset != next[r.Partition] {
				t.Fatalf("node %d: partition %d: offset %d after %d", id+1, r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			if prev, dup := seen[string(r.Value)]; dup {
				t.Fatalf("node %d: %q stored twice: %v and %d@%d", id+1, r.Value, prev, r.Partition, r.Offset)
			}
			seen[string(r.Value)] = acked{r.Partition, r.Offset}
		}
		for how, liveGot := range lives {
			if id+1 != int(watcher) {
				break
			}
			total := 0
			liveNext := map[uint32]uint64{}
			timeout := time.After(30 * time.Second)
			for total < len(seen) {
				select {
				case r, ok := <-liveGot:
					if !ok {
						t.Fatalf("live stream on node %d %s ended after %d records", watcher, how, total)
					}
					if r.Offset != liveNext[r.Partition] {
						t.Fatalf("live stream on node %d %s: partition %d offset %d after %d", watcher, how, r.Partition, r.Offset, liveNext[r.Partition])
					}
					if got := seen[string(r.Value)]; got != (acked{r.Partition, r.Offset}) {
						t.Fatalf("live stream on node %d %s: %q at %d@%d, replay has it at %v", watcher, how, r.Value, r.Partition, r.Offset, got)
					}
					liveNext[r.Partition]++
					total++
				case <-timeout:
					t.Fatalf("live stream on node %d %s: %d of %d records", watcher, how, total, len(seen))
				}
			}
		}
		mu.Lock()
		for v, a := range ack {
			if got, ok := seen[v]; !ok {
				t.Errorf("node %d: acknowledged %q (%v) is missing", id+1, v, a)
			} else if got != a {
				t.Errorf("node %d: acknowledged %q at %v, replayed at %v", id+1, v, a, got)
			}
		}
		mu.Unlock()
	}
}

// TestClusterRefusesMisconfiguredNodes: a data directory of another node or
// of another cluster is refused at start with a clear message, and so is
// an --initial-cluster without this node or with a duplicate id.
func TestClusterRefusesMisconfiguredNodes(t *testing.T) {
	c := startCluster(t, 3)
	// Through node 1, so its metadata log surely has entries.
	c.nodes[0].ok(t, nil, "topic", "create", "t", "--partitions", "1")
	c.nodes[0].Stop(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"another node's data", []string{"serve", "--data", c.Dirs[0], "--listen", c.Addrs[0], "--node-id", "2", "--initial-cluster", c.Initial}, "belongs to node 1, not 2"},
		{"another cluster's data", []string{"serve", "--data", c.Dirs[0], "--listen", c.Addrs[0], "--node-id", "1",
			"--initial-cluster", "1=" + c.Addrs[0] + ",2=" + c.Addrs[1]}, "belongs to cluster"},
		{"not a member", []string{"serve", "--data", t.TempDir(), "--node-id", "4", "--initial-cluster", c.Initial}, "not in --initial-cluster"},
		{"duplicate id", []string{"serve", "--data", t.TempDir(), "--initial-cluster", "1=127.0.0.1:1,1=127.0.0.1:2"}, "appears twice"},
		{"join and bootstrap", []string{"serve", "--data", t.TempDir(), "--initial-cluster", c.Initial, "--join", c.Addrs[1]}, "exclude each other"},
		{"duplicate address", []string{"serve", "--data", t.TempDir(), "--initial-cluster", "1=127.0.0.1:1,2=127.0.0.1:1"}, "same address"},
	} {
		r := runCLI(t, nil, nil, tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want a failure mentioning %q", tc.name, r.code, r.stderr, tc.want)
		}
	}
	// A member whose log lost its last entries (a damaged disk) refuses
	// to start rather than campaign with a truncated log.
	c.nodes[1].ok(t, nil, "topic", "list") // the others still serve
	damaged := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(damaged, os.DirFS(c.Dirs[0])); err != nil {
		t.Fatal(err)
	}
	truncateCommitted(t, damaged, 1) // the metadata group
	r := runCLI(t, nil, nil, "serve", "--data", damaged, "--listen", enginetest.FreeAddr(t), "--node-id", "1", "--initial-cluster", c.Initial)
	if r.code == 0 || !strings.Contains(r.stderr, "corrupt") {
		t.Errorf("damaged log: exit %d, stderr %q; want a refusal naming the corruption", r.code, r.stderr)
	}
	c.start(t, 1)
	out := c.nodes[0].ok(t, nil, "cluster", "status", "--format", "json")
	for _, want := range []string{`"id": 1`, `"id": 2`, `"id": 3`} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster status lacks %s:\n%s", want, out)
		}
	}
}

// TestClusterGrowAndShrink joins a fourth node to a running cluster,
// rebalances a replica onto it, removes one of the first three (its
// replicas move to the new node with joint-consensus configuration
// changes), and checks that the new node
// serves every record acknowledged before, that writes go on, and that the
// removed id cannot come back.
func TestClusterGrowAndShrink(t *testing.T) {
	c := startCluster(t, 3)
	c.nodes[0].ok(t, nil, "topic", "create", "orders", "--partitions", "2")
	ctx := context.Background()
	cl := client.New(c.Addrs[1])
	var want []string
	publish := func(cl *client.Client, n int) {
		t.Helper()
		for i := range n {
			v := fmt.Sprintf("r%d", len(want))
			p := uint32(i % 2)
			if _, err := cl.Publish(ctx, "orders", client.Message{Value: []byte(v), IdempotencyKey: v, Partition: &p}); err != nil {
				t.Fatalf("publish %s: %v", v, err)
			}
			want = append(want, v)
		}
	}
	publish(cl, 50)

	addr4 := enginetest.FreeAddr(t)
	n4 := startServer(t, filepath.Join(t.TempDir(), "d4"), addr4, "--node-id", "4", "--join", c.Addrs[2])
	// 6 replicas on 3 nodes, none on node 4: one moves to it.
	out := n4.ok(t, nil, "cluster", "rebalance")
	if !strings.Contains(out, "-> node 4") || !strings.Contains(out, "1 replica moved") {
		t.Fatalf("rebalance: %s", out)
	}
	if out := n4.ok(t, nil, "cluster", "rebalance", "--dry-run"); !strings.Contains(out, "nothing to move") {
		t.Fatalf("rebalance again: %s", out)
	}
	// Node 1's other replica moves to node 4 too (the only member free).
	out = n4.ok(t, nil, "cluster", "remove-node", "1")
	if !strings.Contains(out, "1 partition replica moved") {
		t.Fatalf("remove-node: %s", out)
	}
	st, err := client.New(addr4).ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.GetNodes() {
		if n.GetId() == 1 {
			t.Fatalf("node 1 still a member: %v", st.GetNodes())
		}
	}
	for _, p := range st.GetPartitions() {
		if !p.GetHosted() || slices.Contains(p.GetReplicas(), 1) || !slices.Contains(p.GetReplicas(), 4) {
			t.Fatalf("partition %d: replicas %v, hosted on node 4: %v", p.GetPartition(), p.GetReplicas(), p.GetHosted())
		}
	}
	c.nodes[0].Stop(t)
	publish(client.New(addr4), 20)

	// Node 4 received the log it never saw being written, and the rest.
	got := map[uint32][]string{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = map[uint32][]string{}
		sub, err := client.New(addr4).Subscribe(ctx, "orders", client.From(client.Earliest()), client.Until(client.End()))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for r, err := range sub.Records() {
			if err != nil {
				t.Fatal(err)
			}
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		}
		if n == len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // node 4 may still be catching up
	}
	for p := range uint32(2) {
		var w []string
		for i, v := range want {
			if uint32(i%2) == p {
				w = append(w, v)
			}
		}
		if !slices.Equal(got[p], w) {
			t.Errorf("node 4, partition %d: got %v, want %v", p, got[p], w)
		}
	}
	r := runCLI(t, nil, nil, "serve", "--node-id", "1", "--listen", enginetest.FreeAddr(t), "--data", t.TempDir(), "--join", c.Addrs[1])
	if r.code == 0 || !strings.Contains(r.stderr, "never reused") {
		t.Fatalf("rejoining under a removed id: exit %d, %s", r.code, r.stderr)
	}
}

// truncateCommitted deletes group's raft log entries from its commit index
// on, in the store at dir (whose node is stopped), leaving its commit index
// beyond its log.
func truncateCommitted(t *testing.T, dir string, group uint64) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The entries from the committed index on go: the log then ends
	// below what the group knows was committed (removing only the last
	// entry proves nothing when it was appended but not committed, as a
	// busy node's last metadata entry may be).
	prefix := binary.BigEndian.AppendUint64([]byte{'r'}, group)
	v, closer, err := db.Get(append(slices.Clone(prefix), 'h'))
	if err != nil {
		t.Fatalf("group %d hard state: %v", group, err)
	}
	var hs raftpb.HardState
	err = proto.Unmarshal(v, &hs)
	closer.Close()
	if err != nil || hs.GetCommit() == 0 {
		t.Fatalf("group %d hard state %v: %v", group, &hs, err)
	}
	lo := binary.BigEndian.AppendUint64(append(slices.Clone(prefix), 'e'), hs.GetCommit())
	hi := append(slices.Clone(prefix), 'e'+1)
	if _, closer, err := db.Get(lo); err != nil {
		t.Fatalf("group %d has no entry at its commit index %d in %s: %v", group, hs.GetCommit(), dir, err)
	} else {
		closer.Close()
	}
	if err := db.DeleteRange(lo, hi, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// TestClusterGroupMembersOnDifferentNodes: two members of one subscriber
// group connect to different nodes; both are sent to the coordinator, so
// they share the partitions (same generation, disjoint partitions) instead
// of each reading everything, and their commits are stored in every
// partition's raft group wherever its leader runs.
func TestClusterGroupMembersOnDifferentNodes(t *testing.T) {
	c := startCluster(t, 3)
	c.nodes[0].ok(t, nil, "topic", "create", "jobs", "--partitions", "4")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 40 {
		p := uint32(i % 4)
		if _, err := client.New(c.Addrs[i%3]).Publish(ctx, "jobs", client.Message{Value: []byte(fmt.Sprint(i)), Partition: &p}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := client.New(c.Addrs[1]).Subscribe(ctx, "jobs", client.Group("g"), client.From(client.Earliest()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := client.New(c.Addrs[2]).Subscribe(ctx, "jobs", client.Group("g"), client.From(client.Earliest()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Both members read; once b has records, the group is balanced.
	got := make(chan client.Record, 1000)
	// A Subscription is not safe for concurrent use: each reader notes
	// its member id and generation for the test goroutine.
	type member struct {
		mu  sync.Mutex
		id  string
		gen uint64
	}
	var ma, mb member
	read := func(s *client.Subscription, m *member) {
		for r, err := range s.Records() {
			if err != nil {
				return
			}
			// A record read before a rebalance is fenced (a newer
			// generation is current): that is the fence working.
			if err := s.CommitRecords(ctx, r); err != nil && ctx.Err() == nil && connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Errorf("commit %d@%d: %v", r.Partition, r.Offset, err)
				return
			}
			m.mu.Lock()
			m.id, m.gen = s.MemberID(), s.Generation()
			m.mu.Unlock()
			got <- r
		}
	}
	go read(a, &ma)
	go read(b, &mb)
	seen := map[string]bool{}
	for len(seen) < 40 {
		select {
		case r := <-got:
			seen[string(r.Value)] = true
		case <-ctx.Done():
			t.Fatalf("the group read %d of 40 records", len(seen))
		}
	}
	// a may have read all 40 before b joined: publish more until both
	// members have read some (the group is balanced).
	noted := func(m *member) string { m.mu.Lock(); defer m.mu.Unlock(); return m.id }
	for i := 40; noted(&ma) == "" || noted(&mb) == ""; i++ {
		p := uint32(i % 4)
		if _, err := client.New(c.Addrs[i%3]).Publish(ctx, "jobs", client.Message{Value: []byte(fmt.Sprint(i)), Partition: &p}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			seen[string(r.Value)] = true
		case <-ctx.Done():
			t.Fatal("member b never read a record")
		}
	}
	ma.mu.Lock()
	mb.mu.Lock()
	aID, aGen, bID, bGen := ma.id, ma.gen, mb.id, mb.gen
	mb.mu.Unlock()
	ma.mu.Unlock()
	if aGen == 0 || aID == bID {
		t.Fatalf("members %q (generation %d) and %q (generation %d)", aID, aGen, bID, bGen)
	}
	// Asked on any node, the CLI is sent to the coordinator, which knows
	// both members.
	out := c.nodes[0].ok(t, nil, "group", "describe", "g", "--format", "json")
	for _, id := range []string{aID, bID} {
		if !strings.Contains(out, id) {
			t.Errorf("describe lacks member %s:\n%s", id, out)
		}
	}
	cancel()
}

// caughtUp reports whether the node at addr has applied, for every
// partition, everything its leader had committed when asked.
func (c *cluster) caughtUp(ctx context.Context, addr string) bool {
	commit := map[uint64]uint64{} // group -> the leader's commit index
	for _, a := range c.Addrs {
		st, err := client.New(a).ClusterStatus(ctx)
		if err != nil {
			continue
		}
		for _, ps := range st.GetPartitions() {
			if len(ps.GetProgress()) > 0 {
				commit[ps.GetGroup()] = ps.GetCommitIndex()
			}
		}
	}
	st, err := client.New(addr).ClusterStatus(ctx)
	if err != nil {
		return false
	}
	for _, ps := range st.GetPartitions() {
		if !ps.GetHosted() {
			continue
		}
		lc, ok := commit[ps.GetGroup()]
		if !ok || ps.GetAppliedIndex() < lc {
			return false
		}
	}
	return true
}
