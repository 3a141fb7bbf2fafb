package partition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/internal/failpoint"
	"github.com/rewind-io/rewind/raftlog"
)

// Retention and key compaction.
//
// Both are decided by the leader, off the raft loop (PlanRetention,
// PlanCompaction, called by the broker's housekeeping), and executed as raft
// commands, so every replica removes exactly the same records:
//
//   - truncate {offset X}: every record below X goes. Batches entirely
//     below it go with one range deletion each on the offset index, the
//     time index and the raft log (the log is the data); the batch holding
//     X, if X is inside it, is rewritten without its records below X, the
//     way compaction rewrites batches (offsets, span and append time kept).
//     The log start becomes X, so it may be inside a batch. Offsets are
//     never reused.
//   - compact {batch, deltas}: the batch's raft entry is rewritten without
//     those records (record.Compact keeps every other offset and the span),
//     its index row records the new size. Offsets of dropped records simply
//     disappear; nothing is reordered.
//
// A plan can be stale by the time it applies (retention ran meanwhile, or
// the batch was compacted already); apply checks and skips what no longer
// fits, the same way on every replica.

// Policy is a partition's retention and cleanup policy.
type Policy struct {
	// Delete: enforce the limits below (cleanup "delete"). Zero limits mean
	// no limit.
	Delete     bool
	MaxAge     time.Duration
	MaxBytes   uint64
	MaxRecords uint64
	// Compact: keep only the latest record of each key (cleanup
	// "compact"). A record with a key and an empty value is a tombstone:
	// it removes the key, and is itself removed DeleteRetention after it
	// was appended.
	Compact         bool
	DeleteRetention time.Duration
	// LocalMaxAge and LocalMaxBytes bound the local copy when the
	// partition has a tier store (tier.go): older whole batches are
	// uploaded, then removed locally. Zero: no local limit.
	LocalMaxAge   time.Duration
	LocalMaxBytes uint64
}

// SetPolicy changes the policy (a topic alter). Safe from any goroutine.
func (p *Partition) SetPolicy(pol Policy) {
	p.mu.Lock()
	p.mu.policy = pol
	p.mu.Unlock()
}

// Policy returns the current policy.
func (p *Partition) Policy() Policy {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.policy
}

type truncateCmd struct {
	Offset uint64 `json:"offset"`
	// Local removes only this node's copy of records that are tiered
	// (TruncateLocal): readers still read them, from the object store.
	Local bool `json:"local,omitempty"`
}

// compactCmd is one compaction raft command: several batches at once, so
// that compaction costs few raft entries (and fsyncs) and a bounded time on
// the loop per entry.
type compactCmd struct {
	Batches []CompactCmd `json:"batches"`
}

// CompactCmd drops records of one batch.
type CompactCmd struct {
	Base      uint64   `json:"base"`
	RaftIndex uint64   `json:"raft_index"`
	Drop      []uint32 `json:"drop"` // offset deltas
}

// ErrStalePlan is the result of a retention or compaction command that no
// longer fits the partition (a newer one ran first). Nothing changed.
var ErrStalePlan = errors.New("partition: stale retention plan")

// Truncate removes every record below offset x (as PlanRetention returns
// it; any offset) through the raft log. If x is inside a batch, the batch's
// head is trimmed. It returns ErrStalePlan if x is past the end.
func (p *Partition) Truncate(ctx context.Context, x uint64) error {
	_, err := p.command(ctx, kindTruncate, truncateCmd{Offset: x})
	return err
}

// Compact applies compaction plans for some batches, as one raft command.
// It returns ErrStalePlan if none of them still applied.
func (p *Partition) Compact(ctx context.Context, cs ...CompactCmd) error {
	_, err := p.command(ctx, kindCompact, compactCmd{Batches: cs})
	return err
}

// TruncateLog implements raftlog.LogTruncator: the raft log up to the entry
// before the first kept batch is no longer needed.
func (p *Partition) TruncateLog() uint64 { return p.logFloor }

func (p *Partition) readRow(base uint64) (indexRow, bool, error) {
	v, closer, err := p.cfg.DB.Get(keys.OffsetKey(p.cfg.Group, base))
	if errors.Is(err, pebble.ErrNotFound) {
		return indexRow{}, false, nil
	}
	if err != nil {
		return indexRow{}, false, err
	}
	defer closer.Close()
	r, err := decodeIndexRow(v)
	return r, err == nil, err
}

