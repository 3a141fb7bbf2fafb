// Package stream runs one subscription: it drives a cursor per partition
// over partition readers and turns what they read into the events of the
// public API (started, records, progress, caught_up, end, and for group
// members assignment and replay_started).
//
// One goroutine (the caller's) serves a stream. Each round it reads at most
// one event's worth of records per partition, so partitions share the stream
// fairly; when no partition has anything new it waits for a partition to
// append, a control message, the progress timer, or the stream to end.
// Sending blocks when the client reads slowly (HTTP/2 flow control), which
// stops the reading: memory per stream is one event, and nothing is ever
// dropped.
//
// With Options.Sched, a partition that has not caught up reads each event
// in a catch-up turn of the node's scheduler (package sched: a bounded
// share of the processors, giving way to live work), and gives its slot
// back before it sends; events read at the tail count as live work.
//
// With Options.Filter, records pass through a WebAssembly module beside the
// reader (filter.go): what the module keeps or emits is delivered, with the
// offsets, message IDs and idempotency keys of the records it read.
//
// A group member's stream is steered by its coordinator through
// Options.Control: partitions are added and revoked, and cursors seek in
// place after a group reset, between two rounds.
package stream

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/resume"
	"github.com/rewind-io/rewind/engine/internal/sched"
	"github.com/rewind-io/rewind/internal/failpoint"
	"github.com/rewind-io/rewind/sandbox"
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
	// Control, when set, makes this a group member's stream: it never ends
	// by itself (no cursor is ever "done"), and it applies the control
	// messages it receives between rounds.
	Control <-chan Control
	// Filter, when set, runs every record through a WebAssembly module;
	// see filter.go.
	Filter *sandbox.Filter
	// Key, when set, delivers only the records with this key (before the
	// filter); positions still move over every record read.
	Key []byte
	// Contains, when set, delivers only the records whose key, value, or a
	// header's key or value holds these bytes (before the filter; at most
	// MaxContains). Positions still move over every record read, and a
	// round scans at most MaxScanPerEvent records, as a filtered stream's.
	Contains []byte
	// MaxScanPerEvent bounds the records a filtered stream reads from one
	// partition per round, delivered or not, so partitions take turns and
	// progress events keep flowing. Default 65536.
	MaxScanPerEvent int
	// Sched, when set, paces the stream: a partition that has not caught
	// up reads each event in a catch-up turn (a bounded share of the
	// processors, never the last free one), and events read at the tail
	// are marked as live work, which catch-up turns give way to. See
	// package sched.
	Sched *sched.Scheduler
	// Delivered, when set, counts the records the stream sends.
	Delivered *atomic.Uint64
	// Counts, when set, also counts the records the stream sends and
	// their payload bytes; many streams may share one (a topic's).
	Counts *Counts
	// ReplayBytes, when set, counts the encoded bytes of the batches the
	// stream reads while a partition has not caught up (history, in a
	// catch-up turn).
	ReplayBytes *atomic.Uint64
	// Pace, when set, is told the encoded bytes of history the stream read
	// (batches read while a partition had not caught up) after each event,
	// outside any catch-up turn, and may wait: a per-principal replay
	// quota (package quota). An error ends the stream.
	Pace func(ctx context.Context, historyBytes int) error
	// PaceFuel, when set, is told the WebAssembly fuel the stream's filter
	// burned, after each event, and may wait (a per-principal fuel quota).
	PaceFuel func(ctx context.Context, fuel uint64) error
	// Route, when set, chooses the source a group member's stream reads
	// an assigned partition from, given its local replica (the node's own
	// replica, or the partition's leader through package remote). It runs
	// on the stream's goroutine; an error ends the stream.
	Route func(partition uint32, local Source) (Source, error)
}

// Counts are delivery counters that streams add to without locks.
type Counts struct {
	// Records counts the records sent; Bytes their payload bytes (key,
	// value, header keys and values, idempotency key: what a publisher
	// chose, not the framing).
	Records, Bytes atomic.Uint64
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
	if o.MaxScanPerEvent <= 0 {
		o.MaxScanPerEvent = 1 << 16
	}
	return o
}

