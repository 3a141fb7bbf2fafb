package partition

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/raftlog"
)

// Batch is an applied batch: its records and where they sit.
type Batch struct {
	Base       uint64 // offset of the record with delta 0
	AppendTime int64  // effective append time of every record in it
	Span       uint32
	RaftIndex  uint64
	Records    record.Batch
	// KeyVersions are the key versions of its keyed records, encoded
	// (keyindex.go); read them with Versions.
	KeyVersions []byte
}

// End returns the offset after the batch.
func (b *Batch) End() uint64 { return b.Base + uint64(b.Span) }

func (b *Batch) size() int64 { return int64(len(b.Records.Bytes())) + 96 }

// SeekTime returns the offset of the first record with append time >= t, or
// the end offset if there is none yet.
func (p *Partition) SeekTime(t int64) (uint64, error) {
	vis := p.Bounds()
	if vis.Empty() || t > vis.LastTime {
		return vis.Next, nil
	}
	if t <= vis.FirstTime {
		return vis.LogStart, nil
	}
	if loc := p.local(); vis.LogStart < loc.LogStart && (loc.Empty() || t <= loc.FirstTime) {
		return p.seekTier(t, vis.LogStart, loc.LogStart)
	}
	vis = p.local()
	_, end := keys.GroupSpan(keys.Time, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: keys.TimeSeekKey(p.cfg.Group, t), UpperBound: end})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.First() {
		if err := it.Error(); err != nil {
			return 0, err
		}
		return vis.Next, nil
	}
	base, ok := keys.TimeKeyBase(it.Key())
	if !ok {
		return 0, fmt.Errorf("partition %d: %w: bad time index key %x", p.cfg.Index, ErrCorrupt, it.Key())
	}
	return min(max(base, vis.LogStart), vis.Next), nil
}

// TimeOf returns the append time of the record at offset, which must be
// stored (within [log start, end)).
func (p *Partition) TimeOf(offset uint64) (int64, error) {
	vis := p.Bounds()
	if offset < vis.LogStart || offset >= vis.Next {
		return 0, fmt.Errorf("%w: offset %d outside [%d, %d)", ErrBelowStart, offset, vis.LogStart, vis.Next)
	}
	if b := p.cfg.Cache.Get(p.cfg.Group, offset); b != nil {
		return b.AppendTime, nil
	}
	if offset < p.local().LogStart {
		return p.timeOfTier(offset)
	}
	row, _, err := p.lookup(offset, vis)
	if err != nil {
		return 0, err
	}
	return row.appendTime, nil
}

// lookup finds the offset index row of the batch containing offset.
func (p *Partition) lookup(offset uint64, vis State) (indexRow, uint64, error) {
	start, _ := keys.GroupSpan(keys.Offset, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: keys.OffsetKey(p.cfg.Group, offset+1)})
	if err != nil {
		return indexRow{}, 0, err
	}
	defer it.Close()
	if !it.Last() {
		if err := it.Error(); err != nil {
			return indexRow{}, 0, err
		}
		return indexRow{}, 0, fmt.Errorf("partition %d: %w: no index row at or below offset %d", p.cfg.Index, ErrCorrupt, offset)
	}
	base, ok := keys.OffsetKeyBase(it.Key())
	if !ok {
		return indexRow{}, 0, fmt.Errorf("partition %d: %w: bad offset index key %x", p.cfg.Index, ErrCorrupt, it.Key())
	}
	row, err := decodeIndexRow(it.Value())
	if err != nil {
		return indexRow{}, 0, err
	}
	if offset >= base+uint64(row.span) {
		return indexRow{}, 0, fmt.Errorf("partition %d: %w: offset %d not in the batch at %d", p.cfg.Index, ErrCorrupt, offset, base)
	}
	return row, base, nil
}

// InTail reports whether the batch holding offset is in the tail cache: a
// read there touches no disk.
func (p *Partition) InTail(offset uint64) bool { return p.cfg.Cache.Get(p.cfg.Group, offset) != nil }

// Reader reads a partition's batches in offset order: from the tail cache
// when it has them, otherwise from Pebble through two iterators moving in
// step (the offset index and the raft log). A Reader is not safe for
// concurrent use; Close it when done.
type Reader struct {
	p *Partition
	// Pebble state, opened lazily and reopened when the caller jumps or
	// reaches the bound the iterators were opened with.
	oit    *pebble.Iterator
	lit    *raftlog.LogIterator
	upper  uint64 // visible end when the iterators were opened
	expect uint64 // base of the batch the next sequential Read wants
	cur    *Batch
	tier   tierHold // the tiered segment and window last read (tier.go)
}

// NewReader returns a reader over p.
func (p *Partition) NewReader() *Reader { return &Reader{p: p} }