func (p *Partition) applyTruncate(w *pebble.Batch, c truncateCmd) (opErr, err error) {
	st := &p.st
	x := c.Offset
	if x > st.Next {
		return fmt.Errorf("%w: truncate at %d past the end %d", ErrStalePlan, x, st.Next), nil
	}
	if c.Local {
		if end := tierEnd(p.tierRows, st.LogStart); x > end {
			return fmt.Errorf("%w: local truncate at %d, only [.., %d) is tiered", ErrStalePlan, x, end), nil
		}
		if x <= st.LogStart {
			return nil, nil // already done
		}
		// Whole batches only: the tiered copy has them whole.
		if x < st.Next {
			base, _, err := p.rowContaining(x)
			if err != nil {
				return nil, err
			}
			x = base
		}
		if x <= st.LogStart {
			return nil, nil
		}
		failpoint.Pause(failpoint.TierTruncatingLocal)
	} else {
		if x <= st.ReadStart {
			return nil, nil // already done
		}
		// Total retention: tiered history goes first, and if x is still
		// in it, local history is untouched.
		if err := p.dropTierBelow(w, x); err != nil {
			return nil, err
		}
		if x <= st.LogStart {
			st.ReadStart = x
			p.mu.Lock()
			p.mu.truncatingTo = max(p.mu.truncatingTo, x)
			p.mu.Unlock()
			return nil, nil
		}
	}
	// Find the batch that holds x. If x is inside it, its head is trimmed:
	// the batch is rewritten without the records below x (offsets, span
	// and append time kept). A trim that would leave no record (compaction
	// removed the rest) removes the whole batch instead: no record above x
	// is lost, and the first kept row stays a real batch.
	var kept indexRow
	keptBase := st.Next
	var trimmed, trimmedPayload uint64
	for x < st.Next {
		base, row, err := p.rowContaining(x)
		if err != nil {
			return nil, err
		}
		if x > base {
			nrow, saved, empty, err := p.rewriteBatch(w, base, row, func(d uint32) bool { return uint64(d) < x-base }, false)
			if err != nil {
				return nil, err
			}
			if empty {
				x = base + uint64(row.span)
				continue
			}
			trimmed, trimmedPayload = saved, uint64(row.payload)-min(uint64(nrow.payload), uint64(row.payload))
			row = nrow
		}
		kept, keptBase = row, base
		break
	}
	removed, removedPayload, err := p.liveBytesBelow(keptBase)
	if err != nil {
		return nil, err
	}
	lo, _ := keys.GroupSpan(keys.Offset, p.cfg.Group)
	if err := w.DeleteRange(lo, keys.OffsetKey(p.cfg.Group, keptBase), nil); err != nil {
		return nil, err
	}
	if !c.Local {
		// The key versions of removed batches go with them; the key and
		// tag index rows stay (keyindex.go).
		vlo, _ := keys.GroupSpan(keys.Versions, p.cfg.Group)
		if err := w.DeleteRange(vlo, keys.VersionsKey(p.cfg.Group, keptBase), nil); err != nil {
			return nil, err
		}
	}
	for base := range p.passRows {
		if base < keptBase {
			delete(p.passRows, base)
		}
	}
	tlo, thi := keys.GroupSpan(keys.Time, p.cfg.Group)
	if x < st.Next {
		thi = keys.TimeKey(p.cfg.Group, kept.appendTime, keptBase)
		st.FirstTime = kept.appendTime
		p.logFloor = kept.raftIndex - 1
	} else {
		p.logFloor = p.appliedIndex
	}
	if err := w.DeleteRange(tlo, thi, nil); err != nil {
		return nil, err
	}
	st.LogStart = x
	// Readers may see the deletions as soon as the pass commits, a moment
	// before Durable publishes the new log start: let them know now, so a
	// read that finds its batch gone is reported as below the log start
	// (or, for a local truncate, read again from the tiered copy).
	p.mu.Lock()
	if c.Local {
		p.mu.localTruncatingTo = max(p.mu.localTruncatingTo, x)
	} else {
		st.ReadStart = x
		p.mu.truncatingTo = max(p.mu.truncatingTo, x)
	}
	p.mu.Unlock()
	st.Bytes -= min(removed+trimmed, st.Bytes)
	st.Payload -= min(removedPayload+trimmedPayload, st.Payload)
	if st.Empty() {
		st.Payload, st.PayloadKnown = 0, true
	}
	p.cacheBelow = max(p.cacheBelow, x)
	return nil, nil
}

