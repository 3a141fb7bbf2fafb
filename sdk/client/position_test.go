package client

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestParsePositionTimesAreFaithful: a time far in the future or the past
// reaches the server as the same instant (the proto Timestamp has the range
// of the years 1 to 9999); times beyond that range are refused here.
func TestParsePositionTimesAreFaithful(t *testing.T) {
	for _, tc := range []struct {
		in      string
		seconds int64
		nanos   int32
	}{
		{"@9999-12-31T23:59:59Z", 253402300799, 0},
		{"@9999-12-31T23:59:59.999999999Z", 253402300799, 999999999},
		{"@1600-01-01T00:00:00Z", -11676096000, 0},
		{"@0001-01-01T00:00:00Z", -62135596800, 0},
		{"@2262-04-12T00:00:00Z", 9223372800, 0},
		{"@253402300799999", 253402300799, 999000000}, // Unix ms, the last ms of 9999
		{"@-11676096000000", -11676096000, 0},         // Unix ms, 1600
		{"@-62135596800000", -62135596800, 0},         // Unix ms, year 1
		{"@1764583200000", 1764583200, 0},             // Unix ms, 2025-12-01T10:00:00Z
		{"@1764583200001", 1764583200, 1000000},       // one ms later
		{"@-1", -1, 999000000},                        // one ms before the epoch
		{"@1969-12-31T23:59:59.999Z", -1, 999000000},  // the same as RFC 3339
	} {
		p, err := ParsePosition(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		for _, ts := range []*timestamppb.Timestamp{mustStart(t, p).GetTime(), mustStop(t, p).GetTime()} {
			if ts.GetSeconds() != tc.seconds || ts.GetNanos() != tc.nanos {
				t.Errorf("%s: sent %d s %d ns, want %d s %d ns", tc.in, ts.GetSeconds(), ts.GetNanos(), tc.seconds, tc.nanos)
			}
		}
	}
	for _, in := range []string{"@253402300800000", "@-62135596800001", "@9223372036854775807", "@-9223372036854775808"} {
		if _, err := ParsePosition(in); err == nil || !strings.Contains(err.Error(), "0001 to 9999") {
			t.Errorf("%s: got %v, want an error about the years 0001 to 9999", in, err)
		}
	}
}

func mustStart(t *testing.T, p Position) interface {
	GetTime() *timestamppb.Timestamp
} {
	t.Helper()
	sp, err := p.startProto()
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func mustStop(t *testing.T, p Position) interface {
	GetTime() *timestamppb.Timestamp
} {
	t.Helper()
	sp, err := p.stopProto(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestParseDurationDoesNotWrap: a day count beyond the range of
// time.Duration is an error, not a wrapped (negative or small) duration.
func TestParseDurationDoesNotWrap(t *testing.T) {
	for _, in := range []string{"106752d", "1e10d", "-1e10d", "infd", "-infd", "nand", "1e400d"} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("%s: got %v, want an error", in, d)
		}
	}
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "1.5d": 36 * time.Hour, "-2d": -48 * time.Hour, "106751d": 106751 * 24 * time.Hour,
	} {
		if d, err := ParseDuration(in); err != nil || d != want {
			t.Errorf("%s: got %v, %v; want %v", in, d, err, want)
		}
	}
	if _, err := ParseDuration("9223372036854775807ns"); err != nil {
		t.Errorf("math.MaxInt64 ns: %v", err)
	}
}
