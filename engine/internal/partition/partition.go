// Package partition is one partition of a topic: the raft state machine that
// turns committed record batches into offsets and indexes, the publish queue
// that coalesces concurrent appends into batches, and the readers that serve
// history from Pebble and the tail from the cache.
//
// # Offsets and time
//
// Offsets are assigned at apply: a batch's base offset is the partition's
// next offset when its entry is applied, so every replica agrees and a
// dropped proposal leaves no hole. The leader stamps each batch with its
// clock when it proposes it; apply takes max(that time, the previous
// batch's), so append times never decrease within a partition and a time
// seek is an exact lower bound.
//
// # Concurrency
//
// Apply, Durable, TakeProposals and the other raftlog.StateMachine methods
// run on the raft host's loop goroutine and own the fields marked
// "loop-owned". Everything shared with publishers and readers is under mu.
// Lock order: Partition.mu, then Cache.mu.
package partition

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/raftlog"
)

var (
	// ErrCorrupt marks stored data that fails its checks. It is never
	// delivered; the read stops with it.
	ErrCorrupt = errors.New("partition: corrupt data")
	// ErrStopped is returned once the partition stopped (shutdown, topic
	// deletion, or a storage failure, which is joined to it).
	ErrStopped = errors.New("partition: stopped")
	// ErrNotLeader is returned when raft refused a proposal because this node
	// does not lead the partition.
	ErrNotLeader = errors.New("partition: not the leader")
	// ErrBelowStart is returned when a read asks for an offset below the log
	// start (retention removed it).
	ErrBelowStart = errors.New("partition: offset below the log start")
	// ErrBusy is returned when a publish could not be queued in time because
	// too much is already pending.
	ErrBusy = errors.New("partition: too much pending")
	// ErrOutcomeUnknown is returned when a wait ended before the append's
	// fate was known: it may or may not have been stored.
	ErrOutcomeUnknown = errors.New("partition: publish outcome unknown")
)

// Command kinds: the first byte of every entry this package proposes.
const kindBatch = 1

// Waker is the part of the raft host a partition needs.
type Waker interface{ Wake(group uint64) }

// Config describes one partition.
type Config struct {
	Group   uint64 // raft group id (also the key prefix of its rows)
	TopicID uint64
	Index   uint32 // partition number within the topic
	DB      *pebble.DB
	Host    Waker
	Cache   *Cache
	// Now is the leader clock for append times, in Unix nanoseconds.
	// Default: time.Now.
	Now func() int64
	// MaxBatchBytes bounds one proposed batch. Default 1 MiB: large enough
	// to amortize per-entry costs, small enough that a seek into the middle
	// of history reads little more than it delivers.
	MaxBatchBytes int
	// MaxPendingBytes bounds what publishers may have queued or in flight;
	// Append waits for room beyond it. Default 64 MiB.
	MaxPendingBytes int64
	Logger          hclog.Logger
}

// Partition is one partition. It implements raftlog.StateMachine.
type Partition struct {
	cfg Config
	log hclog.Logger

	// Loop-owned.
	st       State              // applied state, ahead of visible until Durable
	applied  []appliedBatch     // applied since the last Durable
	inflight map[uint64]*flight // proposal id -> what it carries
	nextID   uint64
	builder  record.Builder
	// proposedTime is the append time of the last proposed batch: proposal
	// times never go backwards, even if the clock does.
	proposedTime int64

	mu struct {
		sync.Mutex
		visible State
		leader  uint64
		queue   []*Append
		pending int64         // bytes queued or in flight
		room    chan struct{} // closed when pending drops
		subs    map[chan<- struct{}]struct{}
		err     error // set once stopped
		// flightTimes holds the append time of every batch in flight.
		flightTimes map[uint64]int64
	}
}

type appliedBatch struct {
	batch *Batch
	id    uint64
}

// flight is one proposed batch: which appends (and which of their records)
// it carries.
type flight struct {
	parts []flightPart
	time  int64
}

type flightPart struct {
	a     *Append
	first int // index of the first record of a carried here
	n     int
}

// Append is one publish to this partition: records that must land
// contiguously, in order.
type Append struct {
	Records []record.Record
	// Results, valid after Wait returns nil: one segment per batch the
	// records were split into, in order.
	Segments []Segment

	size    int64
	pending int // batches not yet applied
	err     error
	done    chan struct{}
}

