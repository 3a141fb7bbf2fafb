package partition

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/raftlog"
)

// A replica that needs entries the leader's log no longer has (retention
// truncated it, or the replica is brand new) jumps to the leader's first
// index with a raft snapshot that carries no records: the records below the
// jump are gone on every replica anyway. What it carries is what applying
// the entries after the jump needs to give the same result as on the
// leader:
//
//   - the offset and the append-time floor at the jump (the first retained
//     batch's base and effective append time, which is at least the time of
//     every batch before it, so apply's max() rule gives the same times);
//   - the dedupe rows of records below the jump and the binding rows of
//     bind entries below it (bind.go): a later record or bind with the
//     same key is checked against them exactly as on the leader;
//   - the tiered storage manifest, as the leader has it now (tier.go; a
//     tier command in the retained log re-applied over it changes nothing);
//   - the subscriber group rows, as the leader has them now. A group
//     command in the retained log is then applied over a state that may
//     already include it, so a replica that jumped can briefly show a
//     newer committed offset than the leader had at that index; the next
//     commit settles it. Commits only move what is re-delivered
//     (at-least-once), never which records exist.

// snapshot is the data of a partition's raft snapshot.
type snapshot struct {
	Next     uint64 `json:"next"`
	LastTime int64  `json:"last_time"`
	// ReadStart is the first readable offset when it is tiered (below
	// Next); 0 otherwise.
	ReadStart uint64 `json:"read_start,omitempty"`
	// Rows are raw key/value pairs of the dedupe, expiry, group and tier
	// manifest spans.
	Rows []snapRow `json:"rows,omitempty"`
}

type snapRow struct {
	K []byte `json:"k"`
	V []byte `json:"v,omitempty"`
}

