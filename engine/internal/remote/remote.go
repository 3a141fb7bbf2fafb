// Package remote reads a partition through its leader when the node serving
// a stream does not lead it (or holds no replica of it): a Source fetches
// the leader's applied batches, the way a Kafka consumer fetches from a
// partition leader, and gives them to the stream package like a local
// replica.
//
// A Source keeps the leader's bounds (log start, end, times) from its last
// answer. While a stream waits on it, one goroutine long-polls the leader at
// the known end; the answer brings the new bounds, and when the stream's
// reader has caught up also the new batches (the tail), so a live record
// costs one round trip. A reader that is behind fetches ahead in large
// reads. Transient failures (no leader during an election, a node that
// stopped leading, an unreachable node) are retried with backoff for
// Config.RetryFor before the stream is failed; Leader implementations
// follow the leadership, so a stream carries on across a leader change with
// no gap and no duplicate: every replica holds the same batches at the same
// offsets.
package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/stream"
)

// Fetch asks the leader for batches.
type Fetch struct {
	// From is the first offset wanted: the answer starts with the batch
	// holding it.
	From uint64
	// MaxBytes bounds the record bytes returned (at least one batch is
	// returned when one exists at From); 0 asks for the bounds only.
	MaxBytes int
	// Wait is how long the leader may wait for a record at From.
	Wait time.Duration
}

// Fetched is the leader's answer.
type Fetched struct {
	Bounds partition.State
	// Watermark is the leader's time watermark, taken before Bounds.
	Watermark int64
	// Batches are consecutive, the first holding Fetch.From.
	Batches []*partition.Batch
}

// Leader reaches whichever node leads one partition.
type Leader interface {
	Fetch(ctx context.Context, f Fetch) (Fetched, error)
	SeekTime(ctx context.Context, t int64) (uint64, error)
	TimeOf(ctx context.Context, offset uint64) (int64, error)
}

// Config configures a Source. Zero values select defaults.
type Config struct {
	// Index is the partition number.
	Index uint32
	// Leader answers the fetches.
	Leader Leader
	// Retryable reports whether an error of Leader is transient.
	Retryable func(error) bool
	// RetryFor bounds how long transient failures are retried before the
	// source fails. Default 10 s.
	RetryFor time.Duration
	// PollWait is the long poll's wait. Default 500 ms.
	PollWait time.Duration
	// ReadBytes bounds one fetch of a reader that is behind. Default 4 MiB.
	ReadBytes int
	// TailBytes bounds the batches a poll brings and keeps for a reader at
	// the end. Default 1 MiB.
	TailBytes int
}

func (c Config) withDefaults() Config {
	if c.Retryable == nil {
		c.Retryable = func(error) bool { return false }
	}
	if c.RetryFor <= 0 {
		c.RetryFor = 10 * time.Second
	}
	if c.PollWait <= 0 {
		c.PollWait = 500 * time.Millisecond
	}
	if c.ReadBytes <= 0 {
		c.ReadBytes = 4 << 20
	}
	if c.TailBytes <= 0 {
		c.TailBytes = 1 << 20
	}
	return c
}

// ErrFailed wraps why a source gave up.
var ErrFailed = errors.New("remote: partition unreachable")

// Source is a partition read through its leader. It implements
// stream.Source and cursor.Log. Its work is bound to the context it was
// opened with.
type Source struct {
	cfg Config
	ctx context.Context
	mu  struct {
		sync.Mutex
		bounds    partition.State
		watermark int64
		err       error
		subs      map[chan<- struct{}]struct{}
		stopPoll  context.CancelFunc // nil while nobody waits
		pollDone  chan struct{}      // closed when the poll goroutine returned
		// tail holds consecutive batches from the end as polls brought them.
		tail      []*partition.Batch
		tailBytes int
		// readerAt is the offset the source's reader wants next.
		readerAt uint64
	}
}

// Open fetches the partition's bounds and returns its source.
func Open(ctx context.Context, cfg Config) (*Source, error) {
	s := &Source{cfg: cfg.withDefaults(), ctx: ctx}
	s.mu.subs = make(map[chan<- struct{}]struct{})
	res, err := s.fetch(ctx, Fetch{})
	if err != nil {
		return nil, err
	}
	s.mu.bounds, s.mu.watermark = res.Bounds, res.Watermark
	s.mu.readerAt = res.Bounds.Next
	return s, nil
}

// fetch calls the leader, retrying transient failures for RetryFor.
func (s *Source) fetch(ctx context.Context, f Fetch) (Fetched, error) {
	var res Fetched
	err := s.retry(ctx, func() (err error) {
		res, err = s.cfg.Leader.Fetch(ctx, f)
		return err
	})
	return res, err
}

