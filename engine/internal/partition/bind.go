package partition

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
)

// Idempotency keys are topic-wide: binding a key in its home partition.
//
// A record's partition comes from its key or an explicit number, so two
// records with one idempotency key can be routed to different partitions,
// and each partition's dedupe index alone would store both. Each
// idempotency key therefore has a home partition (the hash of the key,
// where a keyless record with it lands; the broker picks it), whose dedupe
// index speaks for the key in the whole topic:
//
//  1. A record routed to another partition (the target) is bound first:
//     Bind proposes "key → target, content hash" in the home partition's
//     raft log. At apply, a key without a row (within the window) gets a
//     binding row, in the dedupe index beside the record rows; a key with
//     one is answered from it: where its first record was bound or stored,
//     and whether that record has the same contents.
//  2. Only then is the record appended to the partition the answer names:
//     its own dedupe index stores it once (a retry gets the original
//     offset), and a binding whose append never happened (the publisher
//     crashed, or gave up) is completed by the retry, exactly once.
//     Different contents are a conflict and store nothing.
//  3. A record routed to its home partition needs no binding: its record
//     row is the binding. Checking it (checkDuplicates) also finds binding
//     rows: the same contents go to the bound partition (Append.Elsewhere),
//     other contents are a conflict.
//
// Binds are serialized with the home partition's appends by its raft log,
// so whichever comes first wins on every replica; a batch holding a key
// that was bound meanwhile is skipped at apply like any duplicate, and its
// publisher retries. Binding rows carry the raft index of their bind (for
// snapshots) and expire with the window like record rows, counted from the
// bind.

// Binding asks a key's home partition to bind the key (Bind).
type Binding struct {
	Key []byte
	// Target is the partition the record is routed to; never the home
	// partition itself.
	Target uint32
	// Hash is the record's PayloadHash.
	Hash uint64
}

// Bound answers a Binding: where the key's record belongs.
type Bound struct {
	// Partition is where the record goes: the binding's target when the
	// key was free, else where the key's first record was bound or stored.
	Partition uint32
	// Same reports that the key's first record has the record's contents:
	// a retry, to be sent to Partition (whose dedupe answers with the
	// original). Otherwise the record is a conflict.
	Same bool
	// Stored reports that the first record is stored in the home partition
	// (Partition), at Offset with AppendTime.
	Stored     bool
	Offset     uint64
	AppendTime int64
}

// Moved is a record of an append whose idempotency key is bound to another
// partition, with the same contents: the record belongs there.
type Moved struct {
	Index     int // in the append's records
	Partition uint32
}

// ErrBindSelf is returned by Bind for a binding whose target is the home
// partition itself: such a record is appended there directly.
var ErrBindSelf = errors.New("partition: a key is not bound to its home partition")

// pendingBind is one Bind call, queued or in flight.
type pendingBind struct {
	bindings []Binding
	out      []Bound
	err      error
	done     chan struct{}
}

// bindFlight is one proposed bind entry: the calls it answers, in order.
type bindFlight struct {
	binds []*pendingBind
	keys  []string
	term  uint64
}

type bindResult struct {
	id  uint64
	out []Bound
}

