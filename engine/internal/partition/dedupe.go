package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// Deduplication by idempotency key.
//
// The dedupe index maps a record's idempotency key to where the first
// record with that key was stored (offset, append time) and a hash of its
// contents. It is written at apply, in the same batch as the offsets, so it
// is exactly as durable as the records and every replica has the same one.
//
// It is consulted twice:
//
//  1. By the proposer (TakeProposals, on the loop goroutine, serialized):
//     a record whose key is in the index within the window is not proposed;
//     the publisher gets the original offset and duplicate=true, or a
//     ConflictError when the contents differ. An append whose key is in a
//     batch still in flight waits for that batch, then is checked again.
//  2. At apply, authoritatively: a batch holding a key already stored
//     within the window is skipped by every replica alike (it can only
//     come from a proposer that did not know, such as an old leader), and
//     its publishers learn that the outcome is unknown, so they retry and
//     get their answer from step 1.
//
// Step 2 can be skipped, deterministically, when step 1 already covered
// everything: each batch's envelope carries the raft index its proposer had
// applied when it checked, and the proposal id carries the proposer's
// incarnation (a random number per process). A proposer's own in-flight
// batches are in its pending keys, so if every batch applied after the
// checked index comes from the same incarnation, the keys cannot be there
// and apply only writes the rows. The partition state records the last
// incarnation and the last batch of another one, so every replica decides
// alike. On one node this halves the lookups.
//
// The window is measured on append times (the batch's time at apply), so
// the decision is the same on every replica. Rows older than the window are
// deleted at apply, a bounded number per batch, in the order of the expiry
// rows.

var (
	// ErrConflict is returned when an idempotency key is reused within the
	// window for a record with different contents.
	ErrConflict = errors.New("partition: idempotency key reused for a different record")
	// errDuplicateAtApply fails the publishers of a batch skipped at apply.
	errDuplicateAtApply = fmt.Errorf("%w: a record of the batch was already stored (retry to learn its offset)", ErrOutcomeUnknown)
)

// ConflictError says which record of an append reused a key.
type ConflictError struct {
	Index int // in the append's records
	Key   string
	// Partition is where the key's first record is stored or bound to.
	Partition uint32
	// Stored reports that the first record is stored in this partition, at
	// Offset with AppendTime; otherwise the key is bound to Partition
	// (bind.go) and the offset is not known here.
	Stored     bool
	Offset     uint64
	AppendTime int64
}

func (e *ConflictError) Error() string {
	if !e.Stored {
		return fmt.Sprintf("record %d reuses idempotency key %q of a different record bound to partition %d", e.Index, e.Key, e.Partition)
	}
	return fmt.Sprintf("record %d reuses idempotency key %q of the different record at offset %d", e.Index, e.Key, e.Offset)
}

// Is makes a ConflictError an ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Duplicate is a record of an append that was already stored.
type Duplicate struct {
	Index      int // in the append's records
	Offset     uint64
	AppendTime int64
	// Version is the original's key version when HasVersion.
	Version    uint64
	HasVersion bool
}

// dedupeEntry is the value of a dedupe row: a record row (24 bytes: where
// the record is stored) or a binding row (28 bytes: the key's record goes to
// partition target; bind.go).
type dedupeEntry struct {
	// offset is the record's offset, or for a binding the raft index of
	// its bind entry.
	offset     uint64
	appendTime int64 // or the bind's time
	hash       uint64
	bound      bool
	target     uint32
}

func (d dedupeEntry) encode() []byte {
	b := make([]byte, 0, 28)
	b = binary.BigEndian.AppendUint64(b, d.offset)
	b = binary.BigEndian.AppendUint64(b, uint64(d.appendTime))
	b = binary.BigEndian.AppendUint64(b, d.hash)
	if d.bound {
		b = binary.BigEndian.AppendUint32(b, d.target)
	}
	return b
}