// SnapshotData implements raftlog.Snapshotter: the state as of raft index
// index, the last entry the log no longer holds.
func (p *Partition) SnapshotData(index uint64) ([]byte, error) {
	snap := snapshot{Next: p.st.Next, LastTime: p.st.LastTime}
	if len(p.tierRows) > 0 {
		snap.ReadStart = p.st.ReadStart
	}
	lo, hi := keys.GroupSpan(keys.Offset, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	for valid := it.First(); valid; valid = it.Next() {
		row, err := decodeIndexRow(it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		if row.raftIndex > index {
			snap.Next, _ = keys.OffsetKeyBase(it.Key())
			snap.LastTime = row.appendTime
			break
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	// Dedupe rows come first, so their expiry rows can follow them out.
	brought := map[string]bool{} // idempotency keys the retained log brings
	for _, prefix := range []byte{keys.Dedupe, keys.Expiry, keys.Commit, keys.Tier} {
		lo, hi := keys.GroupSpan(prefix, p.cfg.Group)
		it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return nil, err
		}
		for valid := it.First(); valid; valid = it.Next() {
			if prefix == keys.Dedupe {
				e, err := decodeDedupe(it.Value())
				// A record row of a retained offset, or a binding row
				// of a retained bind entry, is written again by the
				// retained log: leave it out, so that the log applies
				// over the rows as they were at index.
				// (A batch whose head retention trimmed is brought whole:
				// the entry a lagging replica receives may be the
				// original, from raft's entry cache, and its keys must
				// not look like duplicates there. Given the rewritten
				// entry, that replica lacks the rows of the trimmed
				// records, as it does for compacted ones.)
				if err == nil && (!e.bound && e.offset >= snap.Next || e.bound && e.offset > index) {
					brought[string(it.Key()[len(lo):])] = true
					continue
				}
			}
			if prefix == keys.Expiry {
				if _, idem, ok := keys.ExpiryKeyParts(it.Key()); ok && brought[string(idem)] {
					continue
				}
			}
			snap.Rows = append(snap.Rows, snapRow{K: append([]byte(nil), it.Key()...), V: append([]byte(nil), it.Value()...)})
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return nil, err
		}
	}
	// The key index, versions and tag index rows of offsets below the
	// jump: the retained log writes the rest again, from the same heads.
	if err := p.snapIndexRows(&snap); err != nil {
		return nil, err
	}
	return json.Marshal(snap)
}

// RestoreSnapshot implements raftlog.Snapshotter: every row of the
// partition is replaced by the snapshot's, and the partition continues
// empty from the snapshot's offset.
func (p *Partition) RestoreSnapshot(w *pebble.Batch, index uint64, data []byte) error {
	clear(p.headCache)
	clear(p.passHeads)
	clear(p.passIndex)
	var snap snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("partition %d: %w: snapshot: %v", p.cfg.Index, ErrCorrupt, err)
	}
	for _, prefix := range keys.PartitionRows {
		lo, hi := keys.GroupSpan(prefix, p.cfg.Group)
		if err := w.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
	}
	var tierRows []TierSegment
	for _, r := range snap.Rows {
		if len(r.K) == 0 {
			return fmt.Errorf("partition %d: %w: empty snapshot row key", p.cfg.Index, ErrCorrupt)
		}
		if r.K[0] == keys.Tier {
			var s TierSegment
			if err := json.Unmarshal(r.V, &s); err != nil {
				return fmt.Errorf("partition %d: %w: snapshot tier row: %v", p.cfg.Index, ErrCorrupt, err)
			}
			tierRows = append(tierRows, s)
		}
		lo, hi := keys.GroupSpan(r.K[0], p.cfg.Group)
		if string(r.K) < string(lo) || string(r.K) >= string(hi) {
			return fmt.Errorf("partition %d: %w: snapshot row %x outside the partition", p.cfg.Index, ErrCorrupt, r.K)
		}
		if err := w.Set(r.K, r.V, nil); err != nil {
			return err
		}
	}
	p.st = State{LogStart: snap.Next, ReadStart: snap.Next, Next: snap.Next, FirstTime: snap.LastTime, LastTime: snap.LastTime,
		LastIndex: index, LastOther: index, PayloadKnown: true}
	if n := len(tierRows); n > 0 && snap.ReadStart < snap.Next && snap.ReadStart >= tierRows[0].Base && tierRows[n-1].End >= snap.Next {
		// The history below the jump is in tiered storage, readable here
		// too.
		p.st.ReadStart = snap.ReadStart
	}
	p.appliedIndex = index
	p.logFloor = 0
	p.restored = true
	p.tierRows, p.tierChanged = tierRows, true
	clear(p.passRows)
	clear(p.passEntries)
	clear(p.passTerms)
	p.mu.Lock()
	p.mu.truncatingTo = max(p.mu.truncatingTo, snap.Next)
	p.mu.Unlock()
	p.log.Info("jumped to the leader's first index", "raft-index", index, "offset", snap.Next)
	return w.Set(keys.PartitionStateKey(p.cfg.Group), p.st.encode(), nil)
}

var _ raftlog.Snapshotter = (*Partition)(nil)

// snapIndexRows adds the key index, versions and tag index rows of offsets
// below snap.Next to snap.
func (p *Partition) snapIndexRows(snap *snapshot) error {
	for _, prefix := range []byte{keys.KeyIndex, keys.Versions, keys.TagIndex} {
		lo, hi := keys.GroupSpan(prefix, p.cfg.Group)
		it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		for valid := it.First(); valid; valid = it.Next() {
			var off uint64
			var ok bool
			switch prefix {
			case keys.KeyIndex:
				if ok = len(it.Value()) == 8; ok {
					off = binary.BigEndian.Uint64(it.Value())
				}
			case keys.Versions:
				off, ok = keys.VersionsKeyBase(it.Key())
			default:
				off, ok = keys.TagKeyOffset(it.Key())
			}
			if !ok {
				it.Close()
				return fmt.Errorf("partition %d: %w: bad index row %x", p.cfg.Index, ErrCorrupt, it.Key())
			}
			if off < snap.Next {
				snap.Rows = append(snap.Rows, snapRow{K: append([]byte(nil), it.Key()...), V: append([]byte(nil), it.Value()...)})
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return err
		}
	}
	return nil
}
