// Package cursor resolves where a stream starts and stops in each partition
// and holds the per-partition position a stream advances. It is pure logic
// over a Log (a partition's visible bounds and indexes): it owns no
// goroutines and reads no clock (the caller passes now), so its behaviour is
// tested as scripts (testdata/).
//
// Ranges are half-open everywhere: a start position is delivered, a stop
// position is not, so one range's stop is the next range's start.
package cursor

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/resume"
)

// ErrInvalid is returned for a position that cannot apply to this stream (a
// message ID or token of another topic, a partition not in the stream).
var ErrInvalid = errors.New("cursor: invalid position")

// OutOfRangeError says that a requested offset is not in a partition's
// stored range.
type OutOfRangeError struct {
	Partition    uint32
	Requested    uint64
	LogStart     uint64
	End          uint64
	EarliestTime int64 // append time of the first stored record; 0 if empty
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("offset %d is outside partition %d's range [%d, %d]", e.Requested, e.Partition, e.LogStart, e.End)
}

// Log is what resolution needs from a partition.
type Log interface {
	Index() uint32
	Bounds() partition.State
	// SeekTime returns the first offset with append time >= t (the end if
	// none).
	SeekTime(t int64) (uint64, error)
	// TimeOf returns the append time of a stored record.
	TimeOf(offset uint64) (int64, error)
}

// StartKind selects how a start position is given.
type StartKind int

// Start kinds.
const (
	Earliest StartKind = iota
	Latest
	AtOffset
	AtTime
	AtMessageID
	RecordsBack
	TimeBack
	FromToken
)

// Start is a requested start position.
type Start struct {
	Kind   StartKind
	Offset uint64        // AtOffset
	Time   int64         // AtTime, Unix nanoseconds
	ID     msgid.ID      // AtMessageID
	N      uint64        // RecordsBack
	Back   time.Duration // TimeBack
	Token  resume.Token  // FromToken
	// Clamp: an offset or token position below the log start (removed by
	// retention) starts at the log start, marked Clamped, instead of
	// failing with OutOfRange.
	Clamp bool
}

// StopKind selects how a stop position is given.
type StopKind int

// Stop kinds.
const (
	Follow StopKind = iota // no stop
	BeforeOffset
	BeforeTime
	BeforeMessageID
	AtEnd // the end of each partition when the stream starts
)

// Stop is a requested stop position.
type Stop struct {
	Kind   StopKind
	Offset uint64
	Time   int64
	ID     msgid.ID
}

// NoOffset and NoTime mean "no bound".
const (
	NoOffset = math.MaxUint64
	NoTime   = math.MaxInt64
)

// Cursor is a stream's position in one partition.
type Cursor struct {
	Partition uint32
	// Next is the next offset the stream looks at.
	Next uint64
	// MinTime skips records appended before it (a start time after the
	// newest record when the stream began). math.MinInt64 if none.
	MinTime int64
	// StopOffset and StopTime end the cursor before the first record at or
	// past them. NoOffset and NoTime mean no bound.
	StopOffset uint64
	StopTime   int64
	// CaughtUp is set once the cursor first reached the partition's end.
	CaughtUp bool
	// Done is set once the cursor reached its stop.
	Done bool
	// Clamped says the requested start lay below the log start and the
	// cursor starts at the log start instead.
	Clamped bool
}

// pinned is a selected partition's log with its bounds read once: the start
// and the stop of one stream see the same end ("the last 5 records, to the
// end" is 5 records even while publishes land).
type pinned struct {
	Log
	st partition.State
}

func (p pinned) Bounds() partition.State { return p.st }

// Resolve returns one cursor per selected partition (in the order given)
// for start and stop. topic holds every partition of the topic, indexed by
// partition number (a message ID may name a partition the stream does not
// read: its time still positions the others). now is the broker clock in
// Unix nanoseconds.
func Resolve(topicID uint64, topic []Log, selected []uint32, start Start, stop Stop, now int64) ([]Cursor, error) {
	logs := make([]Log, len(selected))
	cs := make([]Cursor, len(selected))
	for i, p := range selected {
		if int(p) >= len(topic) {
			return nil, fmt.Errorf("%w: partition %d does not exist (the topic has %d)", ErrInvalid, p, len(topic))
		}
		logs[i] = pinned{Log: topic[p], st: topic[p].Bounds()}
		cs[i] = Cursor{Partition: p, MinTime: math.MinInt64, StopOffset: NoOffset, StopTime: NoTime}
	}
	if err := resolveStart(topicID, topic, logs, start, now, cs); err != nil {
		return nil, err
	}
	if err := resolveStop(topicID, topic, logs, stop, cs); err != nil {
		return nil, err
	}
	for i := range cs {
		if cs[i].Next >= cs[i].StopOffset {
			cs[i].Done = true
		}
	}
	return cs, nil
}