// Segment says where a run of an append's records landed.
type Segment struct {
	First      int // index into Records
	Count      int
	Base       uint64 // offset of Records[First]
	AppendTime int64
}

// Open loads the partition's applied state from the store.
func Open(cfg Config) (*Partition, error) {
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.MaxBatchBytes == 0 {
		cfg.MaxBatchBytes = 1 << 20
	}
	if cfg.MaxPendingBytes == 0 {
		cfg.MaxPendingBytes = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	p := &Partition{cfg: cfg, log: cfg.Logger, inflight: make(map[uint64]*flight)}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	// Proposal ids must not collide with ids of an earlier run still being
	// re-applied from the log: start from a random point.
	p.nextID = binary.LittleEndian.Uint64(seed[:]) &^ (1<<32 - 1)
	v, closer, err := cfg.DB.Get(keys.PartitionStateKey(cfg.Group))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("partition %d: load state: %w", cfg.Index, err)
	default:
		p.st, err = decodeState(v)
		closer.Close()
		if err != nil {
			return nil, fmt.Errorf("partition %d (group %d): %w", cfg.Index, cfg.Group, err)
		}
	}
	if p.st == (State{}) {
		// Nothing applied yet: no previous batch bounds the first one's
		// time (which may be before 1970).
		p.st.FirstTime, p.st.LastTime = math.MinInt64, math.MinInt64
	}
	p.proposedTime = math.MinInt64
	p.mu.visible = p.st
	p.mu.room = make(chan struct{})
	p.mu.subs = make(map[chan<- struct{}]struct{})
	p.mu.flightTimes = make(map[uint64]int64)
	return p, nil
}

// Group returns the partition's raft group id.
func (p *Partition) Group() uint64 { return p.cfg.Group }

// Index returns the partition number.
func (p *Partition) Index() uint32 { return p.cfg.Index }

// TopicID returns the id of the partition's topic.
func (p *Partition) TopicID() uint64 { return p.cfg.TopicID }

// Bounds returns the visible state: what readers may read.
func (p *Partition) Bounds() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.visible
}

// Leader returns the last known leader's node id (0 if none).
func (p *Partition) Leader() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.leader
}

// Err returns why the partition stopped, or nil.
func (p *Partition) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.err
}

// Notify registers ch to receive a non-blocking send whenever the visible
// state changes or the partition stops. Call the returned func to stop.
func (p *Partition) Notify(ch chan<- struct{}) (cancel func()) {
	p.mu.Lock()
	p.mu.subs[ch] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.mu.subs, ch)
		p.mu.Unlock()
	}
}

func (p *Partition) notifyLocked() {
	for ch := range p.mu.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Enqueue queues records to be appended contiguously and in order. It waits
// while the partition has MaxPendingBytes queued or in flight (publish
// backpressure), until ctx ends. Records must stay untouched until the
// append is done. Wait for the outcome with Append.Wait.
func (p *Partition) Enqueue(ctx context.Context, recs []record.Record) (*Append, error) {
	a := &Append{Records: recs, done: make(chan struct{})}
	for i := range recs {
		a.size += int64(recs[i].EncodedSize())
	}
	p.mu.Lock()
	for p.mu.err == nil && p.mu.pending > 0 && p.mu.pending+a.size > p.cfg.MaxPendingBytes {
		room := p.mu.room
		p.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return nil, fmt.Errorf("partition %d: %w while waiting for room to publish: %w", p.cfg.Index, ErrBusy, ctx.Err())
		}
		p.mu.Lock()
	}
	if err := p.mu.err; err != nil {
		p.mu.Unlock()
		return nil, err
	}
	p.mu.queue = append(p.mu.queue, a)
	p.mu.pending += a.size
	p.mu.Unlock()
	p.cfg.Host.Wake(p.cfg.Group)
	return a, nil
}

