package api

import (
	"math"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// The instants an int64 of Unix nanoseconds can hold: about 1677-09-21 to
// 2262-04-11.
var (
	minNanoTime = time.Unix(0, math.MinInt64)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

// unixNanos converts a request's timestamp to the Unix nanoseconds the
// broker works in. A protobuf Timestamp spans the years 1 to 9999, wider
// than int64 nanoseconds, so the conversion saturates instead of wrapping:
// a time after 2262 becomes math.MaxInt64 (after every record: a start
// there waits at the end, a stop there is no bound, which is what
// cursor.NoTime means), a time before 1678 math.MinInt64 (before every
// record: a start there is the earliest, a stop there an empty range). The
// mapping is monotonic. An invalid timestamp (nanos outside [0, 1e9), a
// time outside the years 1 to 9999) is an error.
func unixNanos(ts *timestamppb.Timestamp) (int64, error) {
	if err := ts.CheckValid(); err != nil {
		return 0, err
	}
	t := ts.AsTime()
	switch {
	case t.After(maxNanoTime):
		return math.MaxInt64, nil
	case t.Before(minNanoTime):
		return math.MinInt64, nil
	}
	return t.UnixNano(), nil
}
