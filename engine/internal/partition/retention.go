package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/raftlog"
)

// Retention and key compaction.
//
// Both are decided by the leader, off the raft loop (PlanRetention,
// PlanCompaction, called by the broker's housekeeping), and executed as raft
// commands, so every replica removes exactly the same records:
//
//   - truncate {offset X}: X is a batch boundary; every batch below it goes,
//     with one range deletion each on the offset index, the time index and
//     the raft log (the log is the data). The log start becomes X. Offsets
//     are never reused.
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

// Truncate removes every record below offset x (a batch boundary, as
// PlanRetention returns) through the raft log.
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
	if x <= st.LogStart {
		return nil, nil // already done
	}
	if x > st.Next {
		return fmt.Errorf("%w: truncate at %d past the end %d", ErrStalePlan, x, st.Next), nil
	}
	var kept indexRow
	if x < st.Next {
		r, ok, err := p.readRow(x)
		if err != nil {
			return nil, err
		}
		if !ok {
			return fmt.Errorf("%w: %d is not a batch boundary", ErrStalePlan, x), nil
		}
		kept = r
	}
	// Bytes leaving: the rows below x (one row per batch; bounded by what
	// the plan removes).
	lo, _ := keys.GroupSpan(keys.Offset, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: keys.OffsetKey(p.cfg.Group, x)})
	if err != nil {
		return nil, err
	}
	var removed uint64
	for valid := it.First(); valid; valid = it.Next() {
		r, err := decodeIndexRow(it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		removed += uint64(r.size)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	if err := w.DeleteRange(lo, keys.OffsetKey(p.cfg.Group, x), nil); err != nil {
		return nil, err
	}
	tlo, thi := keys.GroupSpan(keys.Time, p.cfg.Group)
	if x < st.Next {
		thi = keys.TimeKey(p.cfg.Group, kept.appendTime, x)
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
	// read that finds its batch gone is reported as below the log start.
	p.mu.Lock()
	p.mu.truncatingTo = max(p.mu.truncatingTo, x)
	p.mu.Unlock()
	st.Bytes -= min(removed, st.Bytes)
	p.cacheBelow = max(p.cacheBelow, x)
	return nil, nil
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
	if c.Base < p.st.LogStart {
		return fmt.Errorf("%w: batch %d is below the log start", ErrStalePlan, c.Base), nil
	}
	row, ok, err := p.readRow(c.Base)
	if err != nil {
		return nil, err
	}
	if !ok || row.raftIndex != c.RaftIndex {
		return fmt.Errorf("%w: no batch at %d in entry %d", ErrStalePlan, c.Base, c.RaftIndex), nil
	}
	data, ok := p.passEntries[c.RaftIndex]
	if !ok {
		data, err = raftlog.ReadEntryData(p.cfg.DB, p.cfg.Group, c.RaftIndex)
		if err != nil {
			return nil, err
		}
	}
	if len(data) < batchEnvelope || data[0] != kindBatch {
		return nil, fmt.Errorf("partition %d: %w: entry %d is not a batch", p.cfg.Index, ErrCorrupt, c.RaftIndex)
	}
	b, err := record.Parse(data[batchEnvelope:])
	if err != nil {
		return nil, fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, c.Base, ErrCorrupt, err)
	}
	drop := make(map[uint32]bool, len(c.Drop))
	for _, d := range c.Drop {
		drop[d] = true
	}
	compacted, err := record.Compact(b, func(d uint32) bool { return drop[d] })
	if err != nil {
		return nil, fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, c.Base, ErrCorrupt, err)
	}
	entry := append(bytes.Clone(data[:batchEnvelope]), compacted...)
	if err := raftlog.RewriteEntry(w, p.cfg.DB, p.cfg.Group, c.RaftIndex, entry); err != nil {
		return nil, err
	}
	p.passEntries[c.RaftIndex] = entry
	saved := uint64(row.size) - uint64(len(compacted))
	row.size = uint32(len(compacted))
	if err := w.Set(keys.OffsetKey(p.cfg.Group, c.Base), row.encode(), nil); err != nil {
		return nil, err
	}
	p.st.Bytes -= min(saved, p.st.Bytes)
	nb, err := record.Parse(entry[batchEnvelope:])
	if err != nil {
		return nil, err
	}
	p.cacheReplace = append(p.cacheReplace, &Batch{Base: c.Base, AppendTime: row.appendTime, Span: row.span, RaftIndex: c.RaftIndex, Records: nb})
	return nil, nil
}

// PlanRetention returns the offset below which the policy's limits remove
// records (a batch boundary), and whether anything is to be removed. It
// reads the store and does not change anything.
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
		off, err := p.boundaryAtOrAfter(vis.Next-pol.MaxRecords, vis)
		if err != nil {
			return 0, false, err
		}
		x = max(x, off)
	}
	if pol.MaxBytes > 0 && vis.Bytes > pol.MaxBytes {
		off, err := p.bytesBoundary(pol.MaxBytes, vis)
		if err != nil {
			return 0, false, err
		}
		x = max(x, off)
	}
	return x, x > vis.LogStart, nil
}

// boundaryAtOrAfter returns the first batch base >= off (the end if none).
func (p *Partition) boundaryAtOrAfter(off uint64, vis State) (uint64, error) {
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: keys.OffsetKey(p.cfg.Group, off), UpperBound: keys.OffsetKey(p.cfg.Group, vis.Next)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.First() {
		return vis.Next, it.Error()
	}
	base, _ := keys.OffsetKeyBase(it.Key())
	return base, nil
}

// bytesBoundary returns the first batch base from which at most maxBytes
// are stored.
func (p *Partition) bytesBoundary(maxBytes uint64, vis State) (uint64, error) {
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: keys.OffsetKey(p.cfg.Group, vis.LogStart), UpperBound: keys.OffsetKey(p.cfg.Group, vis.Next)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	left := vis.Bytes
	for valid := it.First(); valid; valid = it.Next() {
		if left <= maxBytes {
			base, _ := keys.OffsetKeyBase(it.Key())
			return base, nil
		}
		r, err := decodeIndexRow(it.Value())
		if err != nil {
			return 0, err
		}
		left -= min(uint64(r.size), left)
	}
	return vis.Next, it.Error()
}

// PlanCompaction reads the partition from the log start to its end now and
// returns, per batch with something to drop, the records superseded by a
// later record with the same key, and tombstones (a key with an empty value,
// the latest for its key) appended more than DeleteRetention before now.
// Records without a key are kept. At most maxCmds commands are returned
// (0: no bound).
func (p *Partition) PlanCompaction(now int64, maxCmds int) (CompactionPlan, error) {
	pol := p.Policy()
	vis := p.Bounds()
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
