package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/raft/v3/raftpb"
)

// LogIterator reads a group's stored log in index order, from any goroutine,
// without going through raft. It sees the store as of its creation (a Pebble
// iterator is a consistent snapshot). Readers must bound it by what the state
// machine has applied: entries past the commit index may still be replaced.
type LogIterator struct {
	it    *pebble.Iterator
	group uint64
	valid bool
	index uint64
	term  uint64
	typ   pb.EntryType
	data  []byte
	err   error
	first bool
}

// NewLogIterator iterates group's entries with index in [lo, hi).
func NewLogIterator(r pebble.Reader, group, lo, hi uint64) (*LogIterator, error) {
	it, err := r.NewIter(&pebble.IterOptions{
		LowerBound: entryKey(group, lo),
		UpperBound: entryKey(group, hi),
	})
	if err != nil {
		return nil, err
	}
	return &LogIterator{it: it, group: group, first: true}, nil
}

// Next moves to the next entry and reports whether there is one.
func (li *LogIterator) Next() bool {
	if li.err != nil {
		return false
	}
	var valid bool
	if li.first {
		valid, li.first = li.it.First(), false
	} else {
		valid = li.it.Next()
	}
	return li.load(valid)
}

// SeekGE moves to the first entry with index >= index and reports whether
// there is one.
func (li *LogIterator) SeekGE(index uint64) bool {
	if li.err != nil {
		return false
	}
	li.first = false
	return li.load(li.it.SeekGE(entryKey(li.group, index)))
}

func (li *LogIterator) load(valid bool) bool {
	li.valid = false
	if !valid {
		li.err = li.it.Error()
		return false
	}
	idx, ok := entryKeyIndex(li.it.Key())
	if !ok {
		li.err = fmt.Errorf("%w: bad entry key %x", ErrCorrupt, li.it.Key())
		return false
	}
	v, err := li.it.ValueAndErr()
	if err != nil {
		li.err = err
		return false
	}
	typ, term, data, err := decodeEntryHeader(v)
	if err != nil {
		li.err = fmt.Errorf("index %d: %w", idx, err)
		return false
	}
	li.index, li.term, li.typ, li.data = idx, term, typ, data
	li.valid = true
	return true
}

// Index, Term, Type and Data describe the current entry. Data is valid only
// until the next call to Next or Close.
func (li *LogIterator) Index() uint64      { return li.index }
func (li *LogIterator) Term() uint64       { return li.term }
func (li *LogIterator) Type() pb.EntryType { return li.typ }
func (li *LogIterator) Data() []byte       { return li.data }
func (li *LogIterator) Err() error         { return li.err }

// Valid reports whether the iterator is positioned at an entry.
func (li *LogIterator) Valid() bool { return li.valid }

// Close releases the iterator.
func (li *LogIterator) Close() error { return errors.Join(li.err, li.it.Close()) }

// RewriteEntry replaces the data of a stored entry, keeping its type and
// term. It is for state machines that rewrite their own applied entries
// deterministically on every replica (key compaction); raft never reads an
// applied entry back except to send it to a follower that lags, which then
// receives the rewritten form.
func RewriteEntry(b *pebble.Batch, r pebble.Reader, group, index uint64, data []byte) error {
	v, closer, err := r.Get(entryKey(group, index))
	if err != nil {
		return fmt.Errorf("raftlog: group %d entry %d: %w", group, index, err)
	}
	typ, term, _, err := decodeEntryHeader(v)
	closer.Close()
	if err != nil {
		return fmt.Errorf("raftlog: group %d entry %d: %w", group, index, err)
	}
	buf := make([]byte, 0, 1+binary.MaxVarintLen64+len(data))
	buf = append(buf, byte(typ))
	buf = binary.AppendUvarint(buf, term)
	buf = append(buf, data...)
	return b.Set(entryKey(group, index), buf, nil)
}

// RewriteNewEntry is RewriteEntry for a normal entry of the given term
// that b itself appended (in the same pass, so not readable from the store
// yet).
func RewriteNewEntry(b *pebble.Batch, group, index, term uint64, data []byte) error {
	buf := make([]byte, 0, 1+binary.MaxVarintLen64+len(data))
	buf = append(buf, byte(pb.EntryNormal))
	buf = binary.AppendUvarint(buf, term)
	buf = append(buf, data...)
	return b.Set(entryKey(group, index), buf, nil)
}

// ReadEntryData returns a copy of the data of the entry at index.
func ReadEntryData(r pebble.Reader, group, index uint64) ([]byte, error) {
	v, closer, err := r.Get(entryKey(group, index))
	if err != nil {
		return nil, fmt.Errorf("raftlog: group %d entry %d: %w", group, index, err)
	}
	defer closer.Close()
	_, _, data, err := decodeEntryHeader(v)
	if err != nil {
		return nil, fmt.Errorf("raftlog: group %d entry %d: %w", group, index, err)
	}
	return append([]byte(nil), data...), nil
}
