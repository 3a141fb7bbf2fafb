package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// The key index, key versions and the tag index.
//
// Apply, on every replica, gives each record with a key its key version:
// its position in its key's history (0, 1, 2, ...), one more than the
// key's last version. It writes, in the pass's batch:
//
//   - a key index row per keyed record: ('k', key, version) -> offset;
//   - a versions row per batch holding keyed records: ('v', base) ->
//     (offset delta, version) pairs, which readers attach to the batch so
//     that every delivered record carries its version;
//   - a tag index row per index term of a record: ('g', term, offset).
//     A record's terms are its tags (headers named TagHeader) and its type
//     (the header TypeHeader), told apart by a first byte.
//
// Rows are never rewritten: a version keeps its number whatever retention,
// compaction or tiering later do to its record, and the index covers
// tiered history (its rows stay when local copies go). Retention does not
// delete key or tag rows (a read skips what is below the log start, and
// reports the earliest version still held); topic deletion deletes them
// with the partition's other rows.
//
// Determinism: a record dropped by compaction (or by retention trimming a
// batch's head) leaves its key and terms in the rewritten entry (a ghost,
// conditions.go), so a replica that applies the rewritten entry indexes it
// exactly as the leader did from the original. Snapshots carry the rows of
// offsets below the jump (snapshot.go).
//
// Concurrency: the head cache, the pass overlays and the apply iterator are
// loop-owned. Reads (KeyHead, KeyEntries, QueryOffsets) read the store and
// bound what they return by the visible end, so they never show a row of
// a pass not yet durable.

// Header names that make index terms of a record.
const (
	TypeHeader = "rewind-type"
	TagHeader  = "rewind-tag"
)

// Term kinds: the first byte of an index term.
const (
	termTag  = 't'
	termType = 'y'
)

// TagTerm and TypeTerm are the index terms of a tag and of a type.
func TagTerm(tag string) []byte  { return append([]byte{termTag}, tag...) }
func TypeTerm(typ string) []byte { return append([]byte{termType}, typ...) }

// IndexTerms returns the index terms of r: its tags and its type.
func IndexTerms(r *record.Record) [][]byte {
	var out [][]byte
	for _, h := range r.Headers {
		switch string(h.Key) {
		case TagHeader:
			out = append(out, TagTerm(string(h.Value)))
		case TypeHeader:
			out = append(out, TypeTerm(string(h.Value)))
		}
	}
	return out
}

// headCacheMax bounds the loop-owned cache of key heads; past it the cache
// starts over (a miss costs one seek in the store).
const headCacheMax = 1 << 17

// KeyVersion is a keyed record's version, by offset delta in its batch.
type KeyVersion struct {
	Delta   uint32
	Version uint64
}

func encodeVersions(vs []KeyVersion) []byte {
	b := make([]byte, 0, 4*len(vs))
	var prev uint32
	for i, v := range vs {
		d := v.Delta
		if i > 0 {
			d -= prev + 1
		}
		b = binary.AppendUvarint(b, uint64(d))
		b = binary.AppendUvarint(b, v.Version)
		prev = v.Delta
	}
	return b
}

// Versions walks a batch's key versions in offset order.
type Versions struct {
	data  []byte
	first bool
	cur   KeyVersion
	ok    bool
}

// Versions returns a walker over the key versions of b's records.
func (b *Batch) Versions() Versions { return Versions{data: b.KeyVersions, first: true} }

// Lookup returns the version of the record at delta; calls must come in
// increasing delta order.
func (v *Versions) Lookup(delta uint32) (uint64, bool) {
	for {
		if v.ok && v.cur.Delta >= delta {
			return v.cur.Version, v.cur.Delta == delta
		}
		if len(v.data) == 0 {
			v.ok = false
			return 0, false
		}
		d, n := binary.Uvarint(v.data)
		if n <= 0 {
			v.data = nil
			return 0, false
		}
		ver, m := binary.Uvarint(v.data[n:])
		if m <= 0 {
			v.data = nil
			return 0, false
		}
		v.data = v.data[n+m:]
		if v.first {
			v.cur.Delta = uint32(d)
			v.first = false
		} else {
			v.cur.Delta += uint32(d) + 1
		}
		v.cur.Version, v.ok = ver, true
	}
}