// rowAt returns the offset index row of the batch at base as this pass
// left it.
func (p *Partition) rowAt(base uint64) (indexRow, bool, error) {
	if r, ok := p.passRows[base]; ok {
		return r, true, nil
	}
	return p.readRow(base)
}

// rowContaining returns the batch holding offset x, which must be within
// the applied state's [log start, next), as this pass left it.
func (p *Partition) rowContaining(x uint64) (uint64, indexRow, error) {
	base, found := uint64(0), false
	for b := range p.passRows {
		if b <= x && (!found || b > base) {
			base, found = b, true
		}
	}
	// Rows below the log start's batch may still be in the store (deleted
	// by this pass); the last row at or below x is never one of them.
	lo, _ := keys.GroupSpan(keys.Offset, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: keys.OffsetKey(p.cfg.Group, x+1)})
	if err != nil {
		return 0, indexRow{}, err
	}
	if it.Last() {
		if b, ok := keys.OffsetKeyBase(it.Key()); ok && (!found || b > base) {
			base, found = b, true
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, indexRow{}, err
	}
	if !found {
		return 0, indexRow{}, fmt.Errorf("partition %d: %w: no index row at or below offset %d", p.cfg.Index, ErrCorrupt, x)
	}
	row, ok, err := p.rowAt(base)
	if err != nil {
		return 0, indexRow{}, err
	}
	if !ok || x >= base+uint64(row.span) {
		return 0, indexRow{}, fmt.Errorf("partition %d: %w: offset %d not in the batch at %d", p.cfg.Index, ErrCorrupt, x, base)
	}
	return base, row, nil
}

// liveBytesBelow sums the sizes and payloads of the stored batches below
// offset hi that still hold records at or above the log start: what a
// truncation to hi removes (bounded by what the plan removes).
func (p *Partition) liveBytesBelow(hi uint64) (size, payload uint64, err error) {
	add := func(base uint64, r indexRow) {
		if base < hi && base+uint64(r.span) > p.st.LogStart {
			size += uint64(r.size)
			payload += uint64(r.payload)
		}
	}
	lo, _ := keys.GroupSpan(keys.Offset, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: keys.OffsetKey(p.cfg.Group, hi)})
	if err != nil {
		return 0, 0, err
	}
	for valid := it.First(); valid; valid = it.Next() {
		base, _ := keys.OffsetKeyBase(it.Key())
		if _, ok := p.passRows[base]; ok {
			continue // counted below, as this pass left it
		}
		r, err := decodeIndexRow(it.Value())
		if err != nil {
			it.Close()
			return 0, 0, err
		}
		add(base, r)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, 0, err
	}
	for base, r := range p.passRows {
		add(base, r)
	}
	return size, payload, nil
}