// Bind binds each key in this partition, which must be the keys' home
// partition, and waits until the bindings are applied (or answered from
// rows already stored). Keys must be distinct. Safe from any goroutine.
func (p *Partition) Bind(ctx context.Context, bs []Binding) ([]Bound, error) {
	if p.cfg.DedupeWindow <= 0 {
		return nil, errors.New("partition: binding a key with deduplication off")
	}
	for _, b := range bs {
		if b.Target == p.cfg.Index {
			return nil, ErrBindSelf
		}
	}
	pb := &pendingBind{bindings: bs, done: make(chan struct{})}
	p.mu.Lock()
	if err := p.mu.err; err != nil {
		p.mu.Unlock()
		return nil, err
	}
	p.mu.binds = append(p.mu.binds, pb)
	p.mu.Unlock()
	p.cfg.Host.Wake(p.cfg.Group)
	select {
	case <-pb.done:
		return pb.out, pb.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// boundBy answers a binding of a record with contents hash from the key's
// row e.
func (p *Partition) boundBy(e dedupeEntry, hash uint64) Bound {
	if e.bound {
		return Bound{Partition: e.target, Same: e.hash == hash}
	}
	return Bound{Partition: p.cfg.Index, Same: e.hash == hash, Stored: true, Offset: e.offset, AppendTime: e.appendTime}
}

// proposeBinds answers the binds whose keys all have rows, and proposes the
// others as one entry. Binds with a key in flight wait (returned).
func (p *Partition) proposeBinds(dst [][]byte, binds []*pendingBind) ([][]byte, []*pendingBind) {
	var deferred []*pendingBind
	var f *bindFlight
	floor := p.cfg.Now() - int64(p.cfg.DedupeWindow)
next:
	for _, pb := range binds {
		for _, b := range pb.bindings {
			if _, ok := p.pendingKeys[string(b.Key)]; ok {
				deferred = append(deferred, pb)
				continue next
			}
		}
		pb.out = make([]Bound, len(pb.bindings))
		free := false
		for i, b := range pb.bindings {
			e, ok, err := p.lookupKey(b.Key)
			if err != nil {
				pb.err = fmt.Errorf("partition %d: dedupe index: %w", p.cfg.Index, err)
				close(pb.done)
				continue next
			}
			if ok && e.appendTime >= floor {
				pb.out[i] = p.boundBy(e, b.Hash)
				continue
			}
			free = true
		}
		if !free {
			close(pb.done)
			continue
		}
		if f == nil {
			f = &bindFlight{term: p.proposingTerm}
		}
		f.binds = append(f.binds, pb)
		for _, b := range pb.bindings {
			p.pendingKeys[string(b.Key)] = struct{}{}
			f.keys = append(f.keys, string(b.Key))
		}
	}
	if f == nil {
		return dst, deferred
	}
	p.nextID++
	p.bindFlights[p.nextID] = f
	return append(dst, p.bindEntry(p.nextID, f)), deferred
}

// bindEntry encodes a bind entry: kind, proposal id (8 bytes LE), the
// proposer's clock (8 bytes LE), then per binding the key's length
// (uvarint), the key, the target (4 bytes LE) and the hash (8 bytes LE).
func (p *Partition) bindEntry(id uint64, f *bindFlight) []byte {
	n := 17
	for _, pb := range f.binds {
		for _, b := range pb.bindings {
			n += binary.MaxVarintLen32 + len(b.Key) + 12
		}
	}
	e := make([]byte, 17, n)
	e[0] = kindBind
	binary.LittleEndian.PutUint64(e[1:], id)
	binary.LittleEndian.PutUint64(e[9:], uint64(p.cfg.Now()))
	for _, pb := range f.binds {
		for _, b := range pb.bindings {
			e = binary.AppendUvarint(e, uint64(len(b.Key)))
			e = append(e, b.Key...)
			e = binary.LittleEndian.AppendUint32(e, b.Target)
			e = binary.LittleEndian.AppendUint64(e, b.Hash)
		}
	}
	return e
}

// decodeBind decodes a bind entry; every length is checked.
func decodeBind(data []byte) (id uint64, t int64, bs []Binding, err error) {
	if len(data) < 17 {
		return 0, 0, nil, fmt.Errorf("%w: bind entry of %d bytes", ErrCorrupt, len(data))
	}
	id, t = binary.LittleEndian.Uint64(data[1:]), int64(binary.LittleEndian.Uint64(data[9:]))
	for rest := data[17:]; len(rest) > 0; {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) || uint64(len(rest)-k)-n < 12 {
			return 0, 0, nil, fmt.Errorf("%w: bind entry: bad binding at byte %d", ErrCorrupt, len(data)-len(rest))
		}
		rest = rest[k:]
		b := Binding{Key: rest[:n:n]}
		rest = rest[n:]
		b.Target, b.Hash = binary.LittleEndian.Uint32(rest), binary.LittleEndian.Uint64(rest[4:])
		rest = rest[12:]
		bs = append(bs, b)
	}
	return id, t, bs, nil
}

// applyBind applies a bind entry at raft index index: each free key gets a
// binding row, each bound or stored one is answered from its row.
func (p *Partition) applyBind(w *pebble.Batch, index uint64, data []byte) error {
	id, t, bs, err := decodeBind(data)
	if err != nil {
		return err
	}
	t = max(t, p.st.LastTime)
	floor := t - int64(p.cfg.DedupeWindow)
	out := make([]Bound, len(bs))
	wrote := false
	for i, b := range bs {
		e, ok, err := p.lookupKey(b.Key)
		if err != nil {
			return err
		}
		if ok && e.appendTime >= floor {
			out[i] = p.boundBy(e, b.Hash)
			continue
		}
		ne := dedupeEntry{offset: index, appendTime: t, hash: b.Hash, bound: true, target: b.Target}
		if err := w.Set(keys.DedupeKey(p.cfg.Group, b.Key), ne.encode(), nil); err != nil {
			return err
		}
		if err := w.Set(keys.ExpiryKey(p.cfg.Group, t, b.Key), nil, nil); err != nil {
			return err
		}
		p.passKeys[string(b.Key)] = ne
		out[i] = Bound{Partition: b.Target, Same: true}
		wrote = true
	}
	if wrote && id>>32 != p.st.LastProposer {
		// Rows another incarnation's batches were not checked against
		// (mustCheckKeys).
		p.st.LastOther = index
	}
	if err := p.expireDedupe(w, floor); err != nil {
		return err
	}
	p.bindResults = append(p.bindResults, bindResult{id: id, out: out})
	return nil
}

// answerBinds answers the binds applied this pass (from Durable).
func (p *Partition) answerBinds() {
	results := p.bindResults
	p.bindResults = nil
	for _, r := range results {
		f := p.bindFlights[r.id]
		if f == nil {
			continue // proposed by another node or an earlier run
		}
		delete(p.bindFlights, r.id)
		p.releaseKeys(f.keys)
		out := r.out
		for _, pb := range f.binds {
			if len(out) < len(pb.bindings) {
				pb.err = fmt.Errorf("partition %d: %w: bind entry with %d answers", p.cfg.Index, ErrCorrupt, len(r.out))
			} else {
				copy(pb.out, out[:len(pb.bindings)])
				out = out[len(pb.bindings):]
			}
			close(pb.done)
		}
	}
}

// failBind fails an in-flight bind entry.
func (p *Partition) failBind(id uint64, err error) {
	f := p.bindFlights[id]
	if f == nil {
		return
	}
	delete(p.bindFlights, id)
	p.releaseKeys(f.keys)
	for _, pb := range f.binds {
		pb.err = err
		close(pb.done)
	}
}
