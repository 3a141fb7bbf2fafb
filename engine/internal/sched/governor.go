package sched

import (
	"context"
	"runtime/metrics"
	"time"
)

// Governor lowers the catch-up budget while goroutines wait to run: Go's
// scheduler records how long every goroutine stayed runnable before it ran
// (/sched/latencies:seconds), which is the delay live work pays for a busy
// node, whatever keeps it busy (catch-up units, the HTTP/2 writes they
// cause, the garbage they make, other processes on the machine). Every
// period the governor takes the p99 of that delay over the period: above
// Target it halves the budget's rate, below it raises the rate by a tenth
// of Share, up to Share (additive increase, multiplicative decrease), and
// never below Share/64, so replays slow down but never stop.
type Governor struct {
	// Target is the p99 scheduling delay the node tries to keep. Default
	// 500 µs (on 2 cores: 200 µs cut replays to a third for no better
	// p99, 1 ms let the p99 rise 1.5x; docs/benchmarks.md).
	Target time.Duration
	// Period is how often the rate is adjusted. Default 100 ms.
	Period time.Duration
}

// Run adjusts s until ctx ends.
func (g Governor) Run(ctx context.Context, s *Scheduler) {
	if g.Target == 0 {
		g.Target = 500 * time.Microsecond
	}
	if g.Period == 0 {
		g.Period = 100 * time.Millisecond
	}
	sample := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	var prev []uint64
	t := time.NewTicker(g.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
			return
		}
		h := sample[0].Value.Float64Histogram()
		p99, ok := deltaQuantile(h.Counts, prev, h.Buckets, 0.99)
		prev = append(prev[:0], h.Counts...)
		if !ok {
			continue
		}
		s.observe(time.Duration(p99*float64(time.Second)), g.Target)
	}
}

// observe applies one period's p99 delay.
func (s *Scheduler) observe(p99, target time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.mu.core
	f := c.factor
	if p99 > target {
		f /= 2
	} else {
		f += 0.1
	}
	c.setFactor(f, s.now())
	c.st.Factor = c.factor
	s.dispatchLocked()
}

// deltaQuantile returns the q-quantile of the samples counted since prev
// (the lower bound of its bucket), and false when there are none.
func deltaQuantile(counts, prev []uint64, buckets []float64, q float64) (float64, bool) {
	var total uint64
	for i, n := range counts {
		if i < len(prev) {
			n -= prev[i]
		}
		total += n
	}
	if total == 0 {
		return 0, false
	}
	rank := uint64(q * float64(total))
	var seen uint64
	for i, n := range counts {
		if i < len(prev) {
			n -= prev[i]
		}
		seen += n
		if seen > rank {
			return max(buckets[i], 0), true
		}
	}
	return max(buckets[len(buckets)-2], 0), true
}