// retry runs call until it succeeds, fails for good, RetryFor has passed
// since the first failure, or ctx ends.
func (s *Source) retry(ctx context.Context, call func() error) error {
	var first time.Time
	backoff := 5 * time.Millisecond
	for {
		err := call()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if !errors.Is(err, errNotYet) && !s.cfg.Retryable(err) {
			return err
		}
		if first.IsZero() {
			first = time.Now()
		} else if time.Since(first) >= s.cfg.RetryFor {
			return fmt.Errorf("partition %d: %w for %s: %w", s.cfg.Index, ErrFailed, s.cfg.RetryFor, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// Index implements cursor.Log.
func (s *Source) Index() uint32 { return s.cfg.Index }

// Bounds implements stream.Source and cursor.Log: the leader's bounds as of
// its last answer.
func (s *Source) Bounds() partition.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.bounds
}

// TimeWatermark implements stream.Source.
func (s *Source) TimeWatermark() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.watermark
}

// Err implements stream.Source.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.err
}

// SeekTime implements cursor.Log on the leader.
func (s *Source) SeekTime(t int64) (uint64, error) {
	var off uint64
	err := s.retry(s.ctx, func() (err error) {
		off, err = s.cfg.Leader.SeekTime(s.ctx, t)
		return err
	})
	return off, err
}

// TimeOf implements cursor.Log on the leader.
func (s *Source) TimeOf(offset uint64) (int64, error) {
	var t int64
	err := s.retry(s.ctx, func() (err error) {
		t, err = s.cfg.Leader.TimeOf(s.ctx, offset)
		return err
	})
	return t, err
}

// Notify implements stream.Source. The first registration starts the long
// poll; the last cancel stops it and waits for it to return, so no read of
// the leader (in-process, of this node's store) outlives the stream.
func (s *Source) Notify(ch chan<- struct{}) (cancel func()) {
	s.mu.Lock()
	s.mu.subs[ch] = struct{}{}
	if s.mu.stopPoll == nil && s.mu.err == nil {
		ctx, stop := context.WithCancel(s.ctx)
		done := make(chan struct{})
		s.mu.stopPoll, s.mu.pollDone = stop, done
		go func() {
			defer close(done)
			s.poll(ctx)
		}()
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.mu.subs, ch)
		var done chan struct{}
		if len(s.mu.subs) == 0 && s.mu.stopPoll != nil {
			s.mu.stopPoll()
			done = s.mu.pollDone
			s.mu.stopPoll, s.mu.pollDone = nil, nil
		}
		s.mu.Unlock()
		if done != nil {
			<-done
		}
	}
}

