package stream

import (
	"github.com/rewind-io/rewind/engine/internal/partition"
)

// Reading one key (SubscribeRequest.key) through a replica's key index, so
// that the cost follows the key's records, not the partition's.
//
// KeyOf wraps a partition's source: its reader answers "the batch holding
// offset from" with a batch of only the key's records (partition.KeyWindow)
// or, for a run of offsets holding none, an empty batch spanning it
// (partition.GapBatch). Positions, tokens and the hand-off to live stay
// the partition's: the cursor moves over gaps as over filtered records.
// Where the source is ahead of the index (a follower's replica indexes
// what it has applied; the leader gives the bounds), the reader reads the
// source's batches and keeps the key's records: nothing is skipped.

// KeyIndex is a replica's key index (a *partition.Partition).
type KeyIndex interface {
	Bounds() partition.State
	KeyVersionAt(key []byte, offset uint64) (uint64, bool, error)
	KeyEntries(key []byte, from uint64, limit int) ([]partition.KeyEntry, error)
}

// KeyOf returns src restricted to key's records, found through idx.
func KeyOf(src Source, idx KeyIndex, key []byte) Source {
	return keySource{Source: src, idx: idx, key: key}
}

type keySource struct {
	Source
	idx KeyIndex
	key []byte
}

func (k keySource) OpenReader() BatchReader {
	return &keyReader{inner: k.Source.OpenReader(), src: k.Source, idx: k.idx, key: k.key}
}

type keyReader struct {
	inner BatchReader
	src   Source
	idx   KeyIndex
	key   []byte
	// After a window, the next read usually starts where it ended, and the
	// key's next record is the next version.
	next     uint64
	nextVer  uint64
	haveNext bool
}

func (r *keyReader) Read(from uint64) (*partition.Batch, error) {
	end := r.src.Bounds().Next
	indexed := r.idx.Bounds().Next
	if from >= indexed {
		// Past what this replica has indexed: read the source, keep the
		// key's records.
		b, err := r.inner.Read(from)
		if err != nil {
			return nil, err
		}
		r.haveNext = false
		return partition.KeyWindow(b, from, r.key)
	}
	var es []partition.KeyEntry
	var err error
	if r.haveNext && from == r.next {
		es, err = r.idx.KeyEntries(r.key, r.nextVer, 1)
	} else {
		v, ok, verr := r.idx.KeyVersionAt(r.key, from)
		if err = verr; err == nil && ok {
			es, err = r.idx.KeyEntries(r.key, v, 1)
		}
	}
	if err != nil {
		return nil, err
	}
	r.haveNext = false
	if len(es) == 0 || es[0].Offset >= indexed {
		return partition.GapBatch(from, min(indexed, end)-from), nil
	}
	if at := es[0].Offset; at > from {
		return partition.GapBatch(from, at-from), nil
	}
	b, err := r.inner.Read(es[0].Offset)
	if err != nil {
		return nil, err
	}
	w, err := partition.KeyWindow(b, es[0].Offset, r.key)
	if err != nil {
		return nil, err
	}
	if v, ok := w.LastVersion(); ok {
		r.next, r.nextVer, r.haveNext = w.End(), v+1, true
	}
	return w, nil
}

func (r *keyReader) Close() { r.inner.Close() }
