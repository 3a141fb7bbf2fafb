//go:build unix

package main

// Benchmarks of real `rewind serve` processes on loopback: publish
// throughput and latency of a three-node cluster beside a single node,
// replay from a partition's leader and from a follower, the time a
// partition takes to accept publishes again after its leader is killed,
// and live publish latency while a replica replays history. They run only
// with -bench and assert nothing about time; figures come out through
// b.ReportMetric and are recorded in docs/benchmarks.md:
//
//	go test -run XXX -bench BenchmarkCluster -benchtime 1x -count 3 -v ./cmd/rewind/
//
// A benchmark with cases starts its processes once and -count repeats the
// cases on them; BenchmarkClusterFailover starts a cluster per count. -v adds what the figures cannot say (partition leaders, every
// kill of the failover case with the errors the publishers saw).
// REWIND_BENCH_DURATION (default 5s) is how long each publish case runs
// (latency cases run twice as long); REWIND_BENCH_RECORDS (default
// 1,000,000) is how much history the replay cases load.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/cmd/rewind/internal/bench"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

const (
	benchRecordSize = 100
	benchPartitions = 6
	// benchPublishers is two closed-loop publishers per partition of the
	// publish topic, so the cases that pin publishers to partitions load
	// every partition alike.
	benchPublishers = 2 * benchPartitions
	// failoverTimeout bounds each publish while the leader is down, and
	// failoverReps is how many kills one run measures.
	failoverTimeout = 500 * time.Millisecond
	failoverReps    = 5
	// rejoinWait bounds the wait for a restarted victim to get its
	// leadership back while the publishers go on.
	rejoinWait = 30 * time.Second
	// latencyRate is the open-loop rate of the latency cases, per second.
	latencyRate = 1000
)

func benchDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("REWIND_BENCH_DURATION")); err == nil && d > 0 {
		return d
	}
	return 5 * time.Second
}