// Read returns the batch containing offset from, which must be below the
// visible end. The batch and its bytes stay valid and are never modified;
// fromCache says whether it came from the tail cache (no disk read).
func (r *Reader) Read(from uint64) (b *Batch, fromCache bool, err error) {
	p := r.p
	if cb := p.cfg.Cache.Get(p.cfg.Group, from); cb != nil {
		// The batch holding the log start stays cached, its head trimmed
		// by retention: an offset below the log start is not read from it.
		p.mu.Lock()
		start := max(p.mu.visible.ReadStart, p.mu.truncatingTo)
		p.mu.Unlock()
		if from < start {
			r.closeIters()
			return nil, false, fmt.Errorf("%w: offset %d, log start %d", ErrBelowStart, from, start)
		}
		r.closeIters()
		return cb, true, nil
	}
	vis := p.Bounds()
	if from < vis.LogStart {
		return nil, false, fmt.Errorf("%w: offset %d, log start %d", ErrBelowStart, from, vis.LogStart)
	}
	if from >= vis.Next {
		return nil, false, fmt.Errorf("partition %d: read at %d past the end %d", p.cfg.Index, from, vis.Next)
	}
	if loc := p.local(); from < loc.LogStart {
		r.closeIters()
		b, err := p.readTier(from, &r.tier)
		if err != nil {
			return nil, false, r.belowStart(from, err)
		}
		return b, false, nil
	}
	vis = p.local()
	if r.oit != nil && from == r.expect && from < r.upper {
		if !r.oit.Next() {
			r.closeIters()
		}
	} else {
		r.closeIters()
	}
	if r.oit == nil {
		if err := r.open(from, vis); err != nil {
			r.closeIters()
			return r.retryTier(from, err)
		}
	}
	if err := r.load(from); err != nil {
		r.closeIters()
		return r.retryTier(from, err)
	}
	r.expect = r.cur.End()
	return r.cur, false, nil
}

// retryTier handles a failed local read: if a local truncate removed the
// batch meanwhile, it is read from its tiered copy; otherwise belowStart.
func (r *Reader) retryTier(from uint64, err error) (*Batch, bool, error) {
	r.p.mu.Lock()
	moved := from < r.p.mu.localTruncatingTo
	r.p.mu.Unlock()
	if moved {
		if b, terr := r.p.readTier(from, &r.tier); terr == nil {
			return b, false, nil
		}
	}
	return nil, false, r.belowStart(from, err)
}

// belowStart reports a read that failed because retention removed what it
// was reading (the log start moved past it meanwhile) as ErrBelowStart, not
// as corruption.
func (r *Reader) belowStart(from uint64, err error) error {
	r.p.mu.Lock()
	start := max(r.p.mu.visible.ReadStart, r.p.mu.truncatingTo)
	r.p.mu.Unlock()
	if from < start {
		return fmt.Errorf("%w: offset %d, log start %d (retention ran during the read)", ErrBelowStart, from, start)
	}
	return err
}

func (r *Reader) open(from uint64, vis State) error {
	p := r.p
	start, _ := keys.GroupSpan(keys.Offset, p.cfg.Group)
	oit, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: keys.OffsetKey(p.cfg.Group, vis.Next)})
	if err != nil {
		return err
	}
	r.oit, r.upper = oit, vis.Next
	if !oit.SeekLT(keys.OffsetKey(p.cfg.Group, from+1)) {
		return errors.Join(fmt.Errorf("partition %d: %w: no index row at or below offset %d", p.cfg.Index, ErrCorrupt, from), oit.Error())
	}
	row, err := decodeIndexRow(oit.Value())
	if err != nil {
		return err
	}
	lit, err := raftlog.NewLogIterator(p.cfg.DB, p.cfg.Group, row.raftIndex, vis.LastIndex+1)
	if err != nil {
		return err
	}
	r.lit = lit
	return nil
}

// load decodes the batch at the offset iterator's position.
func (r *Reader) load(from uint64) error {
	p := r.p
	base, ok := keys.OffsetKeyBase(r.oit.Key())
	if !ok {
		return fmt.Errorf("partition %d: %w: bad offset index key %x", p.cfg.Index, ErrCorrupt, r.oit.Key())
	}
	row, err := decodeIndexRow(r.oit.Value())
	if err != nil {
		return err
	}
	if from < base || from >= base+uint64(row.span) {
		return fmt.Errorf("partition %d: %w: offset %d not in the batch at %d", p.cfg.Index, ErrCorrupt, from, base)
	}
	// Step the log iterator to the batch's entry; entries in between are
	// raft's own or skipped batches.
	for !r.lit.Valid() || r.lit.Index() < row.raftIndex {
		if !r.lit.Next() {
			return errors.Join(fmt.Errorf("partition %d: %w: raft entry %d of offset %d missing", p.cfg.Index, ErrCorrupt, row.raftIndex, base), r.lit.Err())
		}
	}
	if r.lit.Index() != row.raftIndex {
		return fmt.Errorf("partition %d: %w: raft entry %d of offset %d missing", p.cfg.Index, ErrCorrupt, row.raftIndex, base)
	}
	be, err := parseBatchEntry(r.lit.Data())
	if err != nil {
		return fmt.Errorf("partition %d: raft entry %d: %w", p.cfg.Index, row.raftIndex, err)
	}
	// Copy: the iterator's memory is reused as it moves (a block of the
	// store's cache), and a stream may hold records of several batches in
	// one event. The CRC is checked on the copy that will be delivered.
	rb, err := record.Parse(bytes.Clone(be.batch))
	if err != nil {
		return fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, base, ErrCorrupt, err)
	}
	if rb.Span() != row.span {
		return fmt.Errorf("partition %d offset %d: %w: batch span %d, index says %d", p.cfg.Index, base, ErrCorrupt, rb.Span(), row.span)
	}
	versions, err := p.versionsAt(p.cfg.DB, base)
	if err != nil {
		return err
	}
	r.cur = &Batch{Base: base, AppendTime: row.appendTime, Span: row.span, RaftIndex: row.raftIndex, Records: rb, KeyVersions: versions}
	return nil
}

func (r *Reader) closeIters() {
	if r.oit != nil {
		r.oit.Close()
		r.oit = nil
	}
	if r.lit != nil {
		r.lit.Close()
		r.lit = nil
	}
}

// Close releases the reader's iterators.
func (r *Reader) Close() {
	r.closeIters()
	r.tier = tierHold{}
}
