package client

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Position is where a subscription starts (From) or stops (Until). Build
// one with Earliest, Latest, Offset, Time, MessageID, RecordsBack, TimeBack,
// ResumeToken or End, or parse the CLI syntax with ParsePosition.
type Position struct {
	kind   posKind
	offset uint64
	t      time.Time
	s      string
	d      time.Duration
	shift  int64
}

type posKind int

const (
	posEarliest posKind = iota
	posLatest
	posOffset
	posTime
	posMessageID
	posRecordsBack
	posTimeBack
	posToken
	posEnd
	posShift
	posKeyVersion
)

// Earliest is the first stored record of each partition.
func Earliest() Position { return Position{kind: posEarliest} }

// Latest is the end of each partition: only new records.
func Latest() Position { return Position{kind: posLatest} }

// Offset is an offset in each selected partition.
func Offset(n uint64) Position { return Position{kind: posOffset, offset: n} }

// Time is the first record appended at or after t (exact).
func Time(t time.Time) Position { return Position{kind: posTime, t: t} }

// MessageID is the record with this ID (other partitions: the first record
// at or after its append time).
func MessageID(id string) Position { return Position{kind: posMessageID, s: id} }

// RecordsBack is n records before the end of each partition.
func RecordsBack(n uint64) Position { return Position{kind: posRecordsBack, offset: n} }

// TimeBack is the first record appended at or after now minus d.
func TimeBack(d time.Duration) Position { return Position{kind: posTimeBack, d: d} }

// ResumeToken continues where an earlier stream's token says.
func ResumeToken(tok string) Position { return Position{kind: posToken, s: tok} }

// End, as a stop, is the end of each partition when the stream starts.
func End() Position { return Position{kind: posEnd} }

// AsOffset returns p's offset when p is an offset (Offset).
func (p Position) AsOffset() (uint64, bool) { return p.offset, p.kind == posOffset }

// AsRecordsBack returns p's count when p is N records back (RecordsBack).
func (p Position) AsRecordsBack() (uint64, bool) { return p.offset, p.kind == posRecordsBack }

// AsTime returns p's time when p is a time (Time).
func (p Position) AsTime() (time.Time, bool) { return p.t, p.kind == posTime }

// KeyVersion is the record of version v of the stream's key (a start of
// a subscription with Key).
func KeyVersion(v uint64) Position { return Position{kind: posKeyVersion, offset: v} }

// Shift, as a group reset target, moves each committed offset by n records
// (negative: re-read n records).
func Shift(n int64) Position { return Position{kind: posShift, shift: n} }

func errNotAResetTarget(p Position) error {
	return fmt.Errorf("%s is not a reset target (use earliest, latest, N, @time, -duration, -N, +N or id:)", p)
}

// String renders p in the CLI syntax.
func (p Position) String() string {
	switch p.kind {
	case posEarliest:
		return "earliest"
	case posLatest:
		return "latest"
	case posOffset:
		return strconv.FormatUint(p.offset, 10)
	case posTime:
		return "@" + p.t.UTC().Format(time.RFC3339Nano)
	case posMessageID:
		return "id:" + p.s
	case posRecordsBack:
		return "-" + strconv.FormatUint(p.offset, 10)
	case posTimeBack:
		return "-" + p.d.String()
	case posToken:
		return "token:" + p.s
	case posEnd:
		return "end"
	case posShift:
		return fmt.Sprintf("%+d", p.shift)
	case posKeyVersion:
		return "v:" + strconv.FormatUint(p.offset, 10)
	}
	return "?"
}