// Wait blocks until the append is durable and applied (nil; Segments are
// then set), failed, or ctx ended: the outcome is then unknown, the records
// may still land.
func (a *Append) Wait(ctx context.Context) error {
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// Append is Enqueue then Wait.
func (p *Partition) Append(ctx context.Context, recs []record.Record) (*Append, error) {
	a, err := p.Enqueue(ctx, recs)
	if err != nil {
		return nil, err
	}
	return a, a.Wait(ctx)
}

// Fail stops the partition for readers and publishers with err (for
// example: its topic was deleted) before the host stops the group. Safe
// from any goroutine.
func (p *Partition) Fail(err error) {
	p.mu.Lock()
	if p.mu.err == nil {
		p.mu.err = err
	}
	p.notifyLocked()
	p.mu.Unlock()
}

// TimeWatermark returns a time no later than the append time of any record
// applied from now on: the leader clock, or the time of the oldest batch
// still in flight. A time stop in the future is reached once the watermark
// passes it.
func (p *Partition) TimeWatermark() int64 {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.mu.flightTimes {
		now = min(now, t)
	}
	return now
}

// TakeProposals implements raftlog.StateMachine: it encodes every queued
// append into as few batches as MaxBatchBytes allows.
func (p *Partition) TakeProposals(dst [][]byte) [][]byte {
	p.mu.Lock()
	queue := p.mu.queue
	p.mu.queue = nil
	p.mu.Unlock()
	if len(queue) == 0 {
		return dst
	}
	var cur *flight
	start := func() {
		p.nextID++
		p.proposedTime = max(p.cfg.Now(), p.proposedTime)
		p.builder.Reset(p.nextID, p.proposedTime)
		cur = &flight{time: p.proposedTime}
	}
	finish := func() {
		data := p.builder.Finish()
		entry := make([]byte, 1+len(data))
		entry[0] = kindBatch
		copy(entry[1:], data)
		p.inflight[p.nextID] = cur
		p.mu.Lock()
		p.mu.flightTimes[p.nextID] = cur.time
		p.mu.Unlock()
		dst = append(dst, entry)
		cur = nil
	}
	for _, a := range queue {
		first := 0
		for i := range a.Records {
			r := &a.Records[i]
			if cur != nil && p.builder.Count() > 0 && p.builder.Len()+r.EncodedSize() > p.cfg.MaxBatchBytes {
				if i > first {
					cur.parts = append(cur.parts, flightPart{a: a, first: first, n: i - first})
					a.pending++
				}
				first = i
				finish()
			}
			if cur == nil {
				start()
			}
			p.builder.Add(r)
		}
		if cur == nil {
			start()
		}
		cur.parts = append(cur.parts, flightPart{a: a, first: first, n: len(a.Records) - first})
		a.pending++
	}
	if cur != nil {
		finish()
	}
	return dst
}

// Dropped implements raftlog.StateMachine.
func (p *Partition) Dropped(data [][]byte, err error) {
	for _, d := range data {
		if id, ok := proposalID(d); ok {
			p.failFlight(id, fmt.Errorf("%w: %w", ErrNotLeader, err))
		}
	}
}

func proposalID(entry []byte) (uint64, bool) {
	if len(entry) < 1+record.HeaderSize || entry[0] != kindBatch {
		return 0, false
	}
	return binary.LittleEndian.Uint64(entry[1+6:]), true
}

// forget drops the append times of flights that are no longer in flight.
func (p *Partition) forget(ids ...uint64) {
	p.mu.Lock()
	for _, id := range ids {
		delete(p.mu.flightTimes, id)
	}
	p.mu.Unlock()
}

// complete answers a's waiter and gives its bytes back to publishers. It is
// called exactly once per append, when its last batch is settled.
func (p *Partition) complete(a *Append) {
	close(a.done)
	p.mu.Lock()
	p.mu.pending = max(0, p.mu.pending-a.size)
	close(p.mu.room)
	p.mu.room = make(chan struct{})
	p.mu.Unlock()
}

// settle records that one of a's batches is settled (applied, dropped or
// failed) and completes a after the last.
func (p *Partition) settle(a *Append, err error) {
	a.pending--
	if err != nil && a.err == nil {
		a.err = err
	}
	if a.pending == 0 {
		p.complete(a)
	}
}

// Apply implements raftlog.StateMachine.
func (p *Partition) Apply(w *pebble.Batch, ents []*pb.Entry) error {
	for _, e := range ents {
		data := e.GetData()
		if data[0] != kindBatch {
			return fmt.Errorf("partition %d: entry %d: unknown command kind %d", p.cfg.Index, e.GetIndex(), data[0])
		}
		b, err := record.Parse(data[1:])
		if err != nil {
			// The entry is corrupt in this replica's log: stop the group
			// rather than assign offsets differently from other replicas.
			return fmt.Errorf("partition %d: entry %d: %w: %w", p.cfg.Index, e.GetIndex(), ErrCorrupt, err)
		}
		if err := b.Validate(); err != nil || b.Count() == 0 {
			// Well-formed on the wire but not a valid batch: the proposer
			// built it wrong. Every replica sees the same bytes, so every
			// replica skips it the same way.
			p.log.Error("skipping invalid batch", "partition", p.cfg.Index, "raft-index", e.GetIndex(), "error", err)
			p.failFlight(b.ProposalID(), fmt.Errorf("partition %d: invalid batch: %v", p.cfg.Index, err))
			continue
		}
		t := max(b.AppendTime(), p.st.LastTime)
		base := p.st.Next
		row := indexRow{raftIndex: e.GetIndex(), appendTime: t, span: b.Span()}
		if err := w.Set(keys.OffsetKey(p.cfg.Group, base), row.encode(), nil); err != nil {
			return err
		}
		if err := w.Set(keys.TimeKey(p.cfg.Group, t, base), nil, nil); err != nil {
			return err
		}
		if p.st.Empty() {
			p.st.FirstTime = t
		}
		p.st.Next += uint64(b.Span())
		p.st.LastTime = t
		p.st.Bytes += uint64(len(data) - 1)
		p.st.LastIndex = e.GetIndex()
		p.applied = append(p.applied, appliedBatch{
			batch: &Batch{Base: base, AppendTime: t, Span: b.Span(), RaftIndex: e.GetIndex(), Records: b},
			id:    b.ProposalID(),
		})
	}
	return w.Set(keys.PartitionStateKey(p.cfg.Group), p.st.encode(), nil)
}

func (p *Partition) failFlight(id uint64, err error) {
	f := p.inflight[id]
	if f == nil {
		return
	}
	delete(p.inflight, id)
	p.forget(id)
	for _, part := range f.parts {
		p.settle(part.a, err)
	}
}

// Durable implements raftlog.StateMachine: what Apply wrote is now on disk,
// so it becomes visible to readers and publishers get their answer.
func (p *Partition) Durable() {
	applied := p.applied
	p.applied = nil
	for _, ab := range applied {
		p.cfg.Cache.Put(p.cfg.Group, ab.batch)
	}
	p.mu.Lock()
	p.mu.visible = p.st
	p.notifyLocked()
	p.mu.Unlock()
	for _, ab := range applied {
		f := p.inflight[ab.id]
		if f == nil {
			continue // proposed by another node or an earlier run
		}
		delete(p.inflight, ab.id)
		p.forget(ab.id)
		off := ab.batch.Base
		for _, part := range f.parts {
			part.a.Segments = append(part.a.Segments, Segment{
				First: part.first, Count: part.n, Base: off, AppendTime: ab.batch.AppendTime,
			})
			off += uint64(part.n)
			p.settle(part.a, nil)
		}
	}
}

// LeaderChanged implements raftlog.StateMachine.
func (p *Partition) LeaderChanged(leader, term uint64) {
	p.mu.Lock()
	p.mu.leader = leader
	p.mu.Unlock()
}

// Stopped implements raftlog.StateMachine: every queued and in-flight append
// fails, and readers see the error.
func (p *Partition) Stopped(err error) {
	p.mu.Lock()
	if p.mu.err == nil {
		p.mu.err = errors.Join(ErrStopped, err)
	}
	stopErr := p.mu.err
	queue := p.mu.queue
	p.mu.queue = nil
	p.notifyLocked()
	close(p.mu.room)
	p.mu.room = make(chan struct{})
	p.mu.Unlock()
	for _, a := range queue {
		a.err = stopErr
		p.complete(a)
	}
	for id, f := range p.inflight {
		delete(p.inflight, id)
		p.forget(id)
		for _, part := range f.parts {
			p.settle(part.a, stopErr)
		}
	}
}

var _ raftlog.StateMachine = (*Partition)(nil)
