package stream

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/sandbox"
)

// A filtered stream reads records as usual, but instead of delivering each
// admitted record it encodes it into a sandbox batch (a candidate). When the
// batch is full — the module's records-per-call, its input buffer, or the
// room left in the event — the module runs over it and its outputs become
// the event's records: each carries its input's partition, offset, message
// ID, idempotency key and event time; a transform's output has new key,
// value and headers. The cursor advances over every record read, kept or
// not, so resume tokens and progress events move on through history even
// when nothing matches.
//
// When the module fails, the outputs of the batches before the failing one
// are sent, the partition's position is set back to the failing batch's
// first record, and the stream ends with a *FilterError naming it: nothing
// is skipped, and a new stream can resume there.

// FilterError ends a filtered stream.
type FilterError struct {
	Module    string // "sha256:HEX"
	Partition uint32
	// Offset is the first record of the batch the module failed on; every
	// record before it in this partition was delivered.
	Offset uint64
	// ResumeToken is the stream's position at the failure: resuming from
	// it re-reads the failing batch and nothing before it.
	ResumeToken string
	Err         error // a *sandbox.Error, or the context's error
}

func (e *FilterError) Error() string {
	return fmt.Sprintf("stream: filter %s failed at partition %d, batch from offset %d: %v", e.Module, e.Partition, e.Offset, e.Err)
}

func (e *FilterError) Unwrap() error { return e.Err }

type candidate struct {
	off uint64
	t   int64
	ver int64         // key version, -1 none
	rec record.Record // Key, Value, IdempotencyKey alias the batch; Headers the arena
}

type filtering struct {
	f       *sandbox.Filter
	module  string
	batch   sandbox.Batch
	cands   []candidate
	headers []record.Header // arena for candidates' headers
	outs    []sandbox.Output
}

// fits reports whether r may join the current batch without running it
// first, with room records left in the event.
func (f *filtering) fits(r *record.Record, room int) bool {
	n := len(f.cands)
	if n == 0 {
		return true // a record too large on its own fails in Run, by index
	}
	if n >= f.f.MaxRecordsPerCall() || n >= room {
		return false
	}
	size := sandbox.RecordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		size += sandbox.HeaderSize(h.Key, h.Value)
	}
	return f.batch.Size()+size <= f.f.InputCap()
}

func (f *filtering) add(off uint64, t int64, ver int64, r *record.Record) {
	f.batch.Add(off, t, r.Key, r.Value, len(r.Headers))
	for _, h := range r.Headers {
		f.batch.AddHeader(h.Key, h.Value)
	}
	c := candidate{off: off, t: t, ver: ver, rec: *r}
	if len(r.Headers) > 0 {
		h0 := len(f.headers)
		f.headers = append(f.headers, r.Headers...)
		c.rec.Headers = f.headers[h0:len(f.headers):len(f.headers)]
	} else {
		c.rec.Headers = nil
	}
	f.cands = append(f.cands, c)
}

func (f *filtering) reset() {
	f.batch.Reset()
	f.cands, f.headers, f.outs = f.cands[:0], f.headers[:0], f.outs[:0]
}

// runFilter runs the module over the pending candidates of sl and appends
// its outputs to the event; it returns the event's record bytes.
func (s *streamer) runFilter(ctx context.Context, sl *slot, bytes int) (int, error) {
	f := s.filter
	if len(f.cands) == 0 {
		return bytes, nil
	}
	defer f.reset()
	var err error
	f.outs, err = f.f.Run(ctx, &f.batch, f.outs[:0])
	// A filtered reader runs flat out; yield so that goroutines queued on
	// this processor (publishes, raft, live streams) need not wait for the
	// scheduler's 10 ms time slice.
	runtime.Gosched()
	for _, o := range f.outs {
		c := &f.cands[o.Index]
		r := c.rec
		if o.Replaced {
			r.Key, r.Value, r.Headers = o.Key, o.Value, nil
			for _, h := range o.Headers {
				r.Headers = append(r.Headers, record.Header{Key: h.Key, Value: h.Value})
			}
		}
		s.appendRecord(sl.cur.Partition, c.off, c.t, c.ver, &r)
		bytes += len(r.Key) + len(r.Value) + len(r.IdempotencyKey)
	}
	if err == nil {
		return bytes, nil
	}
	idx := 0
	var se *sandbox.Error
	if errors.As(err, &se) {
		idx = min(max(se.Index, 0), len(f.cands)-1)
	}
	// Deliver what came before the failing call, and stand at its start.
	sl.cur.Next = f.cands[idx].off
	sl.pending = pendingBatch{}
	ferr := &FilterError{Module: f.module, Partition: sl.cur.Partition, Offset: f.cands[idx].off, ResumeToken: s.token(), Err: err}
	if len(s.ptrs) > 0 {
		if serr := s.sendRecords(sl.cur.Partition); serr != nil {
			return bytes, errors.Join(ferr, serr)
		}
		s.ptrs = s.ptrs[:0]
	}
	return bytes, ferr
}

func (s *streamer) filterModule() string {
	if s.filter == nil {
		return ""
	}
	return s.filter.module
}