func (s *Source) notifyLocked() {
	for ch := range s.mu.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// poll long-polls the leader at the known end until ctx ends or the source
// fails.
func (s *Source) poll(ctx context.Context) {
	for ctx.Err() == nil {
		s.mu.Lock()
		f := Fetch{From: s.mu.bounds.Next, Wait: s.cfg.PollWait}
		if s.mu.readerAt >= f.From || s.tailReachesLocked(f.From) {
			f.MaxBytes = s.cfg.TailBytes
		}
		s.mu.Unlock()
		res, err := s.fetch(ctx, f)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if err != nil {
			s.mu.err = err
			s.notifyLocked()
			s.mu.Unlock()
			return
		}
		s.mu.bounds, s.mu.watermark = res.Bounds, res.Watermark
		s.keepTailLocked(res.Batches)
		s.notifyLocked()
		s.mu.Unlock()
	}
}

// keepTailLocked adds batches a poll brought to the tail, dropping what the
// reader has passed and, beyond TailBytes, the newest.
func (s *Source) keepTailLocked(bs []*partition.Batch) {
	for _, b := range bs {
		if n := len(s.mu.tail); n > 0 && s.mu.tail[n-1].End() != b.Base {
			s.mu.tail, s.mu.tailBytes = nil, 0 // not contiguous: start over
		}
		s.mu.tail = append(s.mu.tail, b)
		s.mu.tailBytes += len(b.Records.Bytes())
	}
	for len(s.mu.tail) > 0 && s.mu.tail[0].End() <= s.mu.readerAt {
		s.mu.tailBytes -= len(s.mu.tail[0].Records.Bytes())
		s.mu.tail[0] = nil
		s.mu.tail = s.mu.tail[1:]
	}
	// Beyond TailBytes drop the newest: the reader wants the oldest next.
	// The first stays: one batch alone may be larger than TailBytes.
	for n := len(s.mu.tail); n > 1 && s.mu.tailBytes > s.cfg.TailBytes; n-- {
		s.mu.tailBytes -= len(s.mu.tail[n-1].Records.Bytes())
		s.mu.tail[n-1] = nil
		s.mu.tail = s.mu.tail[:n-1]
	}
}

// tailReachesLocked reports whether the tail holds every batch from the
// reader's offset to end: once it has read them the reader is at end.
func (s *Source) tailReachesLocked(end uint64) bool {
	n := len(s.mu.tail)
	return n > 0 && s.mu.tail[0].Base <= s.mu.readerAt && s.mu.tail[n-1].End() == end
}

// OpenReader implements stream.Source.
func (s *Source) OpenReader() stream.BatchReader {
	ctx, cancel := context.WithCancel(s.ctx)
	return &reader{s: s, ctx: ctx, cancel: cancel}
}

// firstFetchBytes is a reader's first fetch: small, so the first records of
// a replay arrive fast; each fetch after it doubles up to ReadBytes.
const firstFetchBytes = 64 << 10

// reader reads a Source: from the tail when a poll brought the batch,
// otherwise from what its last fetch brought, otherwise with a new fetch.
// While it is behind the end, it keeps one fetch ahead in flight, so the
// leader reads and sends the next range while the stream delivers this one.
type reader struct {
	s      *Source
	ctx    context.Context
	cancel context.CancelFunc
	ahead  []*partition.Batch
	size   int
	next   *prefetch // nil when none is in flight or waiting
}

// prefetch is a fetch started ahead of the reader.
type prefetch struct {
	from   uint64
	cancel context.CancelFunc
	done   chan struct{}
	got    []*partition.Batch
	err    error
}

func holding(bs []*partition.Batch, off uint64) (*partition.Batch, int) {
	for i, b := range bs {
		if off >= b.Base && off < b.End() {
			return b, i
		}
	}
	return nil, -1
}

// Read implements stream.BatchReader.
func (r *reader) Read(from uint64) (*partition.Batch, error) {
	s := r.s
	if b, i := holding(r.ahead, from); b != nil {
		r.ahead = r.ahead[i+1:]
		s.readAt(b.End())
		return b, nil
	}
	r.ahead = nil
	s.mu.Lock()
	b, _ := holding(s.mu.tail, from)
	s.mu.Unlock()
	if b != nil {
		r.dropPrefetch()
		s.readAt(b.End())
		return b, nil
	}
	var got []*partition.Batch
	if pf := r.next; pf != nil && pf.from == from {
		r.next = nil
		<-pf.done // it watches r.ctx too
		pf.cancel()
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		if pf.err != nil {
			return nil, pf.err
		}
		got = pf.got
	} else {
		r.dropPrefetch()
	}
	if len(got) == 0 {
		var err error
		if got, err = r.fetch(r.ctx, from, r.grow(), false); err != nil {
			return nil, err
		}
	}
	r.ahead = got[1:]
	s.readAt(got[0].End())
	if end := got[len(got)-1].End(); end < s.Bounds().Next {
		r.startPrefetch(end)
	}
	return got[0], nil
}

// fetch reads batches from offset from on the leader. once returns what a
// single answer had (maybe nothing); otherwise a node that has nothing at
// from yet is asked again.
func (r *reader) fetch(ctx context.Context, from uint64, size int, once bool) ([]*partition.Batch, error) {
	s := r.s
	var got []*partition.Batch
	err := s.retry(ctx, func() error {
		res, err := s.cfg.Leader.Fetch(ctx, Fetch{From: from, MaxBytes: size})
		if err != nil {
			return err
		}
		if from < res.Bounds.LogStart {
			return fmt.Errorf("%w: offset %d, log start %d", partition.ErrBelowStart, from, res.Bounds.LogStart)
		}
		if len(res.Batches) == 0 && !once {
			// The node answering has not applied from yet (one that was
			// asked while it stopped leading): ask again.
			return errNotYet
		}
		got = res.Batches
		return nil
	})
	if errors.Is(err, errNotYet) {
		return nil, fmt.Errorf("partition %d: %w: the leader has no record at offset %d", s.cfg.Index, ErrFailed, from)
	}
	if err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, nil
	}
	if got[0].Base > from || from >= got[0].End() {
		return nil, fmt.Errorf("partition %d: %w: asked for offset %d, got the batch at [%d, %d)", s.cfg.Index, partition.ErrCorrupt, from, got[0].Base, got[0].End())
	}
	for i := 1; i < len(got); i++ {
		if got[i].Base != got[i-1].End() {
			return nil, fmt.Errorf("partition %d: %w: batches at %d and %d are not consecutive", s.cfg.Index, partition.ErrCorrupt, got[i-1].Base, got[i].Base)
		}
	}
	return got, nil
}

func (r *reader) startPrefetch(from uint64) {
	ctx, cancel := context.WithCancel(r.ctx)
	pf := &prefetch{from: from, cancel: cancel, done: make(chan struct{})}
	r.next = pf
	size := r.grow()
	go func() {
		defer close(pf.done)
		pf.got, pf.err = r.fetch(ctx, from, size, true)
	}()
}

// grow returns the size of the reader's next fetch.
func (r *reader) grow() int {
	r.size = min(max(2*r.size, firstFetchBytes), r.s.cfg.ReadBytes)
	return r.size
}

// dropPrefetch stops a fetch ahead that the reader no longer wants and
// waits for it: cancelled, it ends at once (a Connect call returns, and
// ServeFetch does not wait with Wait 0).
func (r *reader) dropPrefetch() {
	if pf := r.next; pf != nil {
		pf.cancel()
		<-pf.done
		r.next = nil
	}
}

// errNotYet is a transient "nothing there yet" inside Read's retries.
var errNotYet = errors.New("not applied yet")

func (s *Source) readAt(next uint64) {
	s.mu.Lock()
	s.mu.readerAt = next
	s.mu.Unlock()
}

// Close implements stream.BatchReader: it cancels a fetch ahead.
func (r *reader) Close() {
	r.cancel()
	r.dropPrefetch()
	r.ahead = nil
}

var _ stream.Source = (*Source)(nil)
