package raftlog

import (
	"sync/atomic"
	"time"
)

// DelayBuckets are the bucket bounds, in seconds, of every Histogram:
// bucket i counts durations in [DelayBuckets[i], DelayBuckets[i+1]).
// Powers of two from 1 µs to about 1 s; the last bucket also takes
// anything longer.
var DelayBuckets = func() []float64 {
	b := []float64{0}
	for d := time.Microsecond; d <= time.Second; d *= 2 {
		b = append(b, d.Seconds())
	}
	return b
}()

// Histogram counts durations in DelayBuckets, without locks. The zero
// value is ready; safe for concurrent use.
type Histogram struct {
	counts [32]atomic.Uint64 // len(DelayBuckets)-1 used
	sum    atomic.Int64      // nanoseconds
}

// Add counts d.
func (h *Histogram) Add(d time.Duration) {
	s := d.Seconds()
	i := len(DelayBuckets) - 2
	for j := 1; j < len(DelayBuckets); j++ {
		if s < DelayBuckets[j] {
			i = j - 1
			break
		}
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// Counts appends the count of each bucket to dst (cumulative since the
// histogram was made, not per bucket bound).
func (h *Histogram) Counts(dst []uint64) []uint64 {
	for i := range len(DelayBuckets) - 1 {
		dst = append(dst, h.counts[i].Load())
	}
	return dst
}

// Count returns how many durations were counted.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range len(DelayBuckets) - 1 {
		n += h.counts[i].Load()
	}
	return n
}

// Sum returns the total of the durations counted.
func (h *Histogram) Sum() time.Duration { return time.Duration(h.sum.Load()) }

// WakeDelays is how long the host's loop, idle, took to start running
// after it was woken (a proposal, a message, an operation): the scheduling
// delay of the one goroutine every publish goes through, near zero on an
// idle machine and what grows when something else keeps the processors
// busy.
func (h *Host) WakeDelays() *Histogram { return &h.wakes }

// SyncDelays is how long each pass's write took when it had to be synced
// to disk (new entries, votes): the fsync every acknowledgement waits for,
// plus Pebble's commit pipeline.
func (h *Host) SyncDelays() *Histogram { return &h.syncs }