// Control steers a group member's stream.
type Control struct {
	// Assignment, when set, changes the partitions the stream reads and is
	// announced with an assignment event.
	Assignment *Assignment
	// Seeks move cursors of assigned partitions (a group reset); each is
	// announced with a replay_started event before the records that follow.
	Seeks []Seek
	// Close ends the stream with this error.
	Close error
	// Done, if set, is closed once the stream has applied the message: no
	// record of a revoked partition is sent after that.
	Done chan struct{}
}

// Assignment is a member's new assignment.
type Assignment struct {
	MemberID   string
	Generation uint64
	Epoch      uint64
	// Add starts reading these partitions at their cursors.
	Add []Assigned
	// Revoke stops reading these partitions.
	Revoke []uint32
}

// Assigned is a partition added to a stream.
type Assigned struct {
	Source Source
	Cursor cursor.Cursor
}

// Seek moves an assigned partition's cursor.
type Seek struct {
	Partition  uint32
	Offset     uint64
	Epoch      uint64
	Generation uint64
}

// firstEventRecords bounds a partition's first records event.
const firstEventRecords = 32

// ErrStalled is returned when the partitions of a stream stop underneath it.
var ErrStalled = errors.New("stream: partition stopped")

// Run serves one stream until every cursor is done (it then sends an end
// event and returns nil), ctx ends, a partition fails, the sink fails, or a
// control message closes it. parts and cursors are parallel, one per
// partition of the stream.
func Run(ctx context.Context, topicID uint64, parts []Source, cursors []cursor.Cursor, opts Options, sink Sink) error {
	s := &streamer{
		topicID: topicID,
		opts:    opts.withDefaults(),
		sink:    sink,
		notify:  make(chan struct{}, 1),
	}
	if f := s.opts.Filter; f != nil {
		s.filter = &filtering{f: f, module: "sha256:" + f.Module().SHA256()}
	}
	defer s.closeAll()
	for i, p := range parts {
		s.add(p, cursors[i])
	}
	return s.run(ctx)
}

// slot is one partition of the stream.
type slot struct {
	part    Source
	cur     cursor.Cursor
	reader  BatchReader
	cancel  func() // stops the partition's notifications
	pending pendingBatch
	// limit is the partition's current records-per-event bound. It starts
	// small and doubles with every event up to MaxRecordsPerEvent, so the
	// first records of a replay arrive fast (a small first event to encode,
	// send and decode) and bulk reads still move full events.
	limit int
}

type streamer struct {
	topicID uint64
	opts    Options
	sink    Sink
	slots   []*slot // ordered by partition
	notify  chan struct{}
	lagging int

	// Reused for every event (Sink.Send does not retain).
	resp  rewindv1.SubscribeResponse
	recEv rewindv1.RecordsEvent
	slab  []rewindv1.Record
	ptrs  []*rewindv1.Record
	// ids holds the message IDs of the event being built; the records'
	// MessageId strings point into it (no allocation per record), which
	// is safe because Sink.Send does not retain the event and ids is only
	// rewritten for the next one.
	ids []byte
	// vers holds the key versions of the event being built, as ids the
	// message IDs (the records' KeyVersion pointers point into it).
	vers    []uint64
	scratch record.Record
	filter  *filtering // nil without a filter
	// bugged is set once an injected bug broke an event (injectBugs).
	bugged bool
	// paceBytes is the history read since Pace was last told.
	paceBytes int
}

// pendingBatch is a batch a cursor stopped reading in the middle of, with
// the iterator where it stopped.
type pendingBatch struct {
	b  *partition.Batch
	it record.Iter
	vs partition.Versions
}

func (s *streamer) add(p Source, c cursor.Cursor) {
	sl := &slot{part: p, cur: c, reader: p.OpenReader(), cancel: p.Notify(s.notify)}
	if !c.Done {
		s.lagging++
	}
	s.slots = append(s.slots, sl)
	slices.SortFunc(s.slots, func(a, b *slot) int { return int(a.cur.Partition) - int(b.cur.Partition) })
}

func (s *streamer) remove(partition uint32) {
	s.slots = slices.DeleteFunc(s.slots, func(sl *slot) bool {
		if sl.cur.Partition != partition {
			return false
		}
		if !sl.cur.Done && !sl.cur.CaughtUp {
			s.lagging--
		}
		sl.cancel()
		sl.reader.Close()
		return true
	})
}

func (s *streamer) closeAll() {
	for _, sl := range s.slots {
		sl.cancel()
		sl.reader.Close()
	}
	s.slots = nil
}