// head returns key's last version as applied so far (this pass included).
func (p *Partition) head(key []byte) (uint64, bool, error) {
	if v, ok := p.passHeads[string(key)]; ok {
		return v, true, nil
	}
	if v, ok := p.headCache[string(key)]; ok {
		return v, true, nil
	}
	v, _, ok, err := lastVersion(&p.applyIter, p.cfg.DB, p.cfg.Group, key, ^uint64(0))
	if err != nil || !ok {
		return 0, false, err
	}
	if len(p.headCache) >= headCacheMax {
		clear(p.headCache)
	}
	p.headCache[string(key)] = v
	return v, true, nil
}

// lastVersion returns key's last version whose offset is below end (and
// that offset), reading the store through *it (opened on first use).
func lastVersion(it **pebble.Iterator, db *pebble.DB, group uint64, key []byte, end uint64) (version, offset uint64, ok bool, err error) {
	if *it == nil {
		lo, _ := keys.GroupSpan(keys.KeyIndex, group)
		_, hi := keys.GroupSpan(keys.KeyIndex, group)
		if *it, err = db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi}); err != nil {
			return 0, 0, false, err
		}
	}
	lo, hi := keys.KeySpan(group, key)
	for valid := (*it).SeekLT(hi); valid; valid = (*it).Prev() {
		k := (*it).Key()
		if bytes.Compare(k, lo) < 0 {
			break
		}
		v, vok := keys.KeyVersionOf(k)
		if !vok || len((*it).Value()) != 8 {
			return 0, 0, false, fmt.Errorf("%w: bad key index row %x", ErrCorrupt, k)
		}
		off := binary.BigEndian.Uint64((*it).Value())
		if off < end {
			return v, off, true, nil
		}
	}
	return 0, 0, false, (*it).Error()
}

// closeApplyIter ends the iterator Apply opened for head lookups: the next
// pass must see what this one committed.
func (p *Partition) closeApplyIter() {
	if p.applyIter != nil {
		p.applyIter.Close()
		p.applyIter = nil
	}
}

// checkConditions evaluates an append's conditions against the indexes as
// applied so far; a failure is a *ConditionError.
func (p *Partition) checkConditions(c *Conditions) (error, error) {
	for _, kc := range c.Keys {
		v, ok, err := p.head(kc.Key)
		if err != nil {
			return nil, err
		}
		fail := false
		switch kc.Expect {
		case ExpectNone:
			fail = ok
		case ExpectExists:
			fail = !ok
		case ExpectVersion:
			fail = !ok || v != kc.Version
		}
		if fail {
			return &ConditionError{Key: kc.Key, Expected: kc, Actual: v, Exists: ok}, nil
		}
	}
	for _, tc := range c.Tags {
		off, found, err := p.firstMatch(tc.Query, tc.After, ^uint64(0), true)
		if err != nil {
			return nil, err
		}
		if found {
			return &ConditionError{Tag: true, Query: tc.Query, After: tc.After, Offset: off}, nil
		}
	}
	return nil, nil
}

