//go:build unix

package main

// BenchmarkClusterGrayLatency: what a publisher sees of a gray failure.
// Figures go to docs/benchmarks.md, "Gray failures":
//
//	go test -run XXX -bench BenchmarkClusterGrayLatency -benchtime 1x -count 1 -v ./cmd/rewind/

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-io/rewind/sdk/client"
)

const (
	grayPublishers = 3
	grayBefore     = 4 * time.Second
	grayPause      = 10 * time.Second
	grayAfter      = 6 * time.Second
)

// grayPublish is one acknowledged or failed publish.
type grayPublish struct {
	part uint32
	sent time.Time
	took time.Duration
	err  error
}

// grayLoad runs grayPublishers closed-loop publishers of single records
// with idempotency keys to topic, round robin over its three partitions,
// each through a client given every node with its default options (2 s
// attempts, 4 attempts, 50 ms backoff doubling), until ctx ends.
type grayLoad struct {
	mu   sync.Mutex
	pubs []grayPublish
	wg   sync.WaitGroup
}

func startGrayLoad(ctx context.Context, addrs []string, topic string) *grayLoad {
	l := &grayLoad{}
	all := ""
	for i, a := range addrs {
		if i > 0 {
			all += ","
		}
		all += a
	}
	for p := range grayPublishers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			cl := client.New(all)
			for n := 0; ctx.Err() == nil; n++ {
				part := uint32(n % 3)
				g := grayPublish{part: part, sent: time.Now()}
				pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, g.err = cl.Publish(pctx, topic, client.Message{Value: []byte("gray"), Partition: &part,
					IdempotencyKey: fmt.Sprintf("%s-%d-%d", topic, p, n)})
				cancel()
				g.took = time.Since(g.sent)
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.pubs = append(l.pubs, g)
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// report splits the publishes into phases: before (answered before
// from), during (in flight at from, or sent in [from, to)) and after (sent
// from to on); it reports p50, p99 and max of the acknowledged ones and
// the failures of each phase, and logs every publish over a second.
func (l *grayLoad) report(b *testing.B, name string, from, to time.Time) {
	l.wg.Wait()
	type phase struct {
		name  string
		lats  []time.Duration
		fails int
		first error
	}
	ps := []*phase{{name: "before"}, {name: "during"}, {name: "after"}}
	for _, g := range l.pubs {
		if g.took > time.Second && !from.IsZero() {
			b.Logf("%s: a publish to partition %d sent %s after the fault took %s (error: %v)", name, g.part,
				g.sent.Sub(from).Round(time.Millisecond), g.took.Round(time.Millisecond), g.err)
		}
		ph := ps[1]
		switch {
		case !from.IsZero() && g.sent.Add(g.took).Before(from):
			ph = ps[0]
		case !to.IsZero() && !g.sent.Before(to):
			ph = ps[2]
		}
		if g.err != nil {
			ph.fails++
			if ph.first == nil {
				ph.first = g.err
			}
			continue
		}
		ph.lats = append(ph.lats, g.took)
	}
	for _, ph := range ps {
		if len(ph.lats) == 0 && ph.fails == 0 {
			continue
		}
		slices.Sort(ph.lats)
		pct := func(q float64) time.Duration {
			if len(ph.lats) == 0 {
				return 0
			}
			return ph.lats[min(len(ph.lats)-1, int(q*float64(len(ph.lats))))]
		}
		unit := func(m string) string { return name + "-" + ph.name + "-" + m }
		b.ReportMetric(float64(len(ph.lats)), unit("acked"))
		b.ReportMetric(msf(pct(0.5)), unit("p50-ms"))
		b.ReportMetric(msf(pct(0.99)), unit("p99-ms"))
		b.ReportMetric(msf(pct(1)), unit("max-ms"))
		b.ReportMetric(float64(ph.fails), unit("failed"))
		b.Logf("%s %s: %d acked, p50 %s p99 %s max %s; %d failed (first: %v)", name, ph.name, len(ph.lats),
			pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), pct(1).Round(time.Millisecond), ph.fails, ph.first)
	}
}

// BenchmarkClusterGrayLatency publishes steadily (grayLoad) to a
// 3-partition topic of a 3-node cluster (replication factor 3) and reports
// the latency of acknowledged publishes before, during and after a fault:
//
//   - paused: the leader of partition 0 is SIGSTOPped for 10 s, then
//     resumed;
//   - low-disk: one node runs with --min-free-disk far above its free
//     space from the start, so it refuses writes and must hand away the
//     partitions it would lead (its preferred ones); "during" is the whole
//     run from the topic's creation.
//
// A cut link between members cannot be made between processes without
// privileges; engine.BenchmarkGrayLatencyCutLink covers it in process.
func BenchmarkClusterGrayLatency(b *testing.B) {
	syscall.Sync()
	b.Run("fault=paused", func(b *testing.B) {
		for b.Loop() {
			c := startCluster(b, 3)
			createTopic(b, c.Addrs[0], "gl", 3, 3)
			victim := settle(b, c.Addrs, "gl", 3)[0]
			ctx, cancel := context.WithCancel(context.Background())
			l := startGrayLoad(ctx, c.Addrs, "gl")
			time.Sleep(grayBefore) // steady publishing before the fault
			proc := c.nodes[victim-1].Cmd.Process
			from := time.Now()
			if err := proc.Signal(syscall.SIGSTOP); err != nil {
				b.Fatal(err)
			}
			go func() { // when the other nodes see a new leader of partition 0
				other := c.Addrs[victim%3]
				for time.Since(from) < 5*time.Second {
					sctx, scancel := context.WithTimeout(ctx, time.Second)
					ps := statusOf(sctx, client.New(other), "gl", 0)
					scancel()
					if ps != nil && ps.GetLeader() != victim && ps.GetLeader() != 0 {
						b.Logf("paused: %s sees node %d lead partition 0 %s after the pause", other, ps.GetLeader(), time.Since(from).Round(time.Millisecond))
						return
					}
					time.Sleep(20 * time.Millisecond) // poll interval
				}
			}()
			time.Sleep(grayPause) // the pause
			to := time.Now()
			if err := proc.Signal(syscall.SIGCONT); err != nil {
				b.Fatal(err)
			}
			time.Sleep(grayAfter) // publishing goes on after the fault
			cancel()
			l.report(b, "paused", from, to)
		}
	})
	b.Run("fault=low-disk", func(b *testing.B) {
		for b.Loop() {
			c := prepareCluster(b, 3)
			for id := 1; id <= 3; id++ {
				var extra []string
				if id == 3 {
					extra = []string{"--min-free-disk", "1000000GiB"}
				}
				c.start(b, id, extra...)
			}
			ctx, cancel := context.WithCancel(context.Background())
			createTopic(b, c.Addrs[0], "gl", 3, 3)
			l := startGrayLoad(ctx, c.Addrs, "gl")
			time.Sleep(grayBefore + grayPause + grayAfter) // the whole run is "during"
			cancel()
			l.report(b, "low-disk", time.Time{}, time.Time{})
		}
	})
}