// rewriteBatch rewrites the batch at base (its row as this pass left it)
// without the records drop selects, the way both key compaction and
// retention shrink a batch: record.Compact keeps the proposal id, the
// append time, the span and every other record's offset. The new row
// (size and payload) and entry are written to w and remembered for the
// rest of the pass. With keepEmpty false, a rewrite that would leave no
// record writes nothing and reports empty.
func (p *Partition) rewriteBatch(w *pebble.Batch, base uint64, row indexRow, drop func(delta uint32) bool, keepEmpty bool) (nrow indexRow, saved uint64, empty bool, err error) {
	data, ok := p.passEntries[row.raftIndex]
	if !ok {
		data, err = raftlog.ReadEntryData(p.cfg.DB, p.cfg.Group, row.raftIndex)
		if err != nil {
			return indexRow{}, 0, false, err
		}
	}
	be, err := parseBatchEntry(data)
	if err != nil {
		return indexRow{}, 0, false, fmt.Errorf("partition %d: entry %d: %w", p.cfg.Index, row.raftIndex, err)
	}
	b, err := record.Parse(be.batch)
	if err != nil {
		return indexRow{}, 0, false, fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, base, ErrCorrupt, err)
	}
	compacted, err := record.Compact(b, drop)
	if err != nil {
		return indexRow{}, 0, false, fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, base, ErrCorrupt, err)
	}
	// What the indexes took from the dropped records stays in the entry
	// (ghosts, keyindex.go), with the conditions it carried.
	var x batchExt
	if be.ext != nil {
		if x, err = decodeExt(be.ext); err != nil {
			return indexRow{}, 0, false, err
		}
	}
	dropped, err := ghostsOf(b, drop)
	if err != nil {
		return indexRow{}, 0, false, fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, base, ErrCorrupt, err)
	}
	x.ghosts = mergeGhosts(x.ghosts, dropped)
	var ext []byte
	if len(x.ghosts) > 0 || !x.conds.Empty() {
		ext = x.encode()
	}
	entry := encodeBatchEntry(be.checked, ext, compacted)
	nb, err := record.Parse(entry[len(entry)-len(compacted):])
	if err != nil {
		return indexRow{}, 0, false, err
	}
	if nb.Count() == 0 && !keepEmpty {
		return indexRow{}, 0, true, nil
	}
	payload, err := nb.ValidatePayload()
	if err != nil {
		return indexRow{}, 0, false, err
	}
	if term, ok := p.passTerms[row.raftIndex]; ok {
		err = raftlog.RewriteNewEntry(w, p.cfg.Group, row.raftIndex, term, entry)
	} else {
		err = raftlog.RewriteEntry(w, p.cfg.DB, p.cfg.Group, row.raftIndex, entry)
	}
	if err != nil {
		return indexRow{}, 0, false, err
	}
	p.passEntries[row.raftIndex] = entry
	saved = uint64(row.size) - min(uint64(len(compacted)), uint64(row.size))
	row.size = uint32(len(compacted))
	row.payload, row.hasPayload = uint32(min(payload, math.MaxUint32)), true
	if err := w.Set(keys.OffsetKey(p.cfg.Group, base), row.encode(), nil); err != nil {
		return indexRow{}, 0, false, err
	}
	p.passRows[base] = row
	versions, ok := p.passVersions[base]
	if !ok {
		if versions, err = p.versionsAt(p.cfg.DB, base); err != nil {
			return indexRow{}, 0, false, err
		}
	}
	p.cacheReplace = append(p.cacheReplace, &Batch{Base: base, AppendTime: row.appendTime, Span: row.span, RaftIndex: row.raftIndex, Records: nb, KeyVersions: versions})
	return row, saved, false, nil
}

func (p *Partition) applyCompact(w *pebble.Batch, cmd compactCmd) (opErr, err error) {
	stale := 0
	for _, c := range cmd.Batches {
		opErr, err := p.compactBatch(w, c)
		if err != nil {
			return nil, err
		}
		if opErr != nil {
			stale++
		}
	}
	if stale > 0 && stale == len(cmd.Batches) {
		return fmt.Errorf("%w: none of the %d batches fits any more", ErrStalePlan, stale), nil
	}
	return nil, nil
}

func (p *Partition) compactBatch(w *pebble.Batch, c CompactCmd) (opErr, err error) {
	row, ok, err := p.rowAt(c.Base)
	if err != nil {
		return nil, err
	}
	if !ok || row.raftIndex != c.RaftIndex {
		return fmt.Errorf("%w: no batch at %d in entry %d", ErrStalePlan, c.Base, c.RaftIndex), nil
	}
	if c.Base+uint64(row.span) <= p.st.LogStart {
		return fmt.Errorf("%w: batch %d is below the log start", ErrStalePlan, c.Base), nil
	}
	drop := make(map[uint32]bool, len(c.Drop))
	for _, d := range c.Drop {
		drop[d] = true
	}
	nrow, saved, _, err := p.rewriteBatch(w, c.Base, row, func(d uint32) bool { return drop[d] }, true)
	if err != nil {
		return nil, err
	}
	p.st.Bytes -= min(saved, p.st.Bytes)
	p.st.Payload -= min(uint64(row.payload)-min(uint64(nrow.payload), uint64(row.payload)), p.st.Payload)
	return nil, nil
}