func (s *streamer) run(ctx context.Context) error {
	if err := s.sendStarted(); err != nil {
		return err
	}
	group := s.opts.Control != nil
	lastProgress := s.opts.Now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if group {
			if err := s.drainControl(); err != nil {
				return err
			}
		}
		progressed := false
		for _, sl := range s.slots {
			c := &sl.cur
			if c.Done {
				continue
			}
			p := sl.part
			if err := p.Err(); err != nil {
				return errors.Join(ErrStalled, err)
			}
			// The watermark before the bounds: a record that becomes
			// visible after them was still in flight when the watermark
			// was taken, so it cannot be older than the watermark.
			wm := p.TimeWatermark()
			vis := p.Bounds()
			if c.Next < vis.LogStart {
				return &cursor.OutOfRangeError{Partition: c.Partition, Requested: c.Next, LogStart: vis.LogStart, End: vis.Next, EarliestTime: vis.FirstTime}
			}
			if c.Next < vis.Next || sl.pending.b != nil {
				before := c.Next
				err := s.readEvent(ctx, sl, vis.Next)
				if err == nil && s.opts.Pace != nil && s.paceBytes > 0 {
					n := s.paceBytes
					s.paceBytes = 0
					err = s.opts.Pace(ctx, n)
				}
				if err == nil && s.opts.PaceFuel != nil && s.filter != nil {
					if fuel := s.filter.f.TakeFuel(); fuel > 0 {
						err = s.opts.PaceFuel(ctx, fuel)
					}
				}
				if err != nil {
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
			if c.Next >= vis.Next && sl.pending.b == nil {
				if c.StopTime != cursor.NoTime && wm >= c.StopTime {
					c.Finish(c.Next)
					continue
				}
				if !c.CaughtUp {
					c.CaughtUp = true
					s.lagging--
					if err := s.sendCaughtUp(c); err != nil {
						return err
					}
				}
			}
		}
		if !group && s.allDone() {
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
		case ctl := <-s.opts.Control: // nil channel unless group
			timer.Stop()
			if err := s.apply(ctl); err != nil {
				return err
			}
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
		timer.Stop()
	}
}

func (s *streamer) allDone() bool {
	for _, sl := range s.slots {
		if !sl.cur.Done {
			return false
		}
	}
	return true
}

// drainControl applies every control message already waiting.
func (s *streamer) drainControl() error {
	for {
		select {
		case ctl := <-s.opts.Control:
			if err := s.apply(ctl); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (s *streamer) apply(ctl Control) error {
	if ctl.Done != nil {
		defer close(ctl.Done)
	}
	if ctl.Close != nil {
		return ctl.Close
	}
	if a := ctl.Assignment; a != nil {
		for _, p := range a.Revoke {
			s.remove(p)
		}
		for _, add := range a.Add {
			s.remove(add.Cursor.Partition) // re-adding restarts at the new cursor
			src := add.Source
			if s.opts.Route != nil {
				var err error
				if src, err = s.opts.Route(add.Cursor.Partition, src); err != nil {
					return err
				}
			}
			s.add(src, add.Cursor)
		}
		if err := s.sendAssignment(a); err != nil {
			return err
		}
	}
	for _, sk := range ctl.Seeks {
		for _, sl := range s.slots {
			if sl.cur.Partition != sk.Partition {
				continue
			}
			if sl.cur.CaughtUp || sl.cur.Done {
				s.lagging++
			}
			sl.cur = cursor.Cursor{
				Partition: sk.Partition, Next: sk.Offset, MinTime: sl.cur.MinTime,
				StopOffset: cursor.NoOffset, StopTime: cursor.NoTime,
			}
			sl.pending = pendingBatch{}
			sl.limit = 0
			if err := s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_ReplayStarted{ReplayStarted: &rewindv1.ReplayStartedEvent{
				Epoch: sk.Epoch, Partition: sk.Partition, FromOffset: sk.Offset, Generation: sk.Generation,
			}}}); err != nil {
				return err
			}
		}
	}
	return nil
}

// nextStopTime returns the earliest time stop among cursors waiting at the
// end, so the stream wakes to end them once it passes.
func (s *streamer) nextStopTime() (int64, bool) {
	t, ok := int64(cursor.NoTime), false
	for _, sl := range s.slots {
		if c := &sl.cur; !c.Done && c.CaughtUp && c.StopTime < t {
			t, ok = c.StopTime, true
		}
	}
	return t, ok
}

// readEvent reads batches of one partition up to the visible end and sends
// at most one records event.
func (s *streamer) readEvent(ctx context.Context, sl *slot, end uint64) error {
	var turn *sched.Turn
	if sc := s.opts.Sched; sc != nil {
		if sl.cur.CaughtUp {
			defer sc.Live()()
		} else {
			var err error
			if turn, err = sc.CatchUp(ctx); err != nil {
				return err
			}
			defer turn.End()
		}
	}
	c := &sl.cur
	if sl.limit == 0 {
		sl.limit = min(firstEventRecords, s.opts.MaxRecordsPerEvent)
	}
	maxRecords := sl.limit
	maxBytes := min(s.opts.MaxEventBytes, maxRecords*1024)
	maxScan := math.MaxInt
	if s.filter != nil || s.opts.Contains != nil {
		// A search may deliver nothing for a long stretch: scan a bounded
		// share per round, so partitions take turns and progress flows.
		maxScan = s.opts.MaxScanPerEvent
	}
	s.slab, s.ptrs, s.ids, s.vers = s.slab[:0], s.ptrs[:0], s.ids[:0], s.vers[:0]
	bytes, scanned := 0, 0
	full := false
	var err error
	for !full && !c.Done {
		pb := &sl.pending
		if pb.b == nil {
			if c.Next >= end {
				break
			}
			b, err := sl.reader.Read(c.Next)
			if err != nil {
				return err
			}
			if !sl.cur.CaughtUp {
				if rb := s.opts.ReplayBytes; rb != nil {
					rb.Add(uint64(len(b.Records.Bytes())))
				}
				s.paceBytes += len(b.Records.Bytes())
			}
			pb.b, pb.it, pb.vs = b, b.Records.Iter(), b.Versions()
		}
		b := pb.b
		r := &s.scratch
		exhausted := true
		for pb.it.Next(r) {
			off := b.Base + uint64(r.OffsetDelta)
			deliver, stop := c.Admit(off, b.AppendTime)
			if deliver && s.opts.Key != nil && string(r.Key) != string(s.opts.Key) {
				deliver = false
			}
			if deliver && s.opts.Contains != nil && !contains(r, s.opts.Contains) {
				deliver = false
			}
			if deliver && !c.CaughtUp && off%1000 == 17 && failpoint.Enabled(failpoint.BugSkipReplayedRecord) {
				deliver = false // an injected bug: a replay skips a record
			}
			if stop {
				c.Finish(off)
				break
			}
			if deliver {
				ver := int64(-1)
				if len(r.Key) > 0 {
					if v, ok := pb.vs.Lookup(r.OffsetDelta); ok {
						ver = int64(v)
					}
				}
				if f := s.filter; f != nil {
					if !f.fits(r, maxRecords-len(s.ptrs)) {
						if bytes, err = s.runFilter(ctx, sl, bytes); err != nil {
							return err
						}
					}
					f.add(off, b.AppendTime, ver, r)
				} else {
					s.appendRecord(c.Partition, off, b.AppendTime, ver, r)
					bytes += len(r.Key) + len(r.Value) + len(r.IdempotencyKey)
				}
			}
			c.Advance(off)
			scanned++
			if len(s.ptrs) >= maxRecords || bytes >= maxBytes || scanned >= maxScan {
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
	if s.filter != nil {
		if _, err := s.runFilter(ctx, sl, bytes); err != nil {
			return err
		}
	}
	if len(s.ptrs) == 0 {
		return nil
	}
	sl.limit = min(2*sl.limit, s.opts.MaxRecordsPerEvent)
	if turn != nil {
		// Sending may wait for a slow client: not in a catch-up slot (its
		// processor time is still charged when the turn ends).
		turn.Release()
	}
	return s.sendRecords(c.Partition)
}

// sendRecords sends the records gathered in s.ptrs.
func (s *streamer) sendRecords(partition uint32) error {
	s.injectBugs()
	s.recEv.Partition = partition
	s.recEv.Records = s.ptrs
	s.recEv.ResumeToken = s.token()
	if s.filter != nil {
		s.recEv.FilterModule = s.filter.module
	}
	s.resp.Event = &rewindv1.SubscribeResponse_Records{Records: &s.recEv}
	if d := s.opts.Delivered; d != nil {
		d.Add(uint64(len(s.ptrs)))
	}
	if c := s.opts.Counts; c != nil {
		var n int
		for _, r := range s.ptrs {
			n += len(r.Key) + len(r.Value) + len(r.IdempotencyKey)
			for _, h := range r.Headers {
				n += len(h.Key) + len(h.Value)
			}
		}
		c.Records.Add(uint64(len(s.ptrs)))
		c.Bytes.Add(uint64(n))
	}
	return s.sink.Send(&s.resp)
}

// injectBugs breaks the first event it can on purpose, in a build with
// the failpoints tag and the failpoint set (internal/failpoint), so that
// the scenario checkers can be shown to catch it. A normal build compiles
// it to nothing.
func (s *streamer) injectBugs() {
	switch {
	case s.bugged:
	case failpoint.Enabled(failpoint.BugDeliverTwice) && len(s.ptrs) > 0:
		s.ptrs, s.bugged = append(s.ptrs, s.ptrs[0]), true
	case failpoint.Enabled(failpoint.BugSwapRecords) && len(s.ptrs) > 1:
		s.ptrs[0], s.ptrs[1], s.bugged = s.ptrs[1], s.ptrs[0], true
	}
}

func (s *streamer) appendRecord(part uint32, off uint64, t int64, ver int64, r *record.Record) {
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
	start := len(s.ids)
	s.ids = msgid.ID{TopicID: s.topicID, Partition: part, Offset: off}.Append(s.ids)
	// (If ids grew, earlier strings keep the old array alive.)
	pr.MessageId = unsafe.String(&s.ids[start], len(s.ids)-start)
	pr.AppendTimeUnixNanos = t
	if ver >= 0 {
		if cap(s.vers) == len(s.vers) {
			// A new array: records already built point into the old one.
			s.vers = make([]uint64, 0, max(64, 2*cap(s.vers)))
		}
		s.vers = append(s.vers, uint64(ver))
		pr.KeyVersion = &s.vers[len(s.vers)-1]
	}
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
	out := make([]*rewindv1.PartitionPosition, len(s.slots))
	for i, sl := range s.slots {
		b := sl.part.Bounds()
		out[i] = &rewindv1.PartitionPosition{
			Partition: sl.cur.Partition, NextOffset: sl.cur.Next,
			EndOffset: b.Next, LogStartOffset: b.LogStart, Clamped: sl.cur.Clamped,
		}
	}
	return out
}

// token encodes where every cursor stands.
func (s *streamer) token() string {
	t := resume.Token{TopicID: s.topicID, Positions: make([]resume.Position, len(s.slots))}
	for i, sl := range s.slots {
		t.Positions[i] = resume.Position{Partition: sl.cur.Partition, Next: sl.cur.Next}
	}
	return t.String()
}

func (s *streamer) send(resp *rewindv1.SubscribeResponse) error { return s.sink.Send(resp) }

func (s *streamer) sendStarted() error {
	return s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_Started{Started: &rewindv1.StartedEvent{
		TopicId: s.topicID, Partitions: s.positions(), ResumeToken: s.token(), FilterModule: s.filterModule(),
	}}})
}

func (s *streamer) sendAssignment(a *Assignment) error {
	return s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_Assignment{Assignment: &rewindv1.AssignmentEvent{
		MemberId: a.MemberID, Generation: a.Generation, Partitions: s.positions(), Revoked: a.Revoke, Epoch: a.Epoch,
	}}})
}

func (s *streamer) sendProgress() error {
	return s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_Progress{Progress: &rewindv1.ProgressEvent{
		Partitions: s.positions(), ResumeToken: s.token(), FilterModule: s.filterModule(),
	}}})
}

func (s *streamer) sendCaughtUp(c *cursor.Cursor) error {
	return s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_CaughtUp{CaughtUp: &rewindv1.CaughtUpEvent{
		Partition: c.Partition, NextOffset: c.Next, LaggingPartitions: uint32(max(s.lagging, 0)),
	}}})
}

func (s *streamer) sendEnd() error {
	return s.send(&rewindv1.SubscribeResponse{Event: &rewindv1.SubscribeResponse_End{End: &rewindv1.EndEvent{
		Partitions: s.positions(), ResumeToken: s.token(), FilterModule: s.filterModule(),
	}}})
}
