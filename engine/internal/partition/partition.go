package partition

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/internal/failpoint"
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
	// ErrDiskFull is returned by Enqueue while the store's disk is almost
	// full.
	ErrDiskFull = errors.New("partition: disk almost full, not accepting records")
	// ErrBusy is returned when a publish could not be queued in time because
	// too much is already pending.
	ErrBusy = errors.New("partition: too much pending")
	// ErrOutcomeUnknown is returned when a wait ended before the append's
	// fate was known: it may or may not have been stored.
	ErrOutcomeUnknown = errors.New("partition: outcome unknown")
	// ErrLost is returned (joined to ErrNotLeader) for a proposal a leader
	// change discarded: it was not stored and never will be, so it is safe
	// to retry.
	ErrLost = errors.New("partition: proposal lost in a leader change, not stored")
)

// Command kinds: the first byte of every entry this package proposes.
const (
	kindBatch    = 1 // a record batch (record package), after the batch envelope
	kindGroup    = 2 // a subscriber group command (groups.go)
	kindTruncate = 3 // retention: remove the records below an offset (retention.go)
	kindCompact  = 4 // key compaction: drop records from one batch (retention.go)
	kindBind     = 5 // bind idempotency keys to other partitions (bind.go)
	kindTier     = 6 // tiered storage: a segment joins the manifest (tier.go)
	kindBatchExt = 7 // a record batch with an extension: conditions, ghosts (conditions.go)
)

// batchEnvelope is what precedes a record batch in its raft entry: the kind
// byte, then the raft index the proposer had applied when it checked the
// batch's idempotency keys (8 bytes, little-endian; see dedupe.go).
const batchEnvelope = 9

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
	// DedupeWindow is how long idempotency keys are remembered (see
	// dedupe.go); 0 turns deduplication off.
	DedupeWindow time.Duration
	// KeyIndex keeps the key and tag indexes (keyindex.go): key versions,
	// conditional appends, key and tag reads. Without it an append with
	// conditions is refused (ErrNoKeyIndex).
	KeyIndex bool
	// Policy is the retention and cleanup policy (retention.go); SetPolicy
	// changes it.
	Policy Policy
	// DiskFull, when set and true, makes Enqueue refuse with ErrDiskFull:
	// publishes stop while reads go on.
	DiskFull *atomic.Bool
	Logger   hclog.Logger
	// Timings, when set, counts how long appends wait and take; it may be
	// shared by many partitions.
	Timings *Timings
	// Tier is the object store of tiered storage (tier.go); nil when
	// tiering is off.
	Tier tier.Store
	// TierCache keeps recently read parts of Tier's segments; it may be
	// shared by many partitions. Default: one of the partition's own with
	// tier.NewCache's defaults.
	TierCache *tier.Cache
	// Background, when set, waits for a turn to run a slice of the
	// partition's background work (reading and packing history for the
	// tier) and returns the func that ends it: the node's scheduler gives
	// such work the same bounded, live-first share as replays (package
	// sched). Nil: the work runs unpaced.
	Background func(ctx context.Context) (end func(), err error)
}