// PlanRetention returns the offset below which the policy's limits remove
// records, and whether anything is to be removed. The offset is exact, at
// record granularity (it may fall inside a batch, whose head Truncate then
// trims):
//
//   - records: the partition keeps the newest MaxRecords offsets;
//   - bytes: the longest suffix of records whose PayloadSize sum (what the
//     record size limit counts) is at most MaxBytes;
//   - age: every record appended before now - MaxAge goes.
//
// It reads the store and does not change anything.
func (p *Partition) PlanRetention(now int64) (uint64, bool, error) {
	pol := p.Policy()
	vis := p.Bounds()
	if !pol.Delete || vis.Empty() {
		return 0, false, nil
	}
	x := vis.LogStart
	if pol.MaxAge > 0 {
		off, err := p.SeekTime(now - int64(pol.MaxAge))
		if err != nil {
			return 0, false, err
		}
		x = max(x, off)
	}
	if pol.MaxRecords > 0 && vis.Next-vis.LogStart > pol.MaxRecords {
		x = max(x, vis.Next-pol.MaxRecords)
	}
	if pol.MaxBytes > 0 && (vis.PayloadKnown && vis.Payload > pol.MaxBytes || !vis.PayloadKnown && vis.Bytes > pol.MaxBytes) {
		off, err := p.bytesBoundary(pol.MaxBytes)
		if err != nil {
			return 0, false, err
		}
		x = max(x, off)
	} else if localStart := p.LocalStart(); pol.MaxBytes > 0 && vis.LogStart < localStart {
		// Tiered history counts too, in whole segments: drop the oldest
		// while the total is over the limit.
		total := vis.Payload
		rows := p.Tiered()
		for _, r := range rows {
			if r.End > vis.LogStart && r.Base < localStart {
				total += r.Payload
			}
		}
		for _, r := range rows {
			if total <= pol.MaxBytes || r.Base >= localStart {
				break
			}
			if r.End > vis.LogStart {
				total -= r.Payload
				x = max(x, r.End)
			}
		}
	}
	return x, x > vis.LogStart, nil
}

// bytesBoundary returns the first offset of the longest suffix of records
// whose payload is at most maxBytes. It reads one Pebble snapshot, so the
// state row and the offset index rows agree (a pass writes them together).
// Knowing the partition's payload, it walks the offset index forward from
// the log start over what goes, subtracting each batch's payload, and
// reads only the batch where the limit falls, record by record: the cost
// is what is removed, not what is kept.
func (p *Partition) bytesBoundary(maxBytes uint64) (uint64, error) {
	snap := p.cfg.DB.NewSnapshot()
	defer snap.Close()
	v, closer, err := snap.Get(keys.PartitionStateKey(p.cfg.Group))
	if err != nil {
		return 0, err
	}
	st, err := decodeState(v)
	closer.Close()
	if err != nil {
		return 0, err
	}
	if st.Empty() {
		return st.LogStart, nil
	}
	if !st.PayloadKnown {
		return p.bytesBoundaryBack(snap, maxBytes, st)
	}
	lo, _ := keys.GroupSpan(keys.Offset, p.cfg.Group)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: keys.OffsetKey(p.cfg.Group, st.Next)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	left := st.Payload
	for valid := it.SeekLT(keys.OffsetKey(p.cfg.Group, st.LogStart+1)); valid && left > maxBytes; valid = it.Next() {
		base, _ := keys.OffsetKeyBase(it.Key())
		row, err := decodeIndexRow(it.Value())
		if err != nil {
			return 0, err
		}
		if !row.hasPayload {
			return p.bytesBoundaryBack(snap, maxBytes, st)
		}
		if left-min(uint64(row.payload), left) > maxBytes {
			left -= min(uint64(row.payload), left)
			continue
		}
		// The limit falls in this batch.
		next := base + uint64(row.span)
		err = p.eachRecord(snap, base, row, func(o uint64, r *record.Record) bool {
			if o < st.LogStart {
				return true
			}
			if left <= maxBytes {
				next = o
				return false
			}
			left -= min(uint64(r.PayloadSize()), left)
			return true
		})
		return next, err
	}
	return st.LogStart, it.Error()
}

// eachRecord calls fn for the records of the batch at base (row), read from
// r, in order, until fn returns false.
func (p *Partition) eachRecord(r pebble.Reader, base uint64, row indexRow, fn func(off uint64, rec *record.Record) bool) error {
	data, err := raftlog.ReadEntryData(r, p.cfg.Group, row.raftIndex)
	if err != nil {
		return err
	}
	be, err := parseBatchEntry(data)
	if err != nil {
		return fmt.Errorf("partition %d: entry %d: %w", p.cfg.Index, row.raftIndex, err)
	}
	b, err := record.Parse(be.batch)
	if err != nil {
		return fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, base, ErrCorrupt, err)
	}
	var rec record.Record
	it := b.Iter()
	for it.Next(&rec) {
		if !fn(base+uint64(rec.OffsetDelta), &rec) {
			return nil
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, base, ErrCorrupt, err)
	}
	return nil
}

