package sched

import (
	"context"
	"runtime/metrics"
	"time"
)

// Governor lowers the catch-up budget while live work waits to run. Go's
// scheduler records how long every goroutine stayed runnable before it ran
// (/sched/latencies:seconds), the delay live work pays for a busy node
// whatever keeps it busy (catch-up units, the HTTP/2 writes they cause,
// the garbage they make); Delays add delays seen by live work itself, such
// as the raft loop's, which also show other processes taking the machine.
// Every period the governor takes the p99 of each over the period, and the
// worst of them: above Target it halves the budget's rate, below it raises
// it by a tenth of Share, up to Share (additive increase, multiplicative
// decrease), and never below Share/64, so replays slow down but never
// stop.
type Governor struct {
	// Target is the p99 delay the node tries to keep. Default 500 µs: on
	// 2 cores, 200 µs cut replays to a third with no better live p99
	// (docs/design.md, Live first).
	Target time.Duration
	// Period is how often the rate is adjusted. Default 100 ms.
	Period time.Duration
	// Delays are more delays of live work to watch besides Go's, such as
	// the raft loop's wake-up delay (raftlog.Host.WakeDelays), which also
	// shows a loop kept off the processors by other processes.
	Delays []Delays
	// Activity are counters of live work the scheduler is not told about
	// (Scheduler.Live), such as the raft host's synced writes: on a
	// follower, replicating the leader's publishes is on their path to an
	// acknowledgement. A period in which one grew counts as live work, so
	// the budget applies.
	Activity []func() uint64
}

// Delays is a cumulative histogram of delays of live work.
type Delays struct {
	// Buckets are the bucket bounds in seconds: bucket i counts delays in
	// [Buckets[i], Buckets[i+1]).
	Buckets []float64
	// Read appends the current counts, one per bucket, to dst.
	Read func(dst []uint64) []uint64
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
	prev := make([][]uint64, len(g.Delays)+1)
	var counts []uint64
	activity := make([]uint64, len(g.Activity))
	for i, count := range g.Activity {
		activity[i] = count()
	}
	t := time.NewTicker(g.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, count := range g.Activity {
			if n := count(); n != activity[i] {
				activity[i] = n
				s.Live()()
			}
		}
		worst, any := 0.0, false
		take := func(i int, counts []uint64, buckets []float64) {
			if q, ok := deltaQuantile(counts, prev[i], buckets, 0.99); ok {
				worst, any = max(worst, q), true
			}
			prev[i] = append(prev[i][:0], counts...)
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindFloat64Histogram {
			h := sample[0].Value.Float64Histogram()
			take(0, h.Counts, h.Buckets)
		}
		for i, d := range g.Delays {
			counts = d.Read(counts[:0])
			take(i+1, counts, d.Buckets)
		}
		if any {
			s.observe(time.Duration(worst*float64(time.Second)), g.Target)
		}
	}
}

// observe applies one period's p99 delay.
func (s *Scheduler) observe(p99, target time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.mu.core
	if c.quiet(s.now()) {
		// No live work: the delays are catch-up work's own, and the
		// budget does not apply anyway; live work that comes back starts
		// from the whole share.
		c.setFactor(1, s.now())
		s.dispatchLocked()
		return
	}
	f := c.factor
	if p99 > target {
		f /= 2
	} else {
		f += 0.1
	}
	c.setFactor(f, s.now())
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
