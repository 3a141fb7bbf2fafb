package engine_test

// BenchmarkGrayLatencyCutLink: what a publisher sees of a link cut between
// a member it uses and a partition's leader (the in-process cluster of
// faults_test.go, raft at its production tick). Figures go to
// docs/benchmarks.md, "Gray failures":
//
//	go test -run XXX -bench BenchmarkGrayLatencyCutLink -benchtime 1x -count 1 -v ./engine/

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/sdk/client"
)

// cutPub is one publish of BenchmarkGrayLatencyCutLink.
type cutPub struct {
	sent time.Time
	took time.Duration
	err  error
	part uint32
}

// cutLoad is the publishers of BenchmarkGrayLatencyCutLink.
type cutLoad struct {
	mu   sync.Mutex
	pubs []cutPub
	wg   sync.WaitGroup
}

func (l *cutLoad) run(ctx context.Context, addrs string, p int) {
	defer l.wg.Done()
	cl := client.New(addrs)
	for n := 0; ctx.Err() == nil; n++ {
		part := uint32(n % 3)
		g := cutPub{sent: time.Now(), part: part}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, g.err = cl.Publish(pctx, "t", client.Message{Value: []byte("gray"), Partition: &part,
			IdempotencyKey: fmt.Sprintf("cut-%d-%d", p, n)})
		cancel()
		g.took = time.Since(g.sent)
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		l.pubs = append(l.pubs, g)
		l.mu.Unlock()
	}
}

// report reports p50, p99 and max of the acknowledged publishes answered
// before from, in flight at from or sent in [from, to), and sent from to
// on, and the failures of each phase.
func (l *cutLoad) report(b *testing.B, from, to time.Time) {
	names := []string{"before", "during", "after"}
	lats := make([][]time.Duration, 3)
	fails := make([]int, 3)
	for _, g := range l.pubs {
		ph := 1
		if g.sent.Add(g.took).Before(from) {
			ph = 0
		} else if !g.sent.Before(to) {
			ph = 2
		}
		if g.took > time.Second {
			b.Logf("a publish to partition %d sent %s after the cut took %s (error: %v)", g.part,
				g.sent.Sub(from).Round(time.Millisecond), g.took.Round(time.Millisecond), g.err)
		}
		if g.err != nil {
			fails[ph]++
			continue
		}
		lats[ph] = append(lats[ph], g.took)
	}
	for i, name := range names {
		slices.Sort(lats[i])
		p50, p99, top := quantile(lats[i], 0.5), quantile(lats[i], 0.99), quantile(lats[i], 1)
		b.ReportMetric(float64(len(lats[i])), "cut-"+name+"-acked")
		b.ReportMetric(msOf(p50), "cut-"+name+"-p50-ms")
		b.ReportMetric(msOf(p99), "cut-"+name+"-p99-ms")
		b.ReportMetric(msOf(top), "cut-"+name+"-max-ms")
		b.ReportMetric(float64(fails[i]), "cut-"+name+"-failed")
		b.Logf("cut %s: %d acked, p50 %s p99 %s max %s; %d failed", name, len(lats[i]),
			p50.Round(time.Microsecond), p99.Round(time.Microsecond), top.Round(time.Millisecond), fails[i])
	}
}

// quantile returns the q quantile of sorted (0 when empty).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkGrayLatencyCutLink runs three closed-loop publishers of single
// records with idempotency keys, round robin over the three partitions,
// each through a Go client given every node (with the default options:
// 2 s attempts, 50 ms backoff), the node cut off listed first so that the
// clients use it. After 4 s the link between that node and partition 1's
// leader is cut both ways for 10 s, then healed for 6 s; the latency of
// acknowledged publishes is reported by when they were sent.
func BenchmarkGrayLatencyCutLink(b *testing.B) {
	for b.Loop() {
		c := startFaultCluster(b, productionTick)
		leader := c.settle(b)
		cutOff, other := others(leader)
		addrs := fmt.Sprintf("%s,%s,%s", c.addrs[cutOff], c.addrs[other], c.addrs[leader])
		ctx, cancel := context.WithCancel(context.Background())
		l := &cutLoad{}
		for p := range 3 {
			l.wg.Add(1)
			go l.run(ctx, addrs, p)
		}
		time.Sleep(4 * time.Second) // steady publishing before the fault
		from := time.Now()
		c.net.setCut(cutOff, leader, true)
		time.Sleep(10 * time.Second) // the cut
		to := time.Now()
		c.net.setCut(cutOff, leader, false)
		time.Sleep(6 * time.Second) // publishing goes on after the fault
		cancel()
		l.wg.Wait()
		l.report(b, from, to)
	}
}

func productionTick(cfg *engine.Config) { cfg.Cluster.TickInterval = 100 * time.Millisecond }