// termOffsets returns the offsets of term's rows in (after, end), in
// ascending order: the first limit of them, or with last the last limit
// (0: all), reading backward. With pass (forward only) this pass's rows,
// which follow every stored one, count once the store has none left.
func (p *Partition) termOffsets(term []byte, after int64, end uint64, limit int, pass, last bool) ([]uint64, error) {
	lo, _ := keys.TagSpan(p.cfg.Group, term)
	if after >= 0 {
		lo = keys.TagKey(p.cfg.Group, term, uint64(after)+1)
	}
	hi := keys.TagKey(p.cfg.Group, term, end)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	var out []uint64
	first, next := it.First, it.Next
	if last {
		first, next = it.Last, it.Prev
	}
	for valid := first(); valid && (limit == 0 || len(out) < limit); valid = next() {
		off, ok := keys.TagKeyOffset(it.Key())
		if !ok {
			it.Close()
			return nil, fmt.Errorf("%w: bad tag index row %x", ErrCorrupt, it.Key())
		}
		out = append(out, off)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	if last {
		slices.Reverse(out)
	}
	if pass && !last && (limit == 0 || len(out) < limit) {
		// This pass's rows follow every stored one: they count only once
		// the store has none left in range.
		for _, off := range p.passIndex[string(term)] {
			if int64(off) > after && off < end && (limit == 0 || len(out) < limit) {
				out = append(out, off)
			}
		}
	}
	return out, nil
}

// hasTerm reports whether the record at offset carries term.
func (p *Partition) hasTerm(term []byte, offset uint64, pass bool) (bool, error) {
	if pass {
		for _, off := range p.passIndex[string(term)] {
			if off == offset {
				return true, nil
			}
		}
	}
	_, closer, err := p.cfg.DB.Get(keys.TagKey(p.cfg.Group, term, offset))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}

// matches reports whether the record at offset matches item, given that
// it carries the item's first candidate term.
func (p *Partition) matches(item QueryItem, offset uint64, pass bool) (bool, error) {
	for _, tag := range item.Tags {
		ok, err := p.hasTerm(TagTerm(tag), offset, pass)
		if err != nil || !ok {
			return false, err
		}
	}
	if len(item.Types) == 0 {
		return true, nil
	}
	for _, typ := range item.Types {
		ok, err := p.hasTerm(TypeTerm(typ), offset, pass)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// scanChunk is how many candidate rows an item scan reads at a time.
const scanChunk = 64

// itemOffsets returns the offsets in (after, end) of records item matches,
// in order: the first limit of them, or with last the last limit (0: all;
// last needs a limit). An item with tags reads its first tag's rows in
// chunks and checks the rest per candidate, so the work follows the
// records returned (and what the first tag matches beside them), not every
// row of the tag: conditions run on the apply loop. With pass, this pass's
// rows count too (forward only).
func (p *Partition) itemOffsets(item QueryItem, after int64, end uint64, limit int, pass, last bool) ([]uint64, error) {
	switch {
	case len(item.Tags) > 0:
		var out []uint64
		lo, hi := after, end
		for limit == 0 || len(out) < limit {
			chunk := max(scanChunk, limit)
			cands, err := p.termOffsets(TagTerm(item.Tags[0]), lo, hi, chunk, pass, last)
			if err != nil {
				return nil, err
			}
			var got []uint64
			for _, off := range cands {
				ok, err := p.matches(item, off, pass)
				if err != nil {
					return nil, err
				}
				if ok {
					got = append(got, off)
				}
			}
			if last {
				out = append(got, out...)
			} else {
				out = append(out, got...)
			}
			if len(cands) < chunk {
				break
			}
			if last {
				hi = cands[0]
			} else {
				lo = int64(cands[len(cands)-1])
			}
		}
		return clip(out, limit, last), nil
	case len(item.Types) > 0:
		var out []uint64
		for _, typ := range item.Types {
			offs, err := p.termOffsets(TypeTerm(typ), after, end, limit, pass, last)
			if err != nil {
				return nil, err
			}
			out = mergeOffsets(out, offs)
		}
		return clip(out, limit, last), nil
	}
	return nil, nil
}

// clip keeps the first n of offs, or with last the last n (0: all).
func clip(offs []uint64, n int, last bool) []uint64 {
	switch {
	case n <= 0 || len(offs) <= n:
		return offs
	case last:
		return offs[len(offs)-n:]
	}
	return offs[:n]
}

// firstMatch returns the first offset in (after, end) of a record q
// matches.
func (p *Partition) firstMatch(q Query, after int64, end uint64, pass bool) (uint64, bool, error) {
	best, found := uint64(0), false
	for _, item := range q {
		offs, err := p.itemOffsets(item, after, end, 1, pass, false)
		if err != nil {
			return 0, false, err
		}
		if len(offs) > 0 && (!found || offs[0] < best) {
			best, found = offs[0], true
		}
	}
	return best, found, nil
}

// mergeOffsets merges two ascending offset lists, dropping repeats.
func mergeOffsets(a, b []uint64) []uint64 {
	out := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var v uint64
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			v, i = a[i], i+1
		case i == len(a) || b[j] < a[i]:
			v, j = b[j], j+1
		default:
			v, i, j = a[i], i+1, j+1
		}
		if n := len(out); n == 0 || out[n-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// indexBatch gives the keyed records of b (and its ghosts) their versions
// and writes the key, versions and tag rows. It returns the encoded
// versions (nil when no record has a key).
func (p *Partition) indexBatch(w *pebble.Batch, b record.Batch, base uint64, ghosts []ghost) ([]byte, error) {
	var vs []KeyVersion
	index := func(delta uint32, key []byte, terms [][]byte, live bool) error {
		off := base + uint64(delta)
		if len(key) > 0 {
			v, ok, err := p.head(key)
			if err != nil {
				return err
			}
			if ok {
				v++
			}
			var val [8]byte
			binary.BigEndian.PutUint64(val[:], off)
			// Set copies key and value into the batch: one scratch key.
			p.rowBuf = keys.AppendKeyVersionKey(p.rowBuf[:0], p.cfg.Group, key, v)
			if err := w.Set(p.rowBuf, val[:], nil); err != nil {
				return err
			}
			p.passHeads[string(key)] = v
			if live {
				vs = append(vs, KeyVersion{Delta: delta, Version: v})
			}
		}
		for _, t := range terms {
			p.rowBuf = keys.AppendTagKey(p.rowBuf[:0], p.cfg.Group, t, off)
			if err := w.Set(p.rowBuf, nil, nil); err != nil {
				return err
			}
			p.passIndex[string(t)] = append(p.passIndex[string(t)], off)
		}
		return nil
	}
	it := b.Iter()
	var r record.Record
	gi := 0
	for it.Next(&r) {
		for ; gi < len(ghosts) && ghosts[gi].delta < r.OffsetDelta; gi++ {
			if err := index(ghosts[gi].delta, ghosts[gi].key, ghosts[gi].terms, false); err != nil {
				return nil, err
			}
		}
		terms := IndexTerms(&r) // nil without index headers: no allocation
		if len(r.Key) == 0 && len(terms) == 0 {
			continue
		}
		if err := index(r.OffsetDelta, r.Key, terms, true); err != nil {
			return nil, err
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	for ; gi < len(ghosts); gi++ {
		if err := index(ghosts[gi].delta, ghosts[gi].key, ghosts[gi].terms, false); err != nil {
			return nil, err
		}
	}
	if len(vs) == 0 {
		return nil, nil
	}
	enc := encodeVersions(vs)
	return enc, w.Set(keys.VersionsKey(p.cfg.Group, base), enc, nil)
}

// versionsAt reads the versions row of the batch at base (nil: none).
func (p *Partition) versionsAt(r pebble.Reader, base uint64) ([]byte, error) {
	v, closer, err := r.Get(keys.VersionsKey(p.cfg.Group, base))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// versionOf returns the key version of the record at offset, reading the
// versions row of the batch holding it (for duplicates).
func (p *Partition) versionOf(offset uint64) (uint64, bool, error) {
	lo, _ := keys.GroupSpan(keys.Versions, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: keys.VersionsKey(p.cfg.Group, offset+1)})
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, false, it.Error()
	}
	base, ok := keys.VersionsKeyBase(it.Key())
	if !ok || offset-base > 1<<32-1 {
		return 0, false, it.Error()
	}
	b := Batch{KeyVersions: it.Value()}
	vs := b.Versions()
	v, ok := vs.Lookup(uint32(offset - base))
	return v, ok, nil
}

// KeyEntry is one version of a key and the offset of its record.
type KeyEntry struct {
	Version uint64
	Offset  uint64
}

// KeyHead returns key's last version visible to readers and its offset.
func (p *Partition) KeyHead(key []byte) (e KeyEntry, ok bool, err error) {
	var it *pebble.Iterator
	v, off, ok, err := lastVersion(&it, p.cfg.DB, p.cfg.Group, key, p.Bounds().Next)
	if it != nil {
		err = errors.Join(err, it.Close())
	}
	return KeyEntry{Version: v, Offset: off}, ok, err
}

// KeyEntries returns up to limit versions of key from version from on, in
// order, that are visible (below the visible end) and still held (at or
// above the log start).
func (p *Partition) KeyEntries(key []byte, from uint64, limit int) ([]KeyEntry, error) {
	vis := p.Bounds()
	_, hi := keys.KeySpan(p.cfg.Group, key)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: keys.KeyVersionKey(p.cfg.Group, key, from), UpperBound: hi})
	if err != nil {
		return nil, err
	}
	var out []KeyEntry
	for valid := it.First(); valid && (limit <= 0 || len(out) < limit); valid = it.Next() {
		v, ok := keys.KeyVersionOf(it.Key())
		if !ok || len(it.Value()) != 8 {
			it.Close()
			return nil, fmt.Errorf("%w: bad key index row %x", ErrCorrupt, it.Key())
		}
		off := binary.BigEndian.Uint64(it.Value())
		if off >= vis.Next {
			break
		}
		if off < vis.LogStart {
			continue
		}
		out = append(out, KeyEntry{Version: v, Offset: off})
	}
	return out, errors.Join(it.Error(), it.Close())
}

// KeyVersionAt returns the first version of key whose offset is at least
// offset (ok false: none below the visible end). Versions and offsets grow
// together, so it is a binary search over the key's rows.
func (p *Partition) KeyVersionAt(key []byte, offset uint64) (uint64, bool, error) {
	head, ok, err := p.KeyHead(key)
	if err != nil || !ok || head.Offset < offset {
		return 0, false, err
	}
	lo, hi := uint64(0), head.Version // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		v, closer, err := p.cfg.DB.Get(keys.KeyVersionKey(p.cfg.Group, key, mid))
		if err != nil {
			return 0, false, err
		}
		off := binary.BigEndian.Uint64(v)
		closer.Close()
		if off < offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, true, nil
}

// QueryOffsets returns the offsets in (after, end) of records q matches,
// in order, up to limit (0: no limit), end bounded by the visible end.
func (p *Partition) QueryOffsets(q Query, after int64, end uint64, limit int) ([]uint64, error) {
	end = min(end, p.Bounds().Next)
	var out []uint64
	for _, item := range q {
		offs, err := p.itemOffsets(item, after, end, limit, false, false)
		if err != nil {
			return nil, err
		}
		out = mergeOffsets(out, offs)
	}
	return clip(out, limit, false), nil
}

// KeyWindow returns the records of b with key from offset from on, as a
// batch starting at from and ending where b ends, with their key versions:
// what a reader of one key delivers from a batch it shares with others.
func KeyWindow(b *Batch, from uint64, key []byte) (*Batch, error) {
	if from < b.Base || from >= b.End() {
		return nil, fmt.Errorf("partition: key window at %d outside the batch [%d, %d)", from, b.Base, b.End())
	}
	shift := uint32(from - b.Base)
	vs := b.Versions()
	var kept []KeyVersion
	data, err := record.Window(b.Records, shift, func(r *record.Record) bool {
		if !bytes.Equal(r.Key, key) {
			return false
		}
		if v, ok := vs.Lookup(r.OffsetDelta); ok {
			kept = append(kept, KeyVersion{Delta: r.OffsetDelta - shift, Version: v})
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	rb, err := record.Parse(data)
	if err != nil {
		return nil, err
	}
	out := &Batch{Base: from, AppendTime: b.AppendTime, Span: b.Span - shift, RaftIndex: b.RaftIndex, Records: rb}
	if len(kept) > 0 {
		out.KeyVersions = encodeVersions(kept)
	}
	return out, nil
}

// maxGap bounds the span of one gap batch.
const maxGap = 1 << 31

// GapBatch returns a batch with no record spanning [from, from+span) (at
// most maxGap offsets): what a reader of one key delivers for offsets that
// hold none of its records.
func GapBatch(from, span uint64) *Batch {
	span = min(span, maxGap)
	rb, _ := record.Parse(record.Gap(0, 0, uint32(span)))
	return &Batch{Base: from, Span: uint32(span), Records: rb}
}

// LastVersion returns the version of the last keyed record of b and
// whether it has one.
func (b *Batch) LastVersion() (uint64, bool) {
	data := b.KeyVersions
	var last uint64
	ok := false
	for len(data) > 0 {
		_, n := binary.Uvarint(data)
		if n <= 0 {
			break
		}
		v, m := binary.Uvarint(data[n:])
		if m <= 0 {
			break
		}
		data = data[n+m:]
		last, ok = v, true
	}
	return last, ok
}

// QueryLast returns the offsets of the last n records (n > 0) q matches
// below end (bounded by the visible end), in ascending order, reading each
// item's candidates backward: the work follows n, not the matches.
func (p *Partition) QueryLast(q Query, end uint64, n int) ([]uint64, error) {
	end = min(end, p.Bounds().Next)
	var out []uint64
	for _, item := range q {
		offs, err := p.itemOffsets(item, NoPosition, end, n, false, true)
		if err != nil {
			return nil, err
		}
		out = mergeOffsets(out, offs)
	}
	return clip(out, n, true), nil
}
