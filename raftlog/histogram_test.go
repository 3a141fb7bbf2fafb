package raftlog

import (
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{0, 500 * time.Nanosecond, time.Microsecond, 3 * time.Microsecond, time.Millisecond, time.Hour} {
		h.Add(d)
	}
	counts := h.Counts(nil)
	if len(counts) != len(DelayBuckets)-1 {
		t.Fatalf("%d counts for %d buckets", len(counts), len(DelayBuckets)-1)
	}
	at := func(d time.Duration) int {
		for i := range counts {
			if d.Seconds() >= DelayBuckets[i] && (i == len(counts)-1 || d.Seconds() < DelayBuckets[i+1]) {
				return i
			}
		}
		return -1
	}
	want := make([]uint64, len(counts))
	for _, d := range []time.Duration{0, 500 * time.Nanosecond, time.Microsecond, 3 * time.Microsecond, time.Millisecond, time.Hour} {
		want[at(d)]++
	}
	for i := range counts {
		if counts[i] != want[i] {
			t.Errorf("bucket [%g, ...): %d, want %d", DelayBuckets[i], counts[i], want[i])
		}
	}
	// 0 and 500 ns below 1 µs; 1 µs in [1, 2) µs; an hour in the last.
	if counts[0] != 2 || counts[1] != 1 || counts[len(counts)-1] != 1 {
		t.Errorf("counts %v", counts)
	}
	if got, want := h.Sum(), 500*time.Nanosecond+time.Microsecond+3*time.Microsecond+time.Millisecond+time.Hour; got != want {
		t.Errorf("sum %v, want %v", got, want)
	}
}