// ParsePosition parses the CLI syntax:
//
//	earliest | latest | end | now      (end and now: the end as of the start)
//	N                                  an offset
//	@2026-11-30T10:00:00Z | @<unix-ms> a time (RFC 3339, or Unix milliseconds)
//	-1h | -15m | -7d                   a duration ago
//	-N                                 N records back from the end
//	id:<message-id>                    a message ID
//	token:<resume-token>               a resume token
//	v:N                                version N of the stream's key
func ParsePosition(s string) (Position, error) {
	switch s {
	case "earliest", "beginning", "first":
		return Earliest(), nil
	case "latest":
		return Latest(), nil
	case "end", "now":
		return End(), nil
	case "":
		return Position{}, fmt.Errorf("empty position")
	}
	switch {
	case strings.HasPrefix(s, "+"):
		n, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil {
			return Position{}, fmt.Errorf("position %q: +N shifts a group's offsets forward by N records", s)
		}
		return Shift(n), nil
	case strings.HasPrefix(s, "id:"):
		return MessageID(s[3:]), nil
	case strings.HasPrefix(s, "token:"):
		return ResumeToken(s[6:]), nil
	case strings.HasPrefix(s, "v:"):
		n, err := strconv.ParseUint(s[2:], 10, 64)
		if err != nil {
			return Position{}, fmt.Errorf("position %q: v:N is a key version (0, 1, ...)", s)
		}
		return KeyVersion(n), nil
	case strings.HasPrefix(s, "@"):
		v := s[1:]
		t, err := time.Parse(time.RFC3339Nano, v)
		if ms, msErr := strconv.ParseInt(v, 10, 64); msErr == nil {
			t, err = time.UnixMilli(ms), nil
		}
		if err != nil {
			return Position{}, fmt.Errorf("position %q: a time is @RFC3339 (@2026-11-30T10:00:00Z) or @<unix-ms>", s)
		}
		// The API's timestamps span the years 1 to 9999; the server takes
		// every such time faithfully (after or before every record is a
		// valid answer), so only times beyond it are refused, here rather
		// than as the server's less specific InvalidArgument.
		if timestamppb.New(t).CheckValid() != nil {
			return Position{}, fmt.Errorf("position %q: a time must lie in the years 0001 to 9999", s)
		}
		return Time(t), nil
	case strings.HasPrefix(s, "-"):
		v := s[1:]
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			return RecordsBack(n), nil
		}
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return Position{}, fmt.Errorf("position %q: -N is records back, -1h/-15m/-7d a duration ago", s)
		}
		return TimeBack(d), nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("position %q: want earliest, latest, end, N, @time, -duration, -N, id:<message-id> or token:<resume-token>", s)
	}
	return Offset(n), nil
}

// ParseDuration is time.ParseDuration plus a "d" (24 h) unit: "7d",
// "1.5d", "36h", "15m". Like time.ParseDuration it refuses a duration
// beyond about ±292 years (math.MaxInt64 nanoseconds) rather than wrap.
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil {
			return 0, err
		}
		// Compared as floats: converting an out-of-range float to an
		// integer is undefined in Go (it wraps on amd64). 2^63 is exact in
		// a float64, so the bound is.
		ns := n * float64(24*time.Hour)
		if math.IsNaN(ns) || ns >= 1<<63 || ns < -(1<<63) {
			return 0, fmt.Errorf("time: invalid duration %q: out of range", s)
		}
		return time.Duration(ns), nil
	}
	return time.ParseDuration(s)
}

func (p Position) startProto() (*rewindv1.StartPosition, error) {
	sp := &rewindv1.StartPosition{}
	switch p.kind {
	case posEarliest:
		sp.Position = &rewindv1.StartPosition_Earliest{Earliest: true}
	case posLatest:
		sp.Position = &rewindv1.StartPosition_Latest{Latest: true}
	case posOffset:
		sp.Position = &rewindv1.StartPosition_Offset{Offset: p.offset}
	case posTime:
		sp.Position = &rewindv1.StartPosition_Time{Time: timestamppb.New(p.t)}
	case posMessageID:
		sp.Position = &rewindv1.StartPosition_MessageId{MessageId: p.s}
	case posRecordsBack:
		sp.Position = &rewindv1.StartPosition_RecordsBack{RecordsBack: p.offset}
	case posTimeBack:
		sp.Position = &rewindv1.StartPosition_TimeBack{TimeBack: durationpb.New(p.d)}
	case posToken:
		sp.Position = &rewindv1.StartPosition_ResumeToken{ResumeToken: p.s}
	case posKeyVersion:
		sp.Position = &rewindv1.StartPosition_KeyVersion{KeyVersion: p.offset}
	default:
		return nil, fmt.Errorf("%s is not a start position", p)
	}
	return sp, nil
}

func (p Position) stopProto(now time.Time) (*rewindv1.StopPosition, error) {
	sp := &rewindv1.StopPosition{}
	switch p.kind {
	case posEnd, posLatest:
		sp.Position = &rewindv1.StopPosition_End{End: true}
	case posOffset:
		sp.Position = &rewindv1.StopPosition_Offset{Offset: p.offset}
	case posTime:
		sp.Position = &rewindv1.StopPosition_Time{Time: timestamppb.New(p.t)}
	case posTimeBack:
		sp.Position = &rewindv1.StopPosition_Time{Time: timestamppb.New(now.Add(-p.d))}
	case posMessageID:
		sp.Position = &rewindv1.StopPosition_MessageId{MessageId: p.s}
	default:
		return nil, fmt.Errorf("%s is not a stop position (use end, N, @time, -duration or id:)", p)
	}
	return sp, nil
}
