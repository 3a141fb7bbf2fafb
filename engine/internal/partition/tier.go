package partition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/internal/failpoint"
)

// Tiered storage, first step: the leader copies sealed ranges of the
// partition's history into segment objects (package tier) and records each
// in the manifest through raft, so every replica agrees on what is tiered.
// Nothing local is deleted yet, and reads still come from local storage;
// local deletion below the tier end and reads from segments come next
// (docs/design.md §12, "Tiered storage").

// TierSegment is one manifest row: offsets [Base, End) are in object Name.
type TierSegment struct {
	Base      uint64 `json:"base"`
	End       uint64 `json:"end"`
	FirstTime int64  `json:"first_time"`
	LastTime  int64  `json:"last_time"`
	Bytes     uint64 `json:"bytes"`   // the object's size
	Payload   uint64 `json:"payload"` // record payload bytes in it
	Batches   uint32 `json:"batches"`
	Name      string `json:"name"`
}

// loadTier reads the manifest rows at open.
func (p *Partition) loadTier() error {
	lo, hi := keys.GroupSpan(keys.Tier, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	var rows []TierSegment
	for valid := it.First(); valid; valid = it.Next() {
		var s TierSegment
		if err := json.Unmarshal(it.Value(), &s); err != nil {
			it.Close()
			return fmt.Errorf("partition %d: %w: tier manifest row %x: %v", p.cfg.Index, ErrCorrupt, it.Key(), err)
		}
		if n := len(rows); n > 0 && s.Base != rows[n-1].End {
			it.Close()
			return fmt.Errorf("partition %d: %w: tier manifest row at %d does not follow the one ending at %d", p.cfg.Index, ErrCorrupt, s.Base, rows[n-1].End)
		}
		rows = append(rows, s)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	p.tierRows = rows
	return nil
}

// Tiered returns the visible manifest: the segments in offset order. The
// slice is never modified; do not modify it.
func (p *Partition) Tiered() []TierSegment {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.tier
}

// tierEnd is the offset where the next segment starts: the end of the last
// one, or the log start when nothing is tiered yet.
func tierEnd(rows []TierSegment, logStart uint64) uint64 {
	if len(rows) == 0 {
		return logStart
	}
	return rows[len(rows)-1].End
}

// applyTier records a segment in the manifest. The same segment again (a
// command re-applied over a snapshot, or a second leader's upload of the
// same range, which has the same name) changes nothing; a segment that does
// not start where the manifest ends is stale.
func (p *Partition) applyTier(w *pebble.Batch, c TierSegment) (opErr, err error) {
	for _, r := range p.tierRows {
		if r.Base == c.Base {
			if r == c {
				return nil, nil
			}
			return fmt.Errorf("%w: offsets from %d are already tiered in %s", ErrStalePlan, c.Base, r.Name), nil
		}
	}
	if c.End <= c.Base || c.Name == "" {
		return fmt.Errorf("%w: tier segment [%d, %d) %q", ErrStalePlan, c.Base, c.End, c.Name), nil
	}
	if n := len(p.tierRows); n > 0 && c.Base != p.tierRows[n-1].End {
		return fmt.Errorf("%w: tier segment at %d, the manifest ends at %d", ErrStalePlan, c.Base, p.tierRows[n-1].End), nil
	}
	if len(p.tierRows) == 0 && (c.Base > p.st.LogStart || c.End <= p.st.LogStart) {
		return fmt.Errorf("%w: the first tier segment [%d, %d) must hold the log start %d", ErrStalePlan, c.Base, c.End, p.st.LogStart), nil
	}
	if c.End > p.st.Next {
		return fmt.Errorf("%w: tier segment ends at %d, past the end %d", ErrStalePlan, c.End, p.st.Next), nil
	}
	v, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	failpoint.Pause(failpoint.TierRecording)
	if err := w.Set(keys.TierKey(p.cfg.Group, c.Base), v, nil); err != nil {
		return nil, err
	}
	// Copy on write: readers hold the visible slice.
	p.tierRows = append(p.tierRows[:len(p.tierRows):len(p.tierRows)], c)
	p.tierChanged = true
	return nil, nil
}

// UploadTier copies the next sealed range of whole batches, from the
// manifest's end up to at most upTo and about maxBytes, into a segment
// object in st, then records it through raft. It reports false when there
// is nothing to upload. Run it on the leader. The object is written before
// the command: a crash or a lost leadership in between leaves an object no
// manifest row names (found and deleted later), never a row without its
// object. A repeated upload of the same range writes the same object under
// the same name, and its command changes nothing.
func (p *Partition) UploadTier(ctx context.Context, st tier.Store, upTo uint64, maxBytes int) (TierSegment, bool, error) {
	vis := p.local()
	from := tierEnd(p.Tiered(), vis.LogStart)
	upTo = min(upTo, vis.Next)
	if from >= upTo {
		return TierSegment{}, false, nil
	}
	r := p.NewReader()
	defer r.Close()
	turn := p.backgroundTurns(ctx)
	defer turn.end()
	var batches []tier.Batch
	var payload uint64
	size := 0
	for off := from; off < upTo && (size < maxBytes || len(batches) == 0); {
		if err := turn.take(); err != nil {
			return TierSegment{}, false, err
		}
		b, _, err := r.Read(off)
		if err != nil {
			return TierSegment{}, false, err
		}
		turn.used += len(b.Records.Bytes())
		if b.End() > upTo {
			break // not sealed yet: only whole batches below upTo
		}
		pl, err := b.Records.ValidatePayload()
		if err != nil {
			return TierSegment{}, false, fmt.Errorf("partition %d offset %d: %w", p.cfg.Index, b.Base, err)
		}
		batches = append(batches, tier.Batch{Base: b.Base, Span: b.Span, AppendTime: b.AppendTime, Data: b.Records.Bytes()})
		payload += pl
		size += len(b.Records.Bytes())
		off = b.End()
	}
	if len(batches) == 0 {
		return TierSegment{}, false, nil
	}
	turn.end() // packing the object is a turn of its own
	if err := turn.take(); err != nil {
		return TierSegment{}, false, err
	}
	obj, f, err := tier.Build(batches)
	turn.end() // writing the object waits on the store, not the processor
	if err != nil {
		return TierSegment{}, false, fmt.Errorf("partition %d: %w", p.cfg.Index, err)
	}
	seg := TierSegment{Base: f.Base, End: f.End, FirstTime: f.FirstTime, LastTime: f.LastTime, Bytes: uint64(len(obj)),
		Payload: payload, Batches: f.Count, Name: tier.Name(p.cfg.TopicID, p.cfg.Index, f, obj)}
	if err := st.Put(ctx, seg.Name, obj); err != nil {
		return TierSegment{}, false, err
	}
	failpoint.Pause(failpoint.TierUploaded)
	if _, err := p.command(ctx, kindTier, seg); err != nil {
		return TierSegment{}, false, err
	}
	failpoint.Pause(failpoint.TierRecorded)
	return seg, true, nil
}

// ErrTierUnavailable is returned for a read of tiered history that the
// object store could not answer (down, or tiering not configured on this
// node). Local reads go on.
var ErrTierUnavailable = errors.New("partition: tiered storage unavailable")

// readable is the state readers see: the local state with its log start
// lowered to the read start when older records are tiered, and the first
// append time the tiered segment's holding it.
func readable(local State, rows []TierSegment) State {
	if local.ReadStart >= local.LogStart {
		return local
	}
	v := local
	v.LogStart = local.ReadStart
	for _, r := range rows {
		if r.End > local.ReadStart {
			v.FirstTime = r.FirstTime
			break
		}
	}
	return v
}

// tierRowAt returns the manifest row holding offset off.
func tierRowAt(rows []TierSegment, off uint64) (TierSegment, bool) {
	i := sort.Search(len(rows), func(i int) bool { return rows[i].End > off })
	if i == len(rows) || rows[i].Base > off {
		return TierSegment{}, false
	}
	return rows[i], true
}

// segment opens a manifest row's object (its footer and index) through
// the tier cache: one range read of the index when it is not in memory
// (the row records the object's size and batch count).
func (p *Partition) segment(ctx context.Context, row TierSegment) (*tier.Segment, error) {
	if p.cfg.Tier == nil {
		return nil, fmt.Errorf("%w: offsets [%d, %d) are in %s, and this node has no --tier store", ErrTierUnavailable, row.Base, row.End, row.Name)
	}
	seg, err := p.cfg.TierCache.Segment(ctx, p.cfg.Tier, row.Name, int64(row.Bytes), row.Batches)
	if err != nil {
		return nil, p.tierErr(row.Base, err)
	}
	if seg.Footer.Base != row.Base || seg.Footer.End != row.End {
		return nil, fmt.Errorf("partition %d: %w: object %s holds [%d, %d), the manifest says [%d, %d)",
			p.cfg.Index, ErrCorrupt, row.Name, seg.Footer.Base, seg.Footer.End, row.Base, row.End)
	}
	return seg, nil
}

// tierErr classifies an object store error: a corrupt or missing object is
// data loss (ErrCorrupt, naming it), anything else the store being
// unavailable.
func (p *Partition) tierErr(off uint64, err error) error {
	if errors.Is(err, tier.ErrCorrupt) || errors.Is(err, tier.ErrNotFound) {
		return fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, off, ErrCorrupt, err)
	}
	return fmt.Errorf("partition %d offset %d: %w: %w", p.cfg.Index, off, ErrTierUnavailable, err)
}

// tierHold is what a Reader keeps of the tiered history it reads: the
// segment and the window (tier.Window) of its last read. A sequential
// replay then asks the cache once per window, and a window the cache has
// evicted meanwhile is not read again.
type tierHold struct {
	seg *tier.Segment
	win *tier.Window
}

// readTier returns the tiered batch holding offset from, from the window h
// holds or one read through the tier cache (h may be nil).
func (p *Partition) readTier(from uint64, h *tierHold) (*Batch, error) {
	row, ok := tierRowAt(p.Tiered(), from)
	if !ok {
		return nil, fmt.Errorf("%w: offset %d is neither tiered nor stored here", ErrBelowStart, from)
	}
	if h == nil {
		h = &tierHold{}
	}
	ctx := context.Background()
	if h.seg == nil || h.seg.Name != row.Name {
		seg, err := p.segment(ctx, row)
		if err != nil {
			return nil, err
		}
		h.seg = seg
	}
	seg := h.seg
	i := tier.Find(seg.Entries, from)
	if i < 0 {
		return nil, fmt.Errorf("partition %d: %w: object %s has no batch holding offset %d", p.cfg.Index, ErrCorrupt, row.Name, from)
	}
	if !h.win.Holds(seg.Name, i) {
		w, err := p.cfg.TierCache.Window(ctx, p.cfg.Tier, seg, i)
		if err != nil {
			return nil, p.tierErr(seg.Entries[i].Base, err)
		}
		h.win = w
		// A reader that moves on usually reads on: have the next window
		// read while this one is delivered.
		p.cfg.TierCache.Prefetch(p.cfg.Tier, seg, w.End())
	}
	rb, err := h.win.Batch(i)
	if err != nil {
		return nil, p.tierErr(seg.Entries[i].Base, err)
	}
	e := seg.Entries[i]
	versions, err := p.versionsAt(p.cfg.DB, e.Base)
	if err != nil {
		return nil, err
	}
	return &Batch{Base: e.Base, AppendTime: e.AppendTime, Span: e.Span, Records: rb, KeyVersions: versions}, nil
}

// seekTier returns the first offset at or after start with append time >=
// t among the tiered segments, or end if none has one.
func (p *Partition) seekTier(t int64, start, end uint64) (uint64, error) {
	for _, row := range p.Tiered() {
		if row.End <= start || row.LastTime < t {
			continue
		}
		if row.Base >= end {
			break
		}
		seg, err := p.segment(context.Background(), row)
		if err != nil {
			return 0, err
		}
		if i := tier.SeekTime(seg.Entries, t); i < len(seg.Entries) {
			return max(seg.Entries[i].Base, start), nil
		}
	}
	return end, nil
}

// timeOfTier returns the append time of a tiered offset.
func (p *Partition) timeOfTier(off uint64) (int64, error) {
	row, ok := tierRowAt(p.Tiered(), off)
	if !ok {
		return 0, fmt.Errorf("%w: offset %d is neither tiered nor stored here", ErrBelowStart, off)
	}
	seg, err := p.segment(context.Background(), row)
	if err != nil {
		return 0, err
	}
	i := tier.Find(seg.Entries, off)
	if i < 0 {
		return 0, fmt.Errorf("partition %d: %w: object %s has no batch holding offset %d", p.cfg.Index, ErrCorrupt, row.Name, off)
	}
	return seg.Entries[i].AppendTime, nil
}

// TruncateLocal removes the local copy of the records below x, which must
// be tiered (x at most the manifest's end): readers then read them from the
// object store. x is lowered to the batch boundary at or below it.
func (p *Partition) TruncateLocal(ctx context.Context, x uint64) error {
	_, err := p.command(ctx, kindTruncate, truncateCmd{Offset: x, Local: true})
	if err == nil {
		failpoint.Pause(failpoint.TierTruncatedLocal)
	}
	return err
}

// dropTierBelow removes the manifest rows wholly below x (total retention
// reached them). Their objects are left for the leader to delete.
func (p *Partition) dropTierBelow(w *pebble.Batch, x uint64) error {
	n := 0
	for n < len(p.tierRows) && p.tierRows[n].End <= x {
		if err := w.Delete(keys.TierKey(p.cfg.Group, p.tierRows[n].Base), nil); err != nil {
			return err
		}
		n++
	}
	if n > 0 {
		p.tierRows = append([]TierSegment(nil), p.tierRows[n:]...)
		p.tierChanged = true
	}
	return nil
}

// PlanLocal returns the offset below which this partition's local copy may
// go by the policy's local limits (LocalMaxAge, LocalMaxBytes), and whether
// that is above the local log start. Nothing changes; the caller uploads
// up to it (UploadTier), then truncates locally up to what is tiered.
func (p *Partition) PlanLocal(now int64) (uint64, bool, error) {
	pol := p.Policy()
	loc := p.local()
	if p.cfg.Tier == nil || (pol.LocalMaxAge <= 0 && pol.LocalMaxBytes == 0) || loc.Empty() {
		return 0, false, nil
	}
	x := loc.LogStart
	if pol.LocalMaxAge > 0 {
		off, err := p.SeekTime(now - int64(pol.LocalMaxAge))
		if err != nil {
			return 0, false, err
		}
		x = max(x, off)
	}
	if pol.LocalMaxBytes > 0 && loc.PayloadKnown && loc.Payload > pol.LocalMaxBytes {
		off, err := p.bytesBoundary(pol.LocalMaxBytes)
		if err != nil {
			return 0, false, err
		}
		x = max(x, off)
	}
	return x, x > loc.LogStart, nil
}

// LocalStart returns the first offset this node stores itself (Bounds'
// LogStart may be lower: the first readable one, tiered).
func (p *Partition) LocalStart() uint64 { return p.local().LogStart }

// TierStore returns the partition's object store (nil without tiering).
func (p *Partition) TierStore() tier.Store { return p.cfg.Tier }

// CollectTierGarbage deletes the partition's objects that no manifest row
// names and that were written before olderThan: segments whose history
// total retention dropped, and uploads whose command never applied (a
// crash or a lost leadership between the object and the command). Run it
// on the leader once it has applied its own term (LeaderApplied): its
// manifest then holds every row ever recorded. olderThan must leave room
// for uploads in flight on a former leader.
func (p *Partition) CollectTierGarbage(ctx context.Context, olderThan time.Time) (deleted int, err error) {
	st := p.cfg.Tier
	if st == nil || !p.LeaderApplied() {
		return 0, nil
	}
	named := map[string]bool{}
	for _, r := range p.Tiered() {
		named[r.Name] = true
	}
	objs, err := st.List(ctx, tier.Prefix(p.cfg.TopicID, p.cfg.Index))
	if err != nil {
		return 0, err
	}
	for _, o := range objs {
		if named[o.Name] || !o.Modified.Before(olderThan) {
			continue
		}
		if err := st.Delete(ctx, o.Name); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}

// backgroundSlice is how much history one turn of background work reads
// (about a millisecond of processor time): between turns the work yields
// to live appends and deliveries, and is charged what it used.
const backgroundSlice = 256 << 10

// turns paces a loop of background work through Config.Background: take,
// before each step, waits for a turn when none is held or when the held
// one has read backgroundSlice bytes (used, which the loop adds to); end
// ends the held turn.
type turns struct {
	ctx  context.Context
	wait func(context.Context) (func(), error)
	stop func()
	used int
}

func (p *Partition) backgroundTurns(ctx context.Context) *turns {
	return &turns{ctx: ctx, wait: p.cfg.Background}
}

func (t *turns) take() error {
	if t.wait == nil || (t.stop != nil && t.used < backgroundSlice) {
		return nil
	}
	t.end()
	stop, err := t.wait(t.ctx)
	if err != nil {
		return err
	}
	t.stop, t.used = stop, 0
	return nil
}

func (t *turns) end() {
	if t.stop != nil {
		t.stop()
		t.stop = nil
	}
}
