// Package stream runs one subscription: it drives a cursor per partition
// over partition readers and turns what they read into the events of the
// public API (started, records, progress, caught_up, end).
//
// One goroutine (the caller's) serves a stream. Each round it reads at most
// one event's worth of records per partition, so partitions share the stream
// fairly; when no partition has anything new it waits for a partition to
// append, the progress timer, or the stream to end. Sending blocks when the
// client reads slowly (HTTP/2 flow control), which stops the reading: memory
// per stream is one event, and nothing is ever dropped.
package stream

import (
	"context"
	"errors"
	"time"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/resume"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Sink receives a stream's events. Send must not retain the message after it
// returns: the stream reuses it.
type Sink interface {
	Send(*rewindv1.SubscribeResponse) error
}

// Options tune a stream. Zero values select defaults.
type Options struct {
	// MaxRecordsPerEvent bounds one records event. Default 4096.
	MaxRecordsPerEvent int
	// MaxEventBytes bounds the record data of one event. Default 1 MiB.
	MaxEventBytes int
	// ProgressInterval is the progress (and heartbeat) period. Default 1 s.
	ProgressInterval time.Duration
	// Now is the clock for progress timing and time stops. Default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MaxRecordsPerEvent <= 0 {
		o.MaxRecordsPerEvent = 4096
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = 1 << 20
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// firstEventRecords bounds a partition's first records event.
const firstEventRecords = 32

// ErrStalled is returned when the partitions of a stream stop underneath it.
var ErrStalled = errors.New("stream: partition stopped")

// Run serves one stream until every cursor is done (it then sends an end
// event and returns nil), ctx ends, a partition fails, or the sink fails.
// parts and cursors are parallel, one per partition of the stream.
func Run(ctx context.Context, topicID uint64, parts []*partition.Partition, cursors []cursor.Cursor, opts Options, sink Sink) error {
	s := &streamer{
		topicID: topicID,
		parts:   parts,
		cursors: cursors,
		opts:    opts.withDefaults(),
		sink:    sink,
		readers: make([]*partition.Reader, len(parts)),
		pending: make([]pendingBatch, len(parts)),
		limits:  make([]int, len(parts)),
		notify:  make(chan struct{}, 1),
	}
	for i, p := range parts {
		cancel := p.Notify(s.notify)
		defer cancel()
		s.readers[i] = p.NewReader()
		defer s.readers[i].Close()
	}
	return s.run(ctx)
}

type streamer struct {
	topicID uint64
	parts   []*partition.Partition
	cursors []cursor.Cursor
	opts    Options
	sink    Sink
	readers []*partition.Reader
	pending []pendingBatch
	// limits is each partition's current records-per-event bound. It
	// starts small and doubles with every event up to MaxRecordsPerEvent,
	// so the first records of a replay arrive fast (a small first event to
	// encode, send and decode) and bulk reads still move full events.
	limits []int
	notify chan struct{}

	// Reused for every event (Sink.Send does not retain).
	resp  rewindv1.SubscribeResponse
	recEv rewindv1.RecordsEvent
	slab  []rewindv1.Record
	ptrs  []*rewindv1.Record
	hslab []rewindv1.Header
	hptrs []*rewindv1.Header

	scratch record.Record
}

// pendingBatch is a batch a cursor stopped reading in the middle of, with
// the iterator where it stopped.
type pendingBatch struct {
	b  *partition.Batch
	it record.Iter
}

func (s *streamer) run(ctx context.Context) error {
	if err := s.sendStarted(); err != nil {
		return err
	}
	lagging := 0
	for i := range s.cursors {
		if !s.cursors[i].Done {
			lagging++
		}
	}
	lastProgress := s.opts.Now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		progressed := false
		var done int
		for i := range s.cursors {
			c := &s.cursors[i]
			if c.Done {
				continue
			}
			p := s.parts[i]
			if err := p.Err(); err != nil {
				return errors.Join(ErrStalled, err)
			}
			vis := p.Bounds()
			if c.Next < vis.LogStart {
				return &cursor.OutOfRangeError{Partition: c.Partition, Requested: c.Next, LogStart: vis.LogStart, End: vis.Next, EarliestTime: vis.FirstTime}
			}
			if c.Next < vis.Next || s.pending[i].b != nil {
				before := c.Next
				if err := s.readEvent(i, vis.Next); err != nil {
					return err
				}
				progressed = progressed || c.Next != before
			}
			if c.Done {
				continue
			}
			if c.Next >= c.StopOffset {
				c.Finish(c.StopOffset)
				continue
			}
			if c.Next >= vis.Next && s.pending[i].b == nil {
				if c.StopTime != cursor.NoTime && p.TimeWatermark() >= c.StopTime {
					c.Finish(c.Next)
					continue
				}
				if !c.CaughtUp {
					c.CaughtUp = true
					lagging--
					if err := s.sendCaughtUp(c, lagging); err != nil {
						return err
					}
				}
			}
		}
		done = 0
		for i := range s.cursors {
			if s.cursors[i].Done {
				done++
			}
		}
		if done == len(s.cursors) {
			return s.sendEnd()
		}
		now := s.opts.Now()
		if now.Sub(lastProgress) >= s.opts.ProgressInterval {
			if err := s.sendProgress(); err != nil {
				return err
			}
			lastProgress = now
		}
		if progressed {
			continue
		}
		wait := s.opts.ProgressInterval - now.Sub(lastProgress)
		if t, ok := s.nextStopTime(); ok {
			wait = min(wait, time.Until(time.Unix(0, t))+time.Millisecond)
		}
		timer := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-s.notify:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
		timer.Stop()
	}
}

// nextStopTime returns the earliest time stop among cursors waiting at the
// end, so the stream wakes to end them once it passes.
func (s *streamer) nextStopTime() (int64, bool) {
	t, ok := int64(cursor.NoTime), false
	for i := range s.cursors {
		if c := &s.cursors[i]; !c.Done && c.CaughtUp && c.StopTime < t {
			t, ok = c.StopTime, true
		}
	}
	return t, ok
}

// readEvent reads batches of cursor i up to the visible end and sends at most
// one records event.
func (s *streamer) readEvent(i int, end uint64) error {
	c := &s.cursors[i]
	if s.limits[i] == 0 {
		s.limits[i] = min(firstEventRecords, s.opts.MaxRecordsPerEvent)
	}
	maxRecords := s.limits[i]
	maxBytes := min(s.opts.MaxEventBytes, maxRecords*1024)
	s.slab, s.ptrs, s.hslab, s.hptrs = s.slab[:0], s.ptrs[:0], s.hslab[:0], s.hptrs[:0]
	bytes := 0
	full := false
	for !full && !c.Done {
		pb := &s.pending[i]
		if pb.b == nil {
			if c.Next >= end {
				break
			}
			b, _, err := s.readers[i].Read(c.Next)
			if err != nil {
				return err
			}
			pb.b, pb.it = b, b.Records.Iter()
		}
		b := pb.b
		r := &s.scratch
		exhausted := true
		for pb.it.Next(r) {
			off := b.Base + uint64(r.OffsetDelta)
			deliver, stop := c.Admit(off, b.AppendTime)
			if stop {
				c.Finish(off)
				break
			}
			if deliver {
				s.appendRecord(c.Partition, off, b.AppendTime, r)
				bytes += len(r.Key) + len(r.Value) + len(r.IdempotencyKey)
			}
			c.Advance(off)
			if len(s.ptrs) >= maxRecords || bytes >= maxBytes {
				full, exhausted = true, false
				break
			}
		}
		if err := pb.it.Err(); err != nil {
			return err
		}
		if exhausted || c.Done {
			if !c.Done {
				c.Advance(b.End() - 1)
			}
			*pb = pendingBatch{}
		}
	}
	if len(s.ptrs) == 0 {
		return nil
	}
	s.limits[i] = min(2*s.limits[i], s.opts.MaxRecordsPerEvent)
	s.recEv.Partition = c.Partition
	s.recEv.Records = s.ptrs
	s.recEv.ResumeToken = s.token()
	s.resp.Event = &rewindv1.SubscribeResponse_Records{Records: &s.recEv}
	return s.sink.Send(&s.resp)
}

func (s *streamer) appendRecord(part uint32, off uint64, t int64, r *record.Record) {
	if cap(s.slab) == len(s.slab) {
		// Grow by allocating a new slab: records already handed out point
		// into the old one and must stay put.
		s.slab = make([]rewindv1.Record, 0, max(64, min(2*cap(s.slab), s.opts.MaxRecordsPerEvent)))
	}
	s.slab = s.slab[:len(s.slab)+1]
	pr := &s.slab[len(s.slab)-1]
	pr.Reset()
	pr.Partition = part
	pr.Offset = off
	pr.MessageId = msgid.ID{TopicID: s.topicID, Partition: part, Offset: off}.String()
	pr.AppendTimeUnixNanos = t
	pr.Key = r.Key
	pr.Value = r.Value
	pr.EventTimeUnixNanos = r.EventTime
	if len(r.IdempotencyKey) > 0 {
		pr.IdempotencyKey = string(r.IdempotencyKey)
	}
	if len(r.Headers) > 0 {
		hs := make([]*rewindv1.Header, len(r.Headers))
		for j, h := range r.Headers {
			hs[j] = &rewindv1.Header{Key: string(h.Key), Value: h.Value}
		}
		pr.Headers = hs
	}
	s.ptrs = append(s.ptrs, pr)
}

func (s *streamer) positions() []*rewindv1.PartitionPosition {
	out := make([]*rewindv1.PartitionPosition, len(s.cursors))
	for i := range s.cursors {
		b := s.parts[i].Bounds()
		out[i] = &rewindv1.PartitionPosition{
			Partition: s.cursors[i].Partition, NextOffset: s.cursors[i].Next,
			EndOffset: b.Next, LogStartOffset: b.LogStart,
		}
	}
	return out
}

// token encodes where every cursor stands.
func (s *streamer) token() string {
	t := resume.Token{TopicID: s.topicID, Positions: make([]resume.Position, len(s.cursors))}
	for i := range s.cursors {
		t.Positions[i] = resume.Position{Partition: s.cursors[i].Partition, Next: s.cursors[i].Next}
	}
	return t.String()
}

func (s *streamer) send(resp *rewindv1.SubscribeResponse) error { return s.sink.Send(resp) }

func (s *streamer) sendStarted() error {
	return s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_Started{Started: &rewindv1.StartedEvent{
		TopicId: s.topicID, Partitions: s.positions(), ResumeToken: s.token(),
	}}})
}

func (s *streamer) sendProgress() error {
	return s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_Progress{Progress: &rewindv1.ProgressEvent{
		Partitions: s.positions(), ResumeToken: s.token(),
	}}})
}

func (s *streamer) sendCaughtUp(c *cursor.Cursor, lagging int) error {
	return s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_CaughtUp{CaughtUp: &rewindv1.CaughtUpEvent{
		Partition: c.Partition, NextOffset: c.Next, LaggingPartitions: uint32(max(lagging, 0)),
	}}})
}

func (s *streamer) sendEnd() error {
	return s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_End{End: &rewindv1.EndEvent{
		Partitions: s.positions(), ResumeToken: s.token(),
	}}})
}