// benchReplays lists the numbers of concurrent replays the latency cases
// run beside live publishes (REWIND_BENCH_REPLAYS, default "1,4,16").
func benchReplays() []int {
	var out []int
	for _, f := range strings.Split(cmp.Or(os.Getenv("REWIND_BENCH_REPLAYS"), "1,4,16"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func benchRecords() int {
	if n, err := strconv.Atoi(os.Getenv("REWIND_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// ---------------------------------------------------------------------------
// Processes (the testing.TB versions of cli_test.go's helpers, which take
// a *testing.T)

// settle waits until every partition of topic is led by its preferred
// leader (its first replica, where leader balancing puts it), every replica
// has matched the leader's log and every node in addrs has applied it, and
// returns each partition's leader. On a single node it waits for a leader.
func settle(tb testing.TB, addrs []string, topic string, parts int) []uint64 {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var why string
	for time.Now().Before(deadline) {
		leaders, reason := settled(addrs, topic, parts)
		if reason == "" {
			return leaders
		}
		why = reason
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	tb.Fatalf("%s not settled after 60s: %s", topic, why)
	return nil
}

// settled says why topic is not settled yet ("" when it is).
func settled(addrs []string, topic string, parts int) ([]uint64, string) {
	type view struct {
		node uint64
		ps   *rewindv1.PartitionStatus
	}
	views := make([][]view, parts)
	for _, addr := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := client.New(addr).ClusterStatus(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Sprintf("%s: %v", addr, err)
		}
		for _, ps := range st.GetPartitions() {
			if ps.GetTopic() == topic && int(ps.GetPartition()) < parts && ps.GetHosted() {
				views[ps.GetPartition()] = append(views[ps.GetPartition()], view{st.GetNodeId(), ps})
			}
		}
	}
	leaders := make([]uint64, parts)
	for p, vs := range views {
		var lead *rewindv1.PartitionStatus
		for _, v := range vs {
			if v.ps.GetLeader() == v.node && len(v.ps.GetProgress()) > 0 {
				lead = v.ps
			}
		}
		if lead == nil {
			return nil, fmt.Sprintf("partition %d: no node says it leads", p)
		}
		if len(addrs) > 1 && lead.GetLeader() != lead.GetReplicas()[0] {
			return nil, fmt.Sprintf("partition %d: led by %d, preferred %d", p, lead.GetLeader(), lead.GetReplicas()[0])
		}
		for _, r := range lead.GetProgress() {
			if r.GetLag() > 0 || r.GetLagUnknown() {
				return nil, fmt.Sprintf("partition %d: node %d lags %d entries", p, r.GetNode(), r.GetLag())
			}
		}
		for _, v := range vs {
			if v.ps.GetLeader() != lead.GetLeader() || v.ps.GetAppliedIndex() < lead.GetLastIndex() {
				return nil, fmt.Sprintf("partition %d: node %d sees leader %d, applied %d of %d", p, v.node, v.ps.GetLeader(), v.ps.GetAppliedIndex(), lead.GetLastIndex())
			}
		}
		leaders[p] = lead.GetLeader()
	}
	return leaders, ""
}

// createTopic creates topic with parts partitions and rf replicas each.
func createTopic(tb testing.TB, addr, topic string, parts, rf uint32) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.New(addr).CreateTopic(ctx, topic, client.WithPartitions(parts), client.WithReplicationFactor(rf)); err != nil {
		tb.Fatalf("create %s: %v", topic, err)
	}
}

// noRetry returns a client for addr that never retries a publish, so that
// latencies and errors are those of single requests.
func noRetry(addr string) *client.Client {
	return client.New(addr, client.WithPublishRetry(1, 0, 0))
}

// ---------------------------------------------------------------------------
// Publish

// publishFor runs benchPublishers closed-loop publishers for d, each with
// one request of batch records in flight, sending where route says (a
// client and, if not nil, the partition of every record of the request).
// Failed requests are counted, not retried; the report holds the
// acknowledged records and the latency of each acknowledged request.
func publishFor(ctx context.Context, d time.Duration, topic string, batch int, route func(pub int) (*client.Client, *uint32)) (bench.Report, int, error) {
	payload := make([]byte, benchRecordSize)
	rand.Read(payload)
	var (
		mu       sync.Mutex
		lats     []time.Duration
		acked    uint64
		failed   int
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for p := range benchPublishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, part := route(p)
			msgs := make([]client.Message, batch)
			for i := range msgs {
				msgs[i] = client.Message{Value: payload, Partition: part}
			}
			var local []time.Duration
			var n uint64
			var bad int
			var badErr error
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				if _, err := cl.Publish(ctx, topic, msgs...); err != nil {
					bad++
					if badErr == nil {
						badErr = err
					}
					continue
				}
				local = append(local, time.Since(t0))
				n += uint64(batch)
			}
			mu.Lock()
			lats = append(lats, local...)
			acked += n
			failed += bad
			if firstErr == nil {
				firstErr = badErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	r := bench.Report{Records: acked, Bytes: acked * benchRecordSize, Elapsed: time.Since(start), Latencies: lats}
	return r, failed, firstErr
}

// reportPublish reports a publish run's figures.
func reportPublish(b *testing.B, r bench.Report, failed int, err error) {
	b.ReportMetric(r.RecordsPerSec(), "records/s")
	b.ReportMetric(msf(r.Percentile(0.5)), "p50-ms")
	b.ReportMetric(msf(r.Percentile(0.99)), "p99-ms")
	b.ReportMetric(float64(failed), "failed-requests")
	if failed > 0 {
		b.Logf("%d requests failed; the first: %v", failed, err)
	}
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkClusterPublish publishes 100-byte records into a 6-partition
// topic from 12 closed-loop publishers, one request in flight each, on a
// single node (replication factor 1) and on three nodes (factor 3), in
// requests of 1, 100 and 1,000 records:
//
//   - spread: records carry no partition (the node spreads them by
//     request: a request's records stay in one partition, the next
//     request takes the next one), and publisher i talks to node i mod 3;
//     on three nodes 2 in 3 requests are forwarded to their leader.
//   - leader: publisher i sends every record to partition i mod 6, through
//     that partition's leader.
//   - forwarded: the same, through a node that does not lead the
//     partition (every request costs a forward hop).
func BenchmarkClusterPublish(b *testing.B) {
	d := benchDuration()
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			addrs := startNodes(b, nodes)
			createTopic(b, addrs[0], "pub", benchPartitions, uint32(nodes))
			leaders := settle(b, addrs, "pub", benchPartitions)
			b.Logf("partition leaders: %v", leaders)
			clients := make([]*client.Client, len(addrs))
			for i, a := range addrs {
				clients[i] = noRetry(a)
			}
			routes := map[string]func(int) (*client.Client, *uint32){
				"spread": func(p int) (*client.Client, *uint32) { return clients[p%len(clients)], nil },
				"leader": func(p int) (*client.Client, *uint32) {
					part := uint32(p % benchPartitions)
					return clients[leaders[part]-1], &part
				},
				"forwarded": func(p int) (*client.Client, *uint32) {
					part := uint32(p % benchPartitions)
					return clients[int(leaders[part])%len(clients)], &part // the node after the leader
				},
			}
			for _, mode := range []string{"spread", "leader", "forwarded"} {
				if nodes == 1 && mode == "forwarded" {
					continue
				}
				for _, batch := range []int{1, 100, 1000} {
					b.Run(fmt.Sprintf("via=%s/batch=%d", mode, batch), func(b *testing.B) {
						var r bench.Report
						var failed int
						var err error
						for b.Loop() {
							r, failed, err = publishFor(context.Background(), d, "pub", batch, routes[mode])
						}
						reportPublish(b, r, failed, err)
					})
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Replay

// startNodes starts a single node (nodes == 1, no --initial-cluster) or a
// cluster of nodes members and returns their addresses by node id - 1.
func startNodes(tb testing.TB, nodes int) []string {
	tb.Helper()
	syscall.Sync() // the previous case's writes and deleted data directories
	if nodes == 1 {
		addr := enginetest.FreeAddr(tb)
		startServer(tb, filepath.Join(tb.TempDir(), "d"), addr)
		return []string{addr}
	}
	return startCluster(tb, nodes).Addrs
}

// loadHistory creates topic (one partition, a replica on every node) and
// fills it with n records of 100 bytes through the partition's leader (4
// publishers, 1,000 records per request), waits until every replica has
// applied them, and returns the leader.
func loadHistory(b *testing.B, addrs []string, topic string, n int) uint64 {
	b.Helper()
	createTopic(b, addrs[0], topic, 1, uint32(len(addrs)))
	leader := settle(b, addrs, topic, 1)[0]
	t0 := time.Now()
	r, err := bench.Publish(context.Background(), client.New(addrs[leader-1]), bench.PublishOptions{
		Topic: topic, Records: n, Size: benchRecordSize, Partitions: 1, Batch: 1000, Publishers: 4,
	})
	if err != nil {
		b.Fatalf("loading %s: %v", topic, err)
	}
	settle(b, addrs, topic, 1)
	syscall.Sync()
	b.Logf("loaded %d records into %s through its leader, node %d: %.0f records/s; applied on every replica after %s",
		r.Records, topic, leader, r.RecordsPerSec(), time.Since(t0).Round(time.Millisecond))
	return leader
}

// BenchmarkClusterReplay loads one partition with REWIND_BENCH_RECORDS
// records of 100 bytes (three replicas; one on a single node) and replays
// all of it through the Go client: connected to the leader; connected to a
// follower reading its own replica (follower read); and connected to a
// follower that relays the leader's batches (the default leader read).
func BenchmarkClusterReplay(b *testing.B) {
	n := benchRecords()
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			addrs := startNodes(b, nodes)
			leader := loadHistory(b, addrs, "history", n)
			type replayCase struct {
				name string
				node uint64
				opts []client.SubscribeOption
			}
			from := []replayCase{{"from=leader", leader, nil}}
			if nodes > 1 {
				follower := leader%uint64(nodes) + 1
				from = append(from,
					replayCase{"from=follower-replica", follower, []client.SubscribeOption{client.FollowerReads()}},
					replayCase{"from=leader-via-follower", follower, []client.SubscribeOption{client.LeaderReads()}})
			}
			for _, tc := range from {
				b.Run(tc.name, func(b *testing.B) { replayAll(b, addrs[tc.node-1], n, tc.opts...) })
			}
		})
	}
}

// replayAll replays topic history from addr once per iteration and
// reports the throughput and the mean time to the first record.
func replayAll(b *testing.B, addr string, n int, opts ...client.SubscribeOption) {
	cl := client.New(addr)
	var total bench.Report
	var first float64
	runs := 0
	for b.Loop() {
		r, err := bench.Replay(context.Background(), cl, "history", opts...)
		if err != nil {
			b.Fatalf("replay from %s: %v", addr, err)
		}
		if r.Records != uint64(n) {
			b.Fatalf("replay from %s: %d records, want %d", addr, r.Records, n)
		}
		total.Records += r.Records
		total.Bytes += r.Bytes
		total.Elapsed += r.Elapsed
		first += r.Extra["first_record_ms"]
		runs++
	}
	b.ReportMetric(total.RecordsPerSec(), "records/s")
	b.ReportMetric(total.MiBPerSec(), "MiB/s")
	b.ReportMetric(first/float64(runs), "first-record-ms")
}

// ---------------------------------------------------------------------------
// Failover

// attempt is one publish of the failover probe.
type attempt struct {
	via      uint64
	sent, at time.Time // at: when the answer came
	err      error
}

// probes publishes single records to partition 0 of a topic, back to back,
// through each of a set of nodes (a client that does not retry), and keeps
// every attempt: what the failover benchmarks read their figures from.
type probes struct {
	mu       sync.Mutex
	attempts []attempt
	wg       sync.WaitGroup
}

// startProbes starts a probe through each node in via until ctx ends; each
// publish is bounded by timeout and carries the idempotency key key(via,
// n) ("" for none).
func startProbes(ctx context.Context, addrs []string, via []uint64, topic string, timeout time.Duration, key func(via uint64, n int) string) *probes {
	p := &probes{}
	p0 := uint32(0)
	for _, v := range via {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			cl := noRetry(addrs[v-1])
			for n := 0; ctx.Err() == nil; n++ {
				a := attempt{via: v, sent: time.Now()}
				pctx, pcancel := context.WithTimeout(ctx, timeout)
				_, a.err = cl.Publish(pctx, topic, client.Message{Value: []byte("probe"), Partition: &p0, IdempotencyKey: key(v, n)})
				pcancel()
				a.at = time.Now()
				if ctx.Err() != nil {
					return
				}
				p.mu.Lock()
				p.attempts = append(p.attempts, a)
				p.mu.Unlock()
			}
		}()
	}
	return p
}

// firstAckSince returns when the first publish sent at or after t was
// acknowledged (zero: none yet).
func (p *probes) firstAckSince(t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first time.Time
	for _, a := range p.attempts {
		if a.err == nil && !a.sent.Before(t) && (first.IsZero() || a.at.Before(first)) {
			first = a.at
		}
	}
	return first
}

// failoverRun is what one kill of a leader showed.
type failoverRun struct {
	failover  time.Duration // kill to the first acknowledgement of a publish sent after it
	newLeader time.Duration // kill to a survivor's status naming another leader
	back      time.Duration // restart to the victim leading the partition again; -1: not within rejoinWait
	// Failed publishes: sent between the kill and the first
	// acknowledgement after it (or in flight at the kill), between then
	// and the restart, and from the restart to the end.
	failedOutage, failedAfter, failedRejoin int
	rejoinMax                               time.Duration // slowest acknowledged publish sent after the restart
	rejoinMaxSent                           time.Duration // when that one was sent, relative to back (or the end of rejoinWait)
	errs                                    map[string]int
	// timeline is what the victim said about partition 0 after its
	// restart (each change of leader or term once), then the failed
	// publishes, as times from the restart.
	timeline []string
}

// BenchmarkClusterFailover publishes single records to partition 0 of a
// 3-partition topic without pause, one publisher through each node that
// is not the victim (500 ms per request, no retry by the client, the
// next request at once), kill -9s the leader of partition 0 and measures
// the time from the kill to the first acknowledged publish sent after it,
// and to the first status answer of a survivor naming a new leader. Then
// it restarts the victim while the publishers go on, until the victim
// leads the partition again (leader balancing hands it back) and records
// what the publishers saw meanwhile. Five kills per run.
func BenchmarkClusterFailover(b *testing.B) {
	syscall.Sync()
	c := startCluster(b, 3)
	createTopic(b, c.Addrs[0], "fo", 3, 3)
	var runs []failoverRun
	for b.Loop() {
		for range failoverReps {
			runs = append(runs, killLeaderOnce(b, c))
		}
	}
	pick := func(f func(failoverRun) time.Duration) (p50, maxd time.Duration) {
		var ds []time.Duration
		for _, r := range runs {
			ds = append(ds, f(r))
		}
		slices.Sort(ds)
		return ds[len(ds)/2], ds[len(ds)-1]
	}
	fo50, foMax := pick(func(r failoverRun) time.Duration { return r.failover })
	nl50, nlMax := pick(func(r failoverRun) time.Duration { return r.newLeader })
	var backs []time.Duration
	notBack := 0
	for _, r := range runs {
		if r.back < 0 {
			notBack++
		} else {
			backs = append(backs, r.back)
		}
	}
	slices.Sort(backs)
	if len(backs) > 0 {
		b.ReportMetric(backs[len(backs)/2].Seconds(), "leader-back-p50-s")
		b.ReportMetric(backs[len(backs)-1].Seconds(), "leader-back-max-s")
	}
	b.ReportMetric(float64(notBack), "leader-not-back-in-30s")
	_, rejoinMax := pick(func(r failoverRun) time.Duration { return r.rejoinMax })
	b.ReportMetric(msf(fo50), "failover-p50-ms")
	b.ReportMetric(msf(foMax), "failover-max-ms")
	b.ReportMetric(msf(nl50), "new-leader-p50-ms")
	b.ReportMetric(msf(nlMax), "new-leader-max-ms")
	b.ReportMetric(msf(rejoinMax), "rejoin-max-publish-ms")
	errs := map[string]int{}
	var failedAfter, failedRejoin int
	for i, r := range runs {
		back := fmt.Sprintf("back %s after the restart", r.back.Round(time.Millisecond))
		if r.back < 0 {
			back = fmt.Sprintf("not back within %s of the restart", rejoinWait)
		}
		b.Logf("kill %d: failover %s, new leader seen after %s, %d publishes failed in the outage, %d after it, %d while the victim rejoined "+
			"(leadership %s; slowest ack %s, sent %s from then)",
			i, r.failover.Round(time.Millisecond), r.newLeader.Round(time.Millisecond), r.failedOutage, r.failedAfter, r.failedRejoin,
			back, r.rejoinMax.Round(time.Millisecond), r.rejoinMaxSent.Round(time.Millisecond))
		if r.failedRejoin > 0 || r.back < 0 {
			b.Logf("kill %d: rejoin timeline (from the restart): %s", i, strings.Join(r.timeline, "; "))
		}
		failedAfter += r.failedAfter
		failedRejoin += r.failedRejoin
		for k, v := range r.errs {
			errs[k] += v
		}
	}
	b.ReportMetric(float64(failedAfter), "failed-after-failover")
	b.ReportMetric(float64(failedRejoin), "failed-during-rejoin")
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		b.Logf("%d× %s", errs[k], k)
	}
}

// killLeaderOnce runs one kill of partition 0's leader.
func killLeaderOnce(b *testing.B, c *cluster) failoverRun {
	b.Helper()
	victim := settle(b, c.Addrs, "fo", 3)[0]
	var survivors []uint64
	for id := range uint64(len(c.Addrs)) {
		if id+1 != victim {
			survivors = append(survivors, id+1)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr := startProbes(ctx, c.Addrs, survivors, "fo", failoverTimeout, func(uint64, int) string { return "" })
	var wg sync.WaitGroup // the status watcher
	// A new leader, as the survivors' status says.
	var newLeaderAt atomic.Int64
	dead := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-dead:
		case <-ctx.Done():
			return
		}
		status := []*client.Client{client.New(c.Addrs[survivors[0]-1]), client.New(c.Addrs[survivors[1]-1])}
		for ctx.Err() == nil && newLeaderAt.Load() == 0 {
			for _, cl := range status {
				if leaderSeenBy(ctx, cl, "fo", 0, func(l uint64) bool { return l != 0 && l != victim }) {
					newLeaderAt.CompareAndSwap(0, time.Now().UnixNano())
				}
			}
			time.Sleep(10 * time.Millisecond) // poll interval
		}
	}()

	time.Sleep(time.Second) // steady publishing before the kill
	killAt := time.Now()
	c.nodes[victim-1].Kill()
	close(dead)
	deadAt := time.Now() // the process has been reaped: no later send reaches it
	var first time.Time
	waitUntil(b, 30*time.Second, "a publish to partition 0 acknowledged after the kill", func() bool {
		first = pr.firstAckSince(deadAt)
		return !first.IsZero()
	})
	time.Sleep(500 * time.Millisecond) // publishing goes on under the new leader
	restartAt := time.Now()
	c.start(b, int(victim))
	backAt := time.Now()
	vc := client.New(c.Addrs[victim-1])
	type seen struct {
		at           time.Duration
		leader, term uint64
		lag          []uint64
	}
	var views []seen
	for {
		ps := statusOf(ctx, vc, "fo", 0)
		if ps != nil {
			v := seen{at: time.Since(restartAt), leader: ps.GetLeader(), term: ps.GetTerm()}
			for _, r := range ps.GetProgress() {
				v.lag = append(v.lag, r.GetLag())
			}
			if n := len(views); n == 0 || views[n-1].leader != v.leader || views[n-1].term != v.term {
				views = append(views, v)
			}
			if v.leader == victim {
				break
			}
		}
		if time.Since(restartAt) > rejoinWait {
			backAt = time.Time{} // not under load; settle waits for it without
			break
		}
		time.Sleep(20 * time.Millisecond) // poll interval
		backAt = time.Now()
	}
	if !backAt.IsZero() {
		time.Sleep(500 * time.Millisecond) // and under the old leader again
	}
	cancel()
	wg.Wait()
	pr.wg.Wait()

	run := failoverRun{failover: first.Sub(killAt), back: backAt.Sub(restartAt), errs: map[string]int{}}
	for _, v := range views {
		run.timeline = append(run.timeline, fmt.Sprintf("%s leader %d term %d lag %v", v.at.Round(time.Millisecond), v.leader, v.term, v.lag))
	}
	if backAt.IsZero() {
		run.back, backAt = -1, restartAt.Add(rejoinWait)
	}
	if at := newLeaderAt.Load(); at != 0 {
		run.newLeader = time.Unix(0, at).Sub(killAt)
	}
	for _, a := range pr.attempts {
		phase := ""
		switch {
		case a.at.Before(killAt):
			continue
		case a.sent.Before(first):
			phase = "outage"
			if a.err != nil {
				run.failedOutage++
			}
		case a.sent.Before(restartAt):
			phase = "after failover"
			if a.err != nil {
				run.failedAfter++
			}
		default:
			phase = "rejoin"
			if a.err != nil {
				run.failedRejoin++
				run.timeline = append(run.timeline, fmt.Sprintf("%s-%s publish via %d failed", a.sent.Sub(restartAt).Round(time.Millisecond), a.at.Sub(restartAt).Round(time.Millisecond), a.via))
			} else {
				if l := a.at.Sub(a.sent); l > run.rejoinMax {
					run.rejoinMax, run.rejoinMaxSent = l, a.sent.Sub(backAt)
				}
			}
		}
		if a.err != nil {
			run.errs[fmt.Sprintf("%s, via node %d: %s", phase, a.via, errShape(a.err))]++
		}
	}
	return run
}

// leaderSeenBy reports whether the node cl talks to names a leader of topic's
// partition p for which ok holds.
func leaderSeenBy(ctx context.Context, cl *client.Client, topic string, p uint32, ok func(uint64) bool) bool {
	ps := statusOf(ctx, cl, topic, p)
	return ps != nil && ok(ps.GetLeader())
}

// statusOf returns what the node cl talks to says of topic's partition p
// (nil: no answer).
func statusOf(ctx context.Context, cl *client.Client, topic string, p uint32) *rewindv1.PartitionStatus {
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	st, err := cl.ClusterStatus(ctx)
	if err != nil {
		return nil
	}
	for _, ps := range st.GetPartitions() {
		if ps.GetTopic() == topic && ps.GetPartition() == p {
			return ps
		}
	}
	return nil
}

// waitUntil polls cond every 5 ms for up to d.
func waitUntil(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

// errShape is an error's code and text with numbers replaced, so that the
// same failure counts once.
func errShape(err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] ", connect.CodeOf(err))
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	digits := false
	for _, r := range msg {
		if r >= '0' && r <= '9' {
			if !digits {
				b.WriteByte('N')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// Live latency while history is replayed

// BenchmarkClusterPublishDuringReplay measures single-record durable
// publishes at 1,000 per second, open loop, to a 1-partition topic through
// its leader: alone, and while `rewind bench replay` (its own process)
// runs 1, 4 or 16 concurrent replays (REWIND_BENCH_REPLAYS) of a
// 1-partition history topic of REWIND_BENCH_RECORDS records, each over
// and over: connected to the leader of both topics; or connected to a
// follower, from its own replica (follower read) or relaying the leader's
// (leader read, which puts the reading on the leader). On a single node the
// leader is the node.
func BenchmarkClusterPublishDuringReplay(b *testing.B) {
	n := benchRecords()
	d := 2 * benchDuration()
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			addrs := startNodes(b, nodes)
			histLeader := loadHistory(b, addrs, "history", n)
			// Both topics led by one node, so that a replay read from the
			// leader loads the live partition's leader: placement puts a
			// partition's preferred leader at (topic id + partition) mod
			// members, so the live topic's id must be the history's plus a
			// multiple of the member count.
			for i := range nodes - 1 {
				createTopic(b, addrs[0], fmt.Sprintf("pad-%d", i), 1, 1)
			}
			createTopic(b, addrs[0], "live", 1, uint32(nodes))
			liveLeader := settle(b, addrs, "live", 1)[0]
			if liveLeader != histLeader {
				b.Fatalf("live topic led by node %d, history by node %d: placement changed?", liveLeader, histLeader)
			}
			type replayCase struct {
				name    string
				replay  uint64 // 0: none
				streams int
				args    []string
			}
			cases := []replayCase{{name: "replay=none"}}
			for _, k := range benchReplays() {
				cases = append(cases, replayCase{fmt.Sprintf("replay=leader/streams=%d", k), liveLeader, k, nil})
				if nodes > 1 {
					follower := liveLeader%uint64(nodes) + 1
					cases = append(cases,
						replayCase{fmt.Sprintf("replay=follower-replica/streams=%d", k), follower, k, []string{"--read-from", "replica"}},
						replayCase{fmt.Sprintf("replay=leader-via-follower/streams=%d", k), follower, k, []string{"--read-from", "leader"}})
				}
			}
			b.Logf("both topics led by node %d", liveLeader)
			live := noRetry(addrs[liveLeader-1])
			for _, tc := range cases {
				b.Run(tc.name, func(b *testing.B) {
					var r bench.Report
					var replayed float64
					for b.Loop() {
						stop := func() float64 { return 0 }
						if tc.replay != 0 {
							stop = startReplayer(b, addrs[tc.replay-1], "history", tc.streams, d+time.Second, tc.args...)
							time.Sleep(500 * time.Millisecond) // the replay is under way
						}
						var err error
						r, _, err = bench.Latency(context.Background(), live, bench.LatencyOptions{Topic: "live", Rate: latencyRate, Duration: d, Size: benchRecordSize})
						replayed = stop()
						if err != nil {
							b.Fatalf("publish: %v", err)
						}
					}
					b.ReportMetric(msf(r.Percentile(0.5)), "p50-ms")
					b.ReportMetric(msf(r.Percentile(0.99)), "p99-ms")
					b.ReportMetric(msf(r.Percentile(1)), "max-ms")
					b.ReportMetric(r.Extra["achieved_rate"], "publishes/s")
					if tc.replay != 0 {
						b.ReportMetric(replayed, "replayed-records/s")
					}
				})
			}
		})
	}
}

// startReplayer starts `rewind bench replay` against addr: streams
// concurrent replays of topic, each starting over when it ends, for d.
// stop waits for it (killing it by its pid if it overruns) and returns the
// records/s all the streams received.
func startReplayer(tb testing.TB, addr, topic string, streams int, d time.Duration, args ...string) (stop func() float64) {
	tb.Helper()
	var out bytes.Buffer
	cmd := exec.Command(enginetest.Binary(tb), append([]string{"--server", "http://" + addr, "bench", "replay", "--topic", topic,
		"--streams", strconv.Itoa(streams), "--duration", d.String()}, args...)...)
	cmd.Env = cliEnv()
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	kill := func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	}
	tb.Cleanup(kill)
	return func() float64 {
		select {
		case <-done:
		case <-time.After(d + 30*time.Second):
			kill()
		}
		for _, line := range strings.Split(out.String(), "\n") {
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "msgs_per_s="); ok && strings.HasPrefix(line, "RESULT ") {
					if x, err := strconv.ParseFloat(v, 64); err == nil {
						return x
					}
				}
			}
		}
		return 0
	}
}