func decodeDedupe(b []byte) (dedupeEntry, error) {
	if len(b) != 24 && len(b) != 28 {
		return dedupeEntry{}, fmt.Errorf("%w: dedupe row of %d bytes", ErrCorrupt, len(b))
	}
	e := dedupeEntry{
		offset: binary.BigEndian.Uint64(b), appendTime: int64(binary.BigEndian.Uint64(b[8:])),
		hash: binary.BigEndian.Uint64(b[16:]),
	}
	if len(b) == 28 {
		e.bound, e.target = true, binary.BigEndian.Uint32(b[24:])
	}
	return e, nil
}

// PayloadHash identifies a record's contents (key, value, headers) for
// conflict detection. FNV-1a 64 over length-prefixed fields: deterministic
// across processes and replicas.
func PayloadHash(r *record.Record) uint64 {
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	put := func(b []byte) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	put(r.Key)
	put(r.Value)
	for _, hd := range r.Headers {
		put(hd.Key)
		put(hd.Value)
	}
	return h.Sum64()
}

// lookupKey reads the dedupe row of key: first what this pass applied but
// has not committed yet, then the store.
func (p *Partition) lookupKey(key []byte) (dedupeEntry, bool, error) {
	if e, ok := p.passKeys[string(key)]; ok {
		return e, true, nil
	}
	v, closer, err := p.cfg.DB.Get(keys.DedupeKey(p.cfg.Group, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return dedupeEntry{}, false, nil
	}
	if err != nil {
		return dedupeEntry{}, false, err
	}
	defer closer.Close()
	e, err := decodeDedupe(v)
	return e, err == nil, err
}

type dedupeVerdict int

const (
	dedupeOK dedupeVerdict = iota
	dedupeDefer
	dedupeFailed
)

// checkDuplicates is step 1 (see above) for one append. On dedupeOK it has
// set a.kept/a.Duplicates and registered the kept keys as pending.
func (p *Partition) checkDuplicates(a *Append) dedupeVerdict {
	for i := range a.Records {
		if k := a.Records[i].IdempotencyKey; len(k) > 0 {
			if _, ok := p.pendingKeys[string(k)]; ok {
				return dedupeDefer
			}
		}
	}
	floor := p.cfg.Now() - int64(p.cfg.DedupeWindow)
	var keep []int
	var dups []Duplicate
	var moved []Moved
	for i := range a.Records {
		r := &a.Records[i]
		if len(r.IdempotencyKey) == 0 {
			keep = append(keep, i)
			continue
		}
		e, ok, err := p.lookupKey(r.IdempotencyKey)
		if err != nil {
			a.err = fmt.Errorf("partition %d: dedupe index: %w", p.cfg.Index, err)
			return dedupeFailed
		}
		if ok && e.appendTime >= floor {
			switch {
			case e.hash != PayloadHash(r) && e.bound:
				a.err = &ConflictError{Index: i, Key: string(r.IdempotencyKey), Partition: e.target}
				return dedupeFailed
			case e.hash != PayloadHash(r):
				a.err = &ConflictError{Index: i, Key: string(r.IdempotencyKey), Partition: p.cfg.Index, Stored: true, Offset: e.offset, AppendTime: e.appendTime}
				return dedupeFailed
			case e.bound:
				moved = append(moved, Moved{Index: i, Partition: e.target})
			default:
				d := Duplicate{Index: i, Offset: e.offset, AppendTime: e.appendTime}
				if len(r.Key) > 0 {
					if d.Version, d.HasVersion, err = p.versionOf(e.offset); err != nil {
						a.err = fmt.Errorf("partition %d: key versions: %w", p.cfg.Index, err)
						return dedupeFailed
					}
				}
				dups = append(dups, d)
			}
			continue
		}
		keep = append(keep, i)
	}
	if len(dups) > 0 || len(moved) > 0 {
		if keep == nil {
			keep = []int{} // none kept (nil would mean all)
		}
		a.Duplicates, a.Elsewhere, a.kept = dups, moved, keep
	}
	for _, i := range keep {
		if k := a.Records[i].IdempotencyKey; len(k) > 0 {
			p.pendingKeys[string(k)] = struct{}{}
		}
	}
	return dedupeOK
}

// dupAtApply is step 2 for a batch about to get append time t: it reports
// whether the batch holds a key already stored within the window.
func (p *Partition) dupAtApply(b record.Batch, t int64) (bool, error) {
	floor := t - int64(p.cfg.DedupeWindow)
	it := b.Iter()
	var r record.Record
	for it.Next(&r) {
		if len(r.IdempotencyKey) == 0 {
			continue
		}
		e, ok, err := p.lookupKey(r.IdempotencyKey)
		if err != nil {
			return false, err
		}
		if ok && e.appendTime >= floor {
			return true, nil
		}
	}
	return false, it.Err()
}

// writeDedupe writes the dedupe rows of a batch stored from base at time t.
func (p *Partition) writeDedupe(w *pebble.Batch, b record.Batch, base uint64, t int64) error {
	it := b.Iter()
	var r record.Record
	for it.Next(&r) {
		if len(r.IdempotencyKey) == 0 {
			continue
		}
		e := dedupeEntry{offset: base + uint64(r.OffsetDelta), appendTime: t, hash: PayloadHash(&r)}
		if err := w.Set(keys.DedupeKey(p.cfg.Group, r.IdempotencyKey), e.encode(), nil); err != nil {
			return err
		}
		if err := w.Set(keys.ExpiryKey(p.cfg.Group, t, r.IdempotencyKey), nil, nil); err != nil {
			return err
		}
		p.passKeys[string(r.IdempotencyKey)] = e
	}
	return it.Err()
}

// mustCheckKeys reports whether apply must look up the keys of a batch from
// proposer incarnation inc that checked them against the state at raft
// index checked (see above).
func (p *Partition) mustCheckKeys(inc, checked uint64) bool {
	return inc == 0 || inc != p.st.LastProposer || p.st.LastOther > checked
}

// gcBatch bounds the expired dedupe rows deleted per applied batch.
const gcBatch = 256

// expireDedupe deletes up to gcBatch dedupe rows of records appended before
// floor. A key re-published after its row expired has a newer row, which
// is kept.
func (p *Partition) expireDedupe(w *pebble.Batch, floor int64) error {
	lo := keys.ExpirySeekKey(p.cfg.Group, p.gcFloor)
	hi := keys.ExpirySeekKey(p.cfg.Group, floor)
	if p.gcFloor >= floor {
		return nil
	}
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	n := 0
	for valid := it.First(); valid && n < gcBatch; valid = it.Next() {
		t, key, ok := keys.ExpiryKeyParts(it.Key())
		if !ok {
			return fmt.Errorf("partition %d: %w: bad expiry key %x", p.cfg.Index, ErrCorrupt, it.Key())
		}
		cur, found, err := p.lookupKey(key)
		if err != nil {
			return err
		}
		if found && cur.appendTime == t {
			if err := w.Delete(keys.DedupeKey(p.cfg.Group, key), nil); err != nil {
				return err
			}
			delete(p.passKeys, string(key))
		}
		if err := w.Delete(it.Key(), nil); err != nil {
			return err
		}
		p.gcFloor = t
		n++
	}
	if n < gcBatch {
		p.gcFloor = floor // everything below floor is gone (or going, in w)
	}
	return it.Error()
}

// StoredOffset returns the offset of the record stored with idempotency key
// key, as far as this replica has applied (ok false: none, or the key is
// only bound here). For messages; safe from any goroutine.
func (p *Partition) StoredOffset(key []byte) (offset uint64, ok bool, err error) {
	v, closer, err := p.cfg.DB.Get(keys.DedupeKey(p.cfg.Group, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	e, err := decodeDedupe(v)
	if err != nil || e.bound {
		return 0, false, err
	}
	return e.offset, true, nil
}
