package raftlog

import (
	"sync/atomic"
	"time"
)

// WakeDelayBuckets are the bounds, in seconds, of the buckets WakeDelays
// counts in: bucket i holds delays in [WakeDelayBuckets[i],
// WakeDelayBuckets[i+1]). Powers of two from 1 µs to about 1 s.
var WakeDelayBuckets = func() []float64 {
	b := []float64{0}
	for d := time.Microsecond; d <= time.Second; d *= 2 {
		b = append(b, d.Seconds())
	}
	return b
}()

// wakeDelays counts the delays between a wake of the idle loop and the
// loop running: how long the host's goroutine waited for a processor.
type wakeDelays struct {
	counts [40]atomic.Uint64 // len(WakeDelayBuckets)-1 used
}

func (w *wakeDelays) add(d time.Duration) {
	s := d.Seconds()
	i := len(WakeDelayBuckets) - 2
	for j := 1; j < len(WakeDelayBuckets); j++ {
		if s < WakeDelayBuckets[j] {
			i = j - 1
			break
		}
	}
	w.counts[i].Add(1)
}

// WakeDelays appends to dst, for each bucket of WakeDelayBuckets, how
// many times the host's loop, idle, was woken (a proposal, a message, an
// operation) and took that long to start running. It is the scheduling
// delay of the one goroutine every publish goes through: near zero on an
// idle machine, and what grows when something else keeps the processors
// busy. Cumulative since Open.
func (h *Host) WakeDelays(dst []uint64) []uint64 {
	for i := range len(WakeDelayBuckets) - 1 {
		dst = append(dst, h.wakes.counts[i].Load())
	}
	return dst
}