func resolveStart(topicID uint64, topic, logs []Log, s Start, now int64, cs []Cursor) error {
	atTime := func(t int64) error {
		for i, l := range logs {
			off, err := l.SeekTime(t)
			if err != nil {
				return err
			}
			cs[i].Next, cs[i].MinTime = off, t
		}
		return nil
	}
	switch s.Kind {
	case Earliest:
		for i, l := range logs {
			cs[i].Next = l.Bounds().LogStart
		}
	case Latest:
		for i, l := range logs {
			cs[i].Next = l.Bounds().Next
		}
	case AtOffset:
		for i, l := range logs {
			if err := startAt(&cs[i], l, s.Offset, s.Clamp); err != nil {
				return err
			}
		}
	case AtTime:
		return atTime(s.Time)
	case TimeBack:
		if s.Back < 0 {
			return fmt.Errorf("%w: negative duration %s", ErrInvalid, s.Back)
		}
		return atTime(now - int64(s.Back))
	case RecordsBack:
		for i, l := range logs {
			b := l.Bounds()
			cs[i].Next = b.Next - min(s.N, b.Next-b.LogStart)
		}
	case AtMessageID:
		t, err := idTime(topicID, topic, s.ID)
		if err != nil {
			return err
		}
		for i, l := range logs {
			if l.Index() == s.ID.Partition {
				cs[i].Next = s.ID.Offset
				continue
			}
			bound := tieBreak(t, l.Index(), s.ID.Partition)
			off, err := l.SeekTime(bound)
			if err != nil {
				return err
			}
			cs[i].Next, cs[i].MinTime = off, bound
		}
	case FromToken:
		if s.Token.TopicID != topicID {
			return fmt.Errorf("%w: resume token belongs to another topic (id %d, this one is %d)", ErrInvalid, s.Token.TopicID, topicID)
		}
		for i, l := range logs {
			j := -1
			for k, p := range s.Token.Positions {
				if p.Partition == l.Index() {
					j = k
				}
			}
			if j < 0 {
				return fmt.Errorf("%w: resume token has no position for partition %d", ErrInvalid, l.Index())
			}
			if err := startAt(&cs[i], l, s.Token.Positions[j].Next, s.Clamp); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: start kind %d", ErrInvalid, s.Kind)
	}
	return nil
}

func resolveStop(topicID uint64, topic, logs []Log, s Stop, cs []Cursor) error {
	switch s.Kind {
	case Follow:
	case BeforeOffset:
		for i := range cs {
			cs[i].StopOffset = s.Offset
		}
	case BeforeTime:
		for i := range cs {
			cs[i].StopTime = s.Time
		}
	case AtEnd:
		for i, l := range logs {
			cs[i].StopOffset = l.Bounds().Next
		}
	case BeforeMessageID:
		t, err := idTime(topicID, topic, s.ID)
		if err != nil {
			return err
		}
		for i, l := range logs {
			if l.Index() == s.ID.Partition {
				cs[i].StopOffset = s.ID.Offset
				continue
			}
			cs[i].StopTime = tieBreak(t, l.Index(), s.ID.Partition)
		}
	default:
		return fmt.Errorf("%w: stop kind %d", ErrInvalid, s.Kind)
	}
	return nil
}

// tieBreak is the time bound a message ID at time t in partition idPart puts
// on partition part. A message ID names a point in the order (append time,
// partition, offset) over the whole topic: a start delivers every record at
// or after the point, a stop every record before it. In another partition
// that is "append time >= t", except that a record with exactly time t in a
// lower-numbered partition comes before the point, so the bound there is
// t+1. Without the tie-break, consecutive message-ID ranges whose cuts share
// an append time would overlap.
func tieBreak(t int64, part, idPart uint32) int64 {
	if part < idPart && t < NoTime {
		return t + 1
	}
	return t
}

// idTime returns the append time of the record a message ID names,
// checking that it belongs to this topic and is stored.
func idTime(topicID uint64, topic []Log, id msgid.ID) (int64, error) {
	if id.TopicID != topicID {
		return 0, fmt.Errorf("%w: message ID %s belongs to another topic (id %d; this topic's id is %d)", ErrInvalid, id, id.TopicID, topicID)
	}
	if int(id.Partition) >= len(topic) {
		return 0, fmt.Errorf("%w: message ID %s names partition %d, which does not exist", ErrInvalid, id, id.Partition)
	}
	l := topic[id.Partition]
	if b := l.Bounds(); id.Offset < b.LogStart || id.Offset >= b.Next {
		return 0, outOfRange(l, id.Offset)
	}
	return l.TimeOf(id.Offset)
}

// startAt starts c at off, or at the log start (marked) when off is below it
// and clamp is set.
func startAt(c *Cursor, l Log, off uint64, clamp bool) error {
	if b := l.Bounds(); clamp && off < b.LogStart {
		c.Next, c.Clamped = b.LogStart, true
		return nil
	}
	if err := checkOffset(l, off); err != nil {
		return err
	}
	c.Next = off
	return nil
}

func checkOffset(l Log, off uint64) error {
	b := l.Bounds()
	if off < b.LogStart || off > b.Next {
		return outOfRange(l, off)
	}
	return nil
}

func outOfRange(l Log, off uint64) error {
	b := l.Bounds()
	e := &OutOfRangeError{Partition: l.Index(), Requested: off, LogStart: b.LogStart, End: b.Next}
	if !b.Empty() {
		e.EarliestTime = b.FirstTime
	}
	return e
}

// Admit decides about one record of a batch: deliver reports whether the
// stream delivers it, stop whether the cursor is done before it. It does not
// advance the cursor.
func (c *Cursor) Admit(offset uint64, appendTime int64) (deliver, stop bool) {
	if offset >= c.StopOffset || appendTime >= c.StopTime {
		return false, true
	}
	return offset >= c.Next && appendTime >= c.MinTime, false
}

// Advance moves the cursor past offset.
func (c *Cursor) Advance(offset uint64) {
	if offset+1 > c.Next {
		c.Next = offset + 1
	}
}

// Finish marks the cursor done (its stop was reached before offset next).
func (c *Cursor) Finish(next uint64) {
	c.Done = true
	if next > c.Next {
		c.Next = next
	}
}