// Timings times appends: Queue from Enqueue until the raft loop takes the
// records into a proposal, Store from then until they are durable and
// applied (the acknowledgement).
type Timings struct {
	Queue, Store raftlog.Histogram
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
	// pendingKeys are the idempotency keys of records in flight.
	pendingKeys map[string]struct{}
	// passKeys and passGroups hold what Apply wrote in the current pass
	// (not yet committed, so not readable from the store); cleared by
	// Durable.
	passKeys   map[string]dedupeEntry
	passGroups map[string]passGroup
	// gcFloor: dedupe rows of records appended before it are deleted.
	gcFloor   int64
	opFlights map[uint64]*pendingOp
	opResults []opResult
	// bindFlights are the bind entries in flight; bindResults what Apply
	// answered this pass (bind.go).
	bindFlights map[uint64]*bindFlight
	bindResults []bindResult
	// appliedIndex is the raft index of the last entry applied (a lower
	// bound after a restart: the last batch's).
	appliedIndex uint64
	// logFloor is the highest raft index retention released.
	logFloor uint64
	// passEntries holds batch entries applied or rewritten (by compaction
	// or retention) this pass, by raft index; passRows the offset index
	// rows written this pass, by base offset: both are not in the store
	// until the pass commits.
	passEntries map[uint64][]byte
	passRows    map[uint64]indexRow
	// passTerms holds the terms of the batch entries applied this pass:
	// rewriting one needs it, as the store does not hold the entry yet.
	passTerms map[uint64]uint64
	// raftLeader is the leader raft last reported (LeaderChanged), kept
	// on the raft goroutine: the leader a follower's proposals go to.
	raftLeader uint64
	// proposingTerm is the term this pass's proposals are appended at;
	// appliedTerm the term of the last applied entry. A flight of an
	// earlier term than appliedTerm that is still not applied is lost
	// (raftlog.AppliedTermer).
	proposingTerm, appliedTerm uint64
	// restored is set when a snapshot replaced the state this pass.
	restored bool
	// cacheBelow and cacheReplace tell Durable to drop cached batches below
	// the new log start and to swap in compacted ones.
	cacheBelow   uint64
	cacheReplace []*Batch
	// tierRows is the applied tiered storage manifest (tier.go), replaced
	// (never modified) when it changes; tierChanged tells Durable to
	// publish it.
	tierRows    []TierSegment
	tierChanged bool
	// passHeads and passIndex are the key heads and index terms this pass
	// wrote (keyindex.go); headCache caches key heads the store holds;
	// applyIter reads the key index during one Apply.
	passHeads    map[string]uint64
	passIndex    map[string][]uint64
	passVersions map[uint64][]byte // by base offset
	rowBuf       []byte            // scratch key of an index row
	headCache    map[string]uint64
	applyIter    *pebble.Iterator

	mu struct {
		sync.Mutex
		visible State
		tier    []TierSegment // the visible manifest
		leader  uint64
		// lastLeader is the last non-zero leader; leaderChanged is closed
		// and replaced at every change of leader.
		lastLeader    uint64
		leaderChanged chan struct{}
		// leaderTerm is the term of the last leader change, visibleTerm
		// the term of the last entry visible to readers (LeaderApplied).
		leaderTerm, visibleTerm uint64
		queue                   []*Append
		ops                     []*pendingOp
		binds                   []*pendingBind
		policy                  Policy
		// localTruncatingTo is the highest local log start a local
		// truncate applied (tier.go): a local read below it that fails is
		// read again from the tiered copy.
		localTruncatingTo uint64
		// truncatingTo is the highest log start a truncate applied (maybe
		// not visible yet).
		truncatingTo uint64
		pending      int64         // bytes queued or in flight
		room         chan struct{} // closed when pending drops
		subs         map[chan<- struct{}]struct{}
		err          error // set once stopped
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
	keys  []string // idempotency keys it carries
	term  uint64   // the raft term it was proposed at
}

type flightPart struct {
	a     *Append
	first int // position, among the append's kept records, of the first carried here
	n     int
}

// Append is one publish to this partition: records that must land
// contiguously, in order.
type Append struct {
	Records []record.Record
	// Results, valid after Wait returns nil: one segment per batch the
	// stored records were split into, in order, and the records that were
	// already stored (same idempotency key within the dedupe window). Use
	// Each to walk both.
	Segments   []Segment
	Duplicates []Duplicate
	// Conds, when not empty, makes the append conditional (conditions.go):
	// its records are proposed as one batch, appended only if every
	// condition holds when the batch is applied; otherwise Wait returns a
	// *ConditionError.
	Conds *Conditions
	// Elsewhere lists records not stored because their idempotency key is
	// bound to another partition with the same contents (bind.go): they
	// belong there. Each does not report them.
	Elsewhere []Moved

	// kept lists the indexes of the records proposed (not duplicates), in
	// order; nil means all of them.
	kept []int
	size int64
	// enqueued and taken time the append (Config.Timings).
	enqueued, taken time.Time
	pending         int // batches not yet applied
	err             error
	done            chan struct{}
}

// Segment says where a run of an append's stored records landed.
type Segment struct {
	First      int // position among the stored records (see Append.Each)
	Count      int
	Base       uint64 // offset of Records[First]
	AppendTime int64
	batch      *Batch // the batch they landed in (for key versions)
}

// Stored is where one record of an append is stored.
type Stored struct {
	Offset     uint64
	AppendTime int64
	// Duplicate: the record had been stored before (same idempotency key
	// within the dedupe window); Offset is the original's.
	Duplicate bool
	// Version is the record's key version when HasVersion (it has a key).
	Version    uint64
	HasVersion bool
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
	if cfg.Tier != nil && cfg.TierCache == nil {
		cfg.TierCache = tier.NewCache(tier.CacheConfig{})
	}
	p := &Partition{
		cfg: cfg, log: cfg.Logger, inflight: make(map[uint64]*flight),
		pendingKeys: make(map[string]struct{}), passKeys: make(map[string]dedupeEntry),
		passGroups: make(map[string]passGroup), opFlights: make(map[uint64]*pendingOp),
		bindFlights:  make(map[uint64]*bindFlight),
		passEntries:  make(map[uint64][]byte),
		passRows:     make(map[uint64]indexRow),
		passTerms:    make(map[uint64]uint64),
		gcFloor:      math.MinInt64,
		passHeads:    make(map[string]uint64),
		passIndex:    make(map[string][]uint64),
		passVersions: make(map[uint64][]byte),
		headCache:    make(map[string]uint64),
	}
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
	if err := p.verify(); err != nil {
		return nil, err
	}
	if err := p.loadTier(); err != nil {
		return nil, err
	}
	if fresh := (State{PayloadKnown: p.st.PayloadKnown}); p.st == fresh {
		// Nothing applied yet: no previous batch bounds the first one's
		// time (which may be before 1970).
		p.st.FirstTime, p.st.LastTime = math.MinInt64, math.MinInt64
		p.st.PayloadKnown = true
	}
	p.proposedTime = math.MinInt64
	p.appliedIndex = p.st.LastIndex
	p.mu.policy = cfg.Policy
	p.mu.visible = p.st
	p.mu.tier = p.tierRows
	p.mu.room = make(chan struct{})
	p.mu.subs = make(map[chan<- struct{}]struct{})
	p.mu.leaderChanged = make(chan struct{})
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
	return readable(p.mu.visible, p.mu.tier)
}

// local returns the visible state of what this node stores itself: its
// LogStart is the first offset in the local store.
func (p *Partition) local() State {
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

// LeaderWatch returns the known leader (0 if none) and a channel closed
// when that changes: a new leader, or none (an election, or this replica
// stopped hearing from the leader for an election timeout).
func (p *Partition) LeaderWatch() (leader uint64, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.leader, p.mu.leaderChanged
}

// LastLeader returns the last leader this replica knew of, also while it
// knows none now (0: never one).
func (p *Partition) LastLeader() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.lastLeader
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
	return p.EnqueueIf(ctx, recs, nil)
}

// EnqueueIf is Enqueue for an append that is stored only if conds hold
// when it is applied (nil: unconditional).
func (p *Partition) EnqueueIf(ctx context.Context, recs []record.Record, conds *Conditions) (*Append, error) {
	a := &Append{Records: recs, done: make(chan struct{})}
	if !conds.Empty() {
		if !p.cfg.KeyIndex {
			return nil, fmt.Errorf("partition %d: %w", p.cfg.Index, ErrNoKeyIndex)
		}
		a.Conds = conds
	}
	if p.cfg.Timings != nil {
		a.enqueued = time.Now()
	}
	for i := range recs {
		a.size += int64(recs[i].EncodedSize())
	}
	if p.cfg.DiskFull != nil && p.cfg.DiskFull.Load() {
		return nil, ErrDiskFull
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

// Each calls fn for every record of the append, once, with where it is
// stored, its key version, and whether it had been stored before (a
// duplicate).
func (a *Append) Each(fn func(index int, s Stored)) {
	for _, seg := range a.Segments {
		var vs Versions
		if seg.batch != nil {
			vs = seg.batch.Versions()
		}
		for k := range seg.Count {
			s := Stored{Offset: seg.Base + uint64(k), AppendTime: seg.AppendTime}
			if seg.batch != nil {
				s.Version, s.HasVersion = vs.Lookup(uint32(s.Offset - seg.batch.Base))
			}
			fn(a.index(seg.First+k), s)
		}
	}
	for _, d := range a.Duplicates {
		fn(d.Index, Stored{Offset: d.Offset, AppendTime: d.AppendTime, Duplicate: true, Version: d.Version, HasVersion: d.HasVersion})
	}
}

// index maps a position among the kept records to a record index.
func (a *Append) index(pos int) int {
	if a.kept == nil {
		return pos
	}
	return a.kept[pos]
}

// keptLen returns how many records are proposed.
func (a *Append) keptLen() int {
	if a.kept == nil {
		return len(a.Records)
	}
	return len(a.kept)
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
// group command, and every queued append into as few batches as
// MaxBatchBytes allows, leaving out records already stored (dedupe.go).
func (p *Partition) TakeProposals(dst [][]byte) [][]byte {
	p.mu.Lock()
	queue, ops, binds := p.mu.queue, p.mu.ops, p.mu.binds
	p.mu.queue, p.mu.ops, p.mu.binds = nil, nil, nil
	p.mu.Unlock()
	dst = p.proposeOps(dst, ops)
	if len(binds) > 0 {
		var waiting []*pendingBind
		dst, waiting = p.proposeBinds(dst, binds)
		if len(waiting) > 0 {
			p.mu.Lock()
			p.mu.binds = append(waiting, p.mu.binds...)
			p.mu.Unlock()
		}
	}
	if len(queue) == 0 {
		return dst
	}
	var cur *flight
	start := func() {
		p.nextID++
		p.proposedTime = max(p.cfg.Now(), p.proposedTime)
		p.builder.Reset(p.nextID, p.proposedTime)
		cur = &flight{time: p.proposedTime, term: p.proposingTerm}
	}
	var ext []byte // the extension of the batch being built
	finish := func() {
		entry := encodeBatchEntry(p.appliedIndex, ext, p.builder.Finish())
		ext = nil
		p.inflight[p.nextID] = cur
		p.mu.Lock()
		p.mu.flightTimes[p.nextID] = cur.time
		p.mu.Unlock()
		dst = append(dst, entry)
		cur = nil
	}
	var deferred []*Append
	if t := p.cfg.Timings; t != nil {
		now := time.Now()
		for _, a := range queue {
			if a.taken.IsZero() {
				a.taken = now
				t.Queue.Add(now.Sub(a.enqueued))
			}
		}
	}
	for _, a := range queue {
		if p.cfg.DedupeWindow > 0 && !failpoint.Enabled(failpoint.BugSkipDedupe) {
			switch p.checkDuplicates(a) {
			case dedupeDefer:
				// A record with one of its keys is in flight: decide once
				// that batch is applied (Durable wakes us).
				deferred = append(deferred, a)
				continue
			case dedupeFailed:
				p.complete(a)
				continue
			}
		}
		n := a.keptLen()
		if n == 0 {
			p.complete(a) // every record was a duplicate
			continue
		}
		// A conditional append is one batch of its own, whatever its size:
		// apply takes or refuses it whole.
		conditional := a.Conds != nil
		if conditional && cur != nil {
			finish()
		}
		first := 0
		for j := range n {
			r := &a.Records[a.index(j)]
			if !conditional && cur != nil && p.builder.Count() > 0 && p.builder.Len()+r.EncodedSize() > p.cfg.MaxBatchBytes {
				if j > first {
					cur.parts = append(cur.parts, flightPart{a: a, first: first, n: j - first})
					a.pending++
				}
				first = j
				finish()
			}
			if cur == nil {
				start()
			}
			p.builder.Add(r)
			if len(r.IdempotencyKey) > 0 && p.cfg.DedupeWindow > 0 {
				cur.keys = append(cur.keys, string(r.IdempotencyKey))
			}
		}
		cur.parts = append(cur.parts, flightPart{a: a, first: first, n: n - first})
		a.pending++
		if conditional {
			x := batchExt{conds: *a.Conds}
			ext = x.encode()
			finish()
		}
	}
	if cur != nil {
		finish()
	}
	if len(deferred) > 0 {
		p.mu.Lock()
		p.mu.queue = append(deferred, p.mu.queue...)
		p.mu.Unlock()
	}
	return dst
}

// Dropped implements raftlog.StateMachine.
func (p *Partition) Dropped(data [][]byte, err error) {
	for _, d := range data {
		if id, ok := proposalID(d); ok {
			p.failFlight(id, fmt.Errorf("%w: %w", ErrNotLeader, err))
			p.failOp(id, fmt.Errorf("%w: %w", ErrNotLeader, err))
			p.failBind(id, fmt.Errorf("%w: %w", ErrNotLeader, err))
		}
	}
}

func (p *Partition) failOp(id uint64, err error) {
	if po := p.opFlights[id]; po != nil {
		delete(p.opFlights, id)
		po.err = err
		close(po.done)
	}
}

func proposalID(entry []byte) (uint64, bool) {
	switch {
	case len(entry) >= batchEnvelope+record.HeaderSize && isBatchKind(entry[0]):
		be, err := parseBatchEntry(entry)
		if err != nil || len(be.batch) < record.HeaderSize {
			return 0, false
		}
		return binary.LittleEndian.Uint64(be.batch[6:]), true
	case len(entry) >= 9 && (entry[0] == kindGroup || entry[0] == kindTruncate || entry[0] == kindCompact || entry[0] == kindBind || entry[0] == kindTier):
		return binary.LittleEndian.Uint64(entry[1:]), true
	}
	return 0, false
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
	if t := p.cfg.Timings; t != nil && !a.taken.IsZero() {
		t.Store.Add(time.Since(a.taken))
	}
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
	defer p.closeApplyIter()
	for _, e := range ents {
		data := e.GetData()
		p.appliedIndex = e.GetIndex()
		switch data[0] {
		case kindBatch, kindBatchExt:
		case kindGroup, kindTruncate, kindCompact, kindTier:
			if err := p.applyCommand(w, data); err != nil {
				return fmt.Errorf("partition %d: entry %d: %w", p.cfg.Index, e.GetIndex(), err)
			}
			continue
		case kindBind:
			if err := p.applyBind(w, e.GetIndex(), data); err != nil {
				return fmt.Errorf("partition %d: entry %d: bind: %w", p.cfg.Index, e.GetIndex(), err)
			}
			continue
		default:
			return fmt.Errorf("partition %d: entry %d: unknown command kind %d", p.cfg.Index, e.GetIndex(), data[0])
		}
		be, err := parseBatchEntry(data)
		if err != nil {
			return fmt.Errorf("partition %d: entry %d: %w", p.cfg.Index, e.GetIndex(), err)
		}
		checked := be.checked
		var ext batchExt
		if be.ext != nil {
			if ext, err = decodeExt(be.ext); err != nil {
				return fmt.Errorf("partition %d: entry %d: %w", p.cfg.Index, e.GetIndex(), err)
			}
		}
		b, err := record.Parse(be.batch)
		if err != nil {
			// The entry is corrupt in this replica's log: stop the group
			// rather than assign offsets differently from other replicas.
			return fmt.Errorf("partition %d: entry %d: %w: %w", p.cfg.Index, e.GetIndex(), ErrCorrupt, err)
		}
		payload, err := b.ValidatePayload()
		// A batch with no record but a span is one that key compaction
		// emptied on the leader and rewrote in place (compactBatch keeps
		// it so that its offsets stay taken). A replica that lagged gets
		// it in that form from the leader's store and must give it the
		// same offsets; only a batch with nothing in it at all is invalid.
		if err != nil || b.Span() == 0 {
			// Well-formed on the wire but not a valid batch: the proposer
			// built it wrong. Every replica sees the same bytes, so every
			// replica skips it the same way.
			p.log.Error("skipping invalid batch", "partition", p.cfg.Index, "raft-index", e.GetIndex(), "error", err)
			p.failFlight(b.ProposalID(), fmt.Errorf("partition %d: invalid batch: %v", p.cfg.Index, err))
			continue
		}
		t := max(b.AppendTime(), p.st.LastTime)
		base := p.st.Next
		inc := b.ProposalID() >> 32
		if p.cfg.DedupeWindow > 0 && p.mustCheckKeys(inc, checked) && !failpoint.Enabled(failpoint.BugSkipApplyDedupe) {
			dup, err := p.dupAtApply(b, t)
			if err != nil {
				return fmt.Errorf("partition %d: entry %d: dedupe: %w", p.cfg.Index, e.GetIndex(), err)
			}
			if dup {
				p.log.Warn("skipping batch with an already stored idempotency key", "partition", p.cfg.Index, "raft-index", e.GetIndex())
				p.failFlight(b.ProposalID(), errDuplicateAtApply)
				continue
			}
		}
		if !ext.conds.Empty() && !p.cfg.KeyIndex {
			// Only a proposer with another configuration could send it:
			// refused alike everywhere.
			p.failFlight(b.ProposalID(), fmt.Errorf("partition %d: %w", p.cfg.Index, ErrNoKeyIndex))
			continue
		}
		if !ext.conds.Empty() && !failpoint.Enabled(failpoint.BugSkipConditions) {
			refused, err := p.checkConditions(&ext.conds)
			if err != nil {
				return fmt.Errorf("partition %d: entry %d: conditions: %w", p.cfg.Index, e.GetIndex(), err)
			}
			if refused != nil {
				p.failFlight(b.ProposalID(), refused)
				continue
			}
		}
		if p.cfg.DedupeWindow > 0 {
			if err := p.writeDedupe(w, b, base, t); err != nil {
				return fmt.Errorf("partition %d: entry %d: dedupe: %w", p.cfg.Index, e.GetIndex(), err)
			}
			if err := p.expireDedupe(w, t-int64(p.cfg.DedupeWindow)); err != nil {
				return fmt.Errorf("partition %d: entry %d: dedupe expiry: %w", p.cfg.Index, e.GetIndex(), err)
			}
		}
		var versions []byte
		if p.cfg.KeyIndex {
			if versions, err = p.indexBatch(w, b, base, ext.ghosts); err != nil {
				return fmt.Errorf("partition %d: entry %d: key index: %w", p.cfg.Index, e.GetIndex(), err)
			}
		}
		if versions != nil {
			p.passVersions[base] = versions
		}
		row := indexRow{raftIndex: e.GetIndex(), appendTime: t, span: b.Span(), size: uint32(len(be.batch)),
			payload: uint32(min(payload, math.MaxUint32)), hasPayload: true}
		if err := w.Set(keys.OffsetKey(p.cfg.Group, base), row.encode(), nil); err != nil {
			return err
		}
		// Not readable from the store until the pass commits: a retention
		// or compaction command later in this pass finds it here.
		p.passRows[base] = row
		p.passEntries[e.GetIndex()] = data
		p.passTerms[e.GetIndex()] = e.GetTerm()
		if err := w.Set(keys.TimeKey(p.cfg.Group, t, base), nil, nil); err != nil {
			return err
		}
		if p.st.Empty() {
			p.st.FirstTime = t
			p.st.Payload, p.st.PayloadKnown = 0, true
		}
		p.st.Payload += payload
		p.st.Next += uint64(b.Span())
		p.st.LastTime = t
		p.st.Bytes += uint64(len(be.batch))
		if inc != p.st.LastProposer {
			// Everything before this entry counts as another
			// incarnation's: bind entries write rows too (bind.go).
			p.st.LastOther, p.st.LastProposer = e.GetIndex()-1, inc
		}
		p.st.LastIndex = e.GetIndex()
		p.applied = append(p.applied, appliedBatch{
			batch: &Batch{Base: base, AppendTime: t, Span: b.Span(), RaftIndex: e.GetIndex(), Records: b, KeyVersions: versions},
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
	p.releaseKeys(f.keys)
	for _, part := range f.parts {
		p.settle(part.a, err)
	}
}

// releaseKeys forgets a settled flight's pending keys, and wakes the host if
// appends or binds wait for them.
func (p *Partition) releaseKeys(keys []string) {
	if len(keys) == 0 {
		return
	}
	for _, k := range keys {
		delete(p.pendingKeys, k)
	}
	p.mu.Lock()
	waiting := len(p.mu.queue) > 0 || len(p.mu.binds) > 0
	p.mu.Unlock()
	if waiting {
		p.cfg.Host.Wake(p.cfg.Group)
	}
}

// Durable implements raftlog.StateMachine: what Apply wrote is now on disk,
// so it becomes visible to readers and publishers get their answer.
func (p *Partition) Durable() {
	applied := p.applied
	p.applied = nil
	clear(p.passKeys)
	clear(p.passGroups)
	clear(p.passEntries)
	clear(p.passRows)
	clear(p.passTerms)
	for k, v := range p.passHeads {
		if len(p.headCache) >= headCacheMax {
			clear(p.headCache)
		}
		p.headCache[k] = v
	}
	clear(p.passHeads)
	clear(p.passIndex)
	clear(p.passVersions)
	if p.restored {
		p.restored = false
		p.cfg.Cache.Drop(p.cfg.Group)
	}
	// Batches applied this pass first: retention or compaction later in
	// the pass may have removed or rewritten them.
	for _, ab := range applied {
		p.cfg.Cache.Put(p.cfg.Group, ab.batch)
	}
	if p.cacheBelow > 0 {
		p.cfg.Cache.DropBelow(p.cfg.Group, p.cacheBelow)
	}
	for _, b := range p.cacheReplace {
		p.cfg.Cache.Replace(p.cfg.Group, b)
	}
	p.cacheReplace = nil
	p.mu.Lock()
	p.mu.visible = p.st
	if p.tierChanged {
		p.mu.tier, p.tierChanged = p.tierRows, false
	}
	p.mu.visibleTerm = p.appliedTerm
	p.notifyLocked()
	p.mu.Unlock()
	// Answer commands only now: whoever waits sees their effect (a new log
	// start) in Bounds.
	results := p.opResults
	p.opResults = nil
	for _, r := range results {
		if po := p.opFlights[r.id]; po != nil {
			delete(p.opFlights, r.id)
			po.state, po.err = r.state, r.err
			close(po.done)
		}
	}
	defer p.failLost()
	p.answerBinds()
	for _, ab := range applied {
		f := p.inflight[ab.id]
		if f == nil {
			continue // proposed by another node or an earlier run
		}
		delete(p.inflight, ab.id)
		p.forget(ab.id)
		p.releaseKeys(f.keys)
		off := ab.batch.Base
		for _, part := range f.parts {
			part.a.Segments = append(part.a.Segments, Segment{
				First: part.first, Count: part.n, Base: off, AppendTime: ab.batch.AppendTime, batch: ab.batch,
			})
			off += uint64(part.n)
			p.settle(part.a, nil)
		}
	}
}

// Proposing implements raftlog.ProposalTermer.
func (p *Partition) Proposing(term uint64) { p.proposingTerm = term }

// AppliedTerm implements raftlog.AppliedTermer.
func (p *Partition) AppliedTerm(term uint64) { p.appliedTerm = max(p.appliedTerm, term) }

// failLost fails the proposals a leader change discarded: proposed under a
// term older than the last applied entry's and still not applied, they can
// never commit. Called from Durable, after the applied ones are answered.
func (p *Partition) failLost() {
	lost := fmt.Errorf("partition %d: %w: %w", p.cfg.Index, ErrNotLeader, ErrLost)
	for id, f := range p.inflight {
		if f.term != 0 && f.term < p.appliedTerm {
			p.failFlight(id, lost)
		}
	}
	for id, po := range p.opFlights {
		if po.term != 0 && po.term < p.appliedTerm {
			p.failOp(id, lost)
		}
	}
	for id, f := range p.bindFlights {
		if f.term != 0 && f.term < p.appliedTerm {
			p.failBind(id, lost)
		}
	}
}

// LeaderChanged implements raftlog.StateMachine. Commands this replica
// forwarded to the old leader and that are still unanswered fail with
// ErrOutcomeUnknown: raft does not resend a forwarded proposal, so one
// the old leader never appended would otherwise wait out its caller's
// deadline (a group reset or commit holding its group that long), while
// one it did append may still commit under the new leader. Commands
// applied this pass were answered by Durable, which runs first.
func (p *Partition) LeaderChanged(leader, term uint64) {
	if leader != p.raftLeader {
		for id, po := range p.opFlights {
			if po.forwardedTo != 0 && po.forwardedTo != leader {
				p.failOp(id, fmt.Errorf("partition %d: %w: the command was forwarded to leader %d, which lost the leadership before answering",
					p.cfg.Index, ErrOutcomeUnknown, po.forwardedTo))
			}
		}
		p.raftLeader = leader
	}
	p.mu.Lock()
	if leader != p.mu.leader {
		close(p.mu.leaderChanged)
		p.mu.leaderChanged = make(chan struct{})
	}
	p.mu.leader, p.mu.leaderTerm = leader, term
	if leader != 0 {
		p.mu.lastLeader = leader
	}
	p.mu.Unlock()
}

// LeaderApplied reports whether the leader's own term has an entry
// visible here: from then on this replica holds everything ever
// acknowledged (raft commits a new leader's first entry only after all
// before it), so a leader serves reads only once it is true.
func (p *Partition) LeaderApplied() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.leaderTerm != 0 && p.mu.visibleTerm >= p.mu.leaderTerm
}

// Stopped implements raftlog.StateMachine: every queued and in-flight append
// fails, and readers see the error.
func (p *Partition) Stopped(err error) {
	p.mu.Lock()
	if p.mu.err == nil {
		p.mu.err = errors.Join(ErrStopped, err)
	}
	stopErr := p.mu.err
	queue, ops, binds := p.mu.queue, p.mu.ops, p.mu.binds
	p.mu.queue, p.mu.ops, p.mu.binds = nil, nil, nil
	p.notifyLocked()
	close(p.mu.room)
	p.mu.room = make(chan struct{})
	p.mu.Unlock()
	for _, a := range queue {
		a.err = stopErr
		p.complete(a)
	}
	for _, po := range ops {
		po.err = stopErr
		close(po.done)
	}
	for id := range p.opFlights {
		p.failOp(id, stopErr)
	}
	for _, pb := range binds {
		pb.err = stopErr
		close(pb.done)
	}
	for id := range p.bindFlights {
		p.failBind(id, stopErr)
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
