package api

import (
	"math"
	"math/big"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// exactNanos is ts in Unix nanoseconds without overflow.
func exactNanos(ts *timestamppb.Timestamp) *big.Int {
	n := big.NewInt(ts.GetSeconds())
	n.Mul(n, big.NewInt(1e9))
	return n.Add(n, big.NewInt(int64(ts.GetNanos())))
}

// FuzzUnixNanos checks the timestamp conversion against exact arithmetic:
// exact inside the int64 range, saturated outside it, monotonic, never
// wrapped; invalid timestamps are errors. The seeds (the edges of both
// ranges, and the times of issue 13) run as a plain test.
func FuzzUnixNanos(f *testing.F) {
	const minSec, maxSec = -62135596800, 253402300799 // 0001-01-01, 9999-12-31T23:59:59
	for _, s := range [][4]int64{
		{0, 0, 0, 1},
		{maxSec, 999_999_999, minSec, 0},                 // the two ends of a Timestamp
		{253402300799, 0, -11676096000, 0},               // @9999-12-31T23:59:59Z, @1600-01-01
		{9223372036, 854775807, 9223372036, 854775808},   // the last nanosecond of int64, and one past
		{-9223372037, 145224192, -9223372037, 145224191}, // the first nanosecond of int64, and one before
		{1764583200, 0, 1764583200, 1},                   // an ordinary time
		{-1, 999_999_999, 0, 0},                          // across the epoch
		{1, -1, 1, 1_000_000_000},                        // invalid nanos
		{maxSec + 1, 0, minSec - 1, 0},                   // outside a Timestamp's years
		{math.MaxInt64, 0, math.MinInt64, 0},
	} {
		f.Add(s[0], int32(s[1]), s[2], int32(s[3]))
	}
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	f.Fuzz(func(t *testing.T, s1 int64, n1 int32, s2 int64, n2 int32) {
		a := &timestamppb.Timestamp{Seconds: s1, Nanos: n1}
		b := &timestamppb.Timestamp{Seconds: s2, Nanos: n2}
		ga, errA := unixNanos(a)
		gb, errB := unixNanos(b)
		for _, c := range []struct {
			ts  *timestamppb.Timestamp
			got int64
			err error
		}{{a, ga, errA}, {b, gb, errB}} {
			if (c.ts.CheckValid() != nil) != (c.err != nil) {
				t.Fatalf("%v: error %v, CheckValid %v", c.ts, c.err, c.ts.CheckValid())
			}
			if c.err != nil {
				continue
			}
			exact := exactNanos(c.ts)
			var want int64
			switch {
			case exact.Cmp(hi) > 0:
				want = math.MaxInt64
			case exact.Cmp(lo) < 0:
				want = math.MinInt64
			default:
				want = exact.Int64()
			}
			if c.got != want {
				t.Fatalf("%v (%s ns): got %d, want %d", c.ts, exact, c.got, want)
			}
		}
		if errA != nil || errB != nil {
			return
		}
		if cmp := exactNanos(a).Cmp(exactNanos(b)); (cmp < 0 && ga > gb) || (cmp > 0 && ga < gb) || (cmp == 0 && ga != gb) {
			t.Fatalf("not monotonic: %v -> %d, %v -> %d", a, ga, b, gb)
		}
	})
}