// bytesBoundaryBack is bytesBoundary for a partition whose payload is not
// known (its state was written before it was counted). It walks the
// offset index back from the end, summing each batch's payload from its
// row; only the batch where the limit falls (and batches whose rows
// predate the payload field) is read, record by record. The cost is what
// is kept.
func (p *Partition) bytesBoundaryBack(snap *pebble.Snapshot, maxBytes uint64, st State) (uint64, error) {
	lo, _ := keys.GroupSpan(keys.Offset, p.cfg.Group)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: keys.OffsetKey(p.cfg.Group, st.Next)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var kept uint64
	for valid := it.Last(); valid; valid = it.Prev() {
		base, _ := keys.OffsetKeyBase(it.Key())
		row, err := decodeIndexRow(it.Value())
		if err != nil {
			return 0, err
		}
		if base+uint64(row.span) <= st.LogStart {
			break
		}
		if row.hasPayload && kept+uint64(row.payload) <= maxBytes {
			kept += uint64(row.payload)
			continue
		}
		type sized struct{ off, size uint64 }
		var recs []sized
		if err := p.eachRecord(snap, base, row, func(o uint64, r *record.Record) bool {
			if o >= st.LogStart {
				recs = append(recs, sized{o, uint64(r.PayloadSize())})
			}
			return true
		}); err != nil {
			return 0, err
		}
		for i := len(recs) - 1; i >= 0; i-- {
			if kept+recs[i].size > maxBytes {
				return recs[i].off + 1, nil
			}
			kept += recs[i].size
		}
	}
	return st.LogStart, it.Error()
}

// PlanCompaction reads the partition from the log start to its end now and
// returns, per batch with something to drop, the records superseded by a
// later record with the same key, and tombstones (a key with an empty value,
// the latest for its key) appended more than DeleteRetention before now.
// Records without a key are kept. At most maxCmds commands are returned
// (0: no bound).
func (p *Partition) PlanCompaction(now int64, maxCmds int) (CompactionPlan, error) {
	pol := p.Policy()
	vis := p.local() // tiered segments are immutable: compaction is local
	if !pol.Compact || vis.Empty() {
		return CompactionPlan{End: vis.Next}, nil
	}
	var records, dropped int
	latest := map[string]uint64{}
	if err := p.scan(vis, func(b *Batch, off uint64, r *record.Record) {
		if len(r.Key) > 0 {
			latest[string(r.Key)] = off
		}
	}); err != nil {
		return CompactionPlan{}, err
	}
	tombFloor := now - int64(pol.DeleteRetention)
	var cmds []CompactCmd
	var cur *CompactCmd
	err := p.scan(vis, func(b *Batch, off uint64, r *record.Record) {
		records++
		if len(r.Key) == 0 {
			return
		}
		last := latest[string(r.Key)]
		if last == off && !(len(r.Value) == 0 && b.AppendTime < tombFloor) {
			return
		}
		if cur == nil || cur.Base != b.Base {
			if maxCmds > 0 && len(cmds) >= maxCmds {
				return
			}
			cmds = append(cmds, CompactCmd{Base: b.Base, RaftIndex: b.RaftIndex})
			cur = &cmds[len(cmds)-1]
		}
		cur.Drop = append(cur.Drop, r.OffsetDelta)
		dropped++
	})
	return CompactionPlan{Cmds: cmds, Kept: records - dropped, End: vis.Next}, err
}

// CompactionPlan is what PlanCompaction found.
type CompactionPlan struct {
	Cmds []CompactCmd
	// Kept is how many records remain once the plan is applied.
	Kept int
	// End is the end offset the plan covers.
	End uint64
}

// scan calls fn for every stored record of [vis.LogStart, vis.Next).
func (p *Partition) scan(vis State, fn func(b *Batch, off uint64, r *record.Record)) error {
	rd := p.NewReader()
	defer rd.Close()
	var r record.Record
	for off := vis.LogStart; off < vis.Next; {
		b, _, err := rd.Read(off)
		if err != nil {
			return err
		}
		it := b.Records.Iter()
		for it.Next(&r) {
			if o := b.Base + uint64(r.OffsetDelta); o >= off {
				fn(b, o, &r)
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
		off = b.End()
	}
	return nil
}

var _ raftlog.LogTruncator = (*Partition)(nil)
