//go:build unix

package main

// BenchmarkClusterPausedLeader: the gray failure of a leader that stops
// answering without closing its connections (SIGSTOP). Figures go to
// docs/benchmarks.md, "Gray failures":
//
//	go test -run XXX -bench BenchmarkClusterPausedLeader -benchtime 1x -count 1 -v ./cmd/rewind/

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-io/rewind/sdk/client"
)

const (
	// pauseTimeout bounds each publish of BenchmarkClusterPausedLeader:
	// longer than the 10 s a dead connection between members used to
	// take to fail, so a request held that long shows.
	pauseTimeout = 15 * time.Second
	pauseReps    = 3
)

// BenchmarkClusterPausedLeader publishes single records to partition 0 of
// a 3-partition topic, one closed-loop publisher through each node that is
// not the victim (no retry by the client, 15 s per request), SIGSTOPs the
// leader of partition 0 and measures the time from the pause to the first
// acknowledgement of a publish sent after it (a publisher held by a
// request in flight at the pause sends nothing meanwhile), and the longest
// any publish in flight during the outage waited for its answer. Then it resumes the victim (SIGCONT) and waits for the
// cluster to settle. Three pauses per run (a pause is skipped when leadership moved back
// to the preferred replica just before it).
func BenchmarkClusterPausedLeader(b *testing.B) {
	syscall.Sync()
	c := startCluster(b, 3)
	createTopic(b, c.Addrs[0], "gp", 3, 3)
	var recovery, held []time.Duration
	errs := map[string]int{}
	for b.Loop() {
		for i := range pauseReps {
			r, h, e := pauseLeaderOnce(b, c)
			b.Logf("pause %d: first ack %s after the pause; longest wait of a publish %s", i, r.Round(time.Millisecond), h.Round(time.Millisecond))
			recovery, held = append(recovery, r), append(held, h)
			for k, v := range e {
				errs[k] += v
			}
		}
	}
	slices.Sort(recovery)
	slices.Sort(held)
	b.ReportMetric(msf(recovery[len(recovery)/2]), "recovery-p50-ms")
	b.ReportMetric(msf(recovery[len(recovery)-1]), "recovery-max-ms")
	b.ReportMetric(msf(held[len(held)-1]), "longest-wait-ms")
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		b.Logf("%d× %s", errs[k], k)
	}
}

// pauseLeaderOnce pauses partition 0's leader once; ok false: leadership
// moved (balancing) before the pause, nothing was measured.
func pauseLeaderOnce(b *testing.B, c *cluster) (recovery, held time.Duration, errs map[string]int) {
	for {
		if r, h, e, ok := tryPauseLeader(b, c); ok {
			return r, h, e
		}
	}
}

func tryPauseLeader(b *testing.B, c *cluster) (recovery, held time.Duration, errs map[string]int, ok bool) {
	b.Helper()
	victim := settle(b, c.Addrs, "gp", 3)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var others []uint64
	for via := uint64(1); via <= uint64(len(c.Addrs)); via++ {
		if via != victim {
			others = append(others, via)
		}
	}
	pr := startProbes(ctx, c.Addrs, others, "gp", pauseTimeout, func(via uint64, n int) string { return fmt.Sprintf("%d-%d-%d", victim, via, n) })
	time.Sleep(time.Second) // steady publishing before the pause
	if ps := statusOf(ctx, client.New(c.Addrs[victim-1]), "gp", 0); ps == nil || ps.GetLeader() != victim {
		cancel()
		pr.wg.Wait()
		return 0, 0, nil, false
	}
	proc := c.nodes[victim-1].Cmd.Process
	pausedAt := time.Now()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		b.Fatal(err)
	}
	var first time.Time
	waitUntil(b, 60*time.Second, "a publish to partition 0 acknowledged after the pause", func() bool {
		first = pr.firstAckSince(pausedAt)
		return !first.IsZero()
	})
	time.Sleep(time.Second) // publishing goes on under the new leader
	cancel()
	pr.wg.Wait()
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		b.Fatal(err)
	}
	errs = map[string]int{}
	for _, a := range pr.attempts {
		if a.at.Before(pausedAt) {
			continue
		}
		if a.sent.Before(first) {
			from := a.sent
			if from.Before(pausedAt) {
				from = pausedAt
			}
			held = max(held, a.at.Sub(from))
		}
		if a.err != nil {
			errs[errShape(a.err)]++
		}
	}
	return first.Sub(pausedAt), held, errs, true
}
