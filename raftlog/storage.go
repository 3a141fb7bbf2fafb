package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// storage is a group's raft.Storage on Pebble. It is owned by the host loop:
// raft calls it from that goroutine only, and so does the host when it
// persists a Ready, so it needs no lock.
//
// It keeps the tail of the log (entries not yet applied, and those followers
// may still need) in memory so that applying committed entries and building
// MsgApp never touch the disk in the steady state.
type storage struct {
	db    *pebble.DB
	group uint64

	hard *pb.HardState // never nil
	conf *pb.ConfState // never nil
	// Invariant: truncIndex <= applied <= hard.Commit <= last.
	truncIndex uint64 // index of the last entry removed from the log's front
	truncTerm  uint64
	applied    uint64
	last       uint64
	lastTerm   uint64

	// cache holds entries cacheFirst() .. last, contiguous, or nothing.
	cache      []*pb.Entry
	cacheBytes int64

	// snapData, when set, gives the state machine's part of a snapshot at
	// an index (Snapshotter.SnapshotData).
	snapData func(index uint64) ([]byte, error)
}

// openStorage loads a group's persisted state. A group with no state gets
// the given voters as its initial configuration (written by the caller's
// batch, see bootstrap). ok reports whether any state existed.
func openStorage(db *pebble.DB, group uint64) (s *storage, exists bool, err error) {
	s = &storage{db: db, group: group, hard: &pb.HardState{}, conf: &pb.ConfState{}}
	get := func(suffix byte, fn func([]byte) error) error {
		v, closer, err := db.Get(stateKey(group, suffix))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		defer closer.Close()
		exists = true
		return fn(v)
	}
	if err := get(suffixHard, func(v []byte) error { return proto.Unmarshal(v, s.hard) }); err != nil {
		return nil, false, fmt.Errorf("raftlog: group %d hard state: %w", group, errors.Join(ErrCorrupt, err))
	}
	if err := get(suffixConf, func(v []byte) error { return proto.Unmarshal(v, s.conf) }); err != nil {
		return nil, false, fmt.Errorf("raftlog: group %d conf state: %w", group, errors.Join(ErrCorrupt, err))
	}
	if err := get(suffixTrunc, func(v []byte) error {
		if len(v) != 16 {
			return fmt.Errorf("%w: truncated state of %d bytes", ErrCorrupt, len(v))
		}
		s.truncIndex, s.truncTerm = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
		return nil
	}); err != nil {
		return nil, false, fmt.Errorf("raftlog: group %d: %w", group, err)
	}
	if err := get(suffixApplied, func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: applied index of %d bytes", ErrCorrupt, len(v))
		}
		s.applied = binary.BigEndian.Uint64(v)
		return nil
	}); err != nil {
		return nil, false, fmt.Errorf("raftlog: group %d: %w", group, err)
	}
	s.last, s.lastTerm = s.truncIndex, s.truncTerm
	if err := s.loadLast(); err != nil {
		return nil, false, err
	}
	if s.last > s.truncIndex {
		exists = true
	}
	if err := s.check(); err != nil {
		return nil, false, err
	}
	return s, exists, nil
}

// loadLast finds the last stored entry.
func (s *storage) loadLast() error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: entryKey(s.group, s.truncIndex+1),
		UpperBound: entryKey(s.group, ^uint64(0)),
	})
	if err != nil {
		return err
	}
	defer it.Close()
	if !it.Last() {
		return it.Error()
	}
	idx, ok := entryKeyIndex(it.Key())
	if !ok {
		return fmt.Errorf("raftlog: group %d: %w: bad entry key %x", s.group, ErrCorrupt, it.Key())
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return err
	}
	_, term, _, err := decodeEntryHeader(v)
	if err != nil {
		return fmt.Errorf("raftlog: group %d index %d: %w", s.group, idx, err)
	}
	s.last, s.lastTerm = idx, term
	return it.Error()
}

// check verifies the invariants between the loaded pieces of state, so that a
// damaged store is refused at startup instead of serving a wrong log.
func (s *storage) check() error {
	switch {
	case s.hard.GetCommit() > s.last:
		return fmt.Errorf("raftlog: group %d: %w: commit index %d beyond last entry %d (log truncated?)",
			s.group, ErrCorrupt, s.hard.GetCommit(), s.last)
	case s.applied > s.hard.GetCommit() && s.applied > s.truncIndex:
		return fmt.Errorf("raftlog: group %d: %w: applied index %d beyond commit index %d",
			s.group, ErrCorrupt, s.applied, s.hard.GetCommit())
	case s.applied < s.truncIndex:
		return fmt.Errorf("raftlog: group %d: %w: applied index %d below log start %d",
			s.group, ErrCorrupt, s.applied, s.truncIndex+1)
	}
	// Both ends of the log must be present. A full scan for holes would read
	// the whole history at every start; the ends catch a log cut short, which
	// is the damage that would make raft campaign with a truncated log.
	if s.last > s.truncIndex {
		for _, i := range []uint64{s.truncIndex + 1, s.last} {
			_, closer, err := s.db.Get(entryKey(s.group, i))
			if errors.Is(err, pebble.ErrNotFound) {
				return fmt.Errorf("raftlog: group %d: %w: entry %d missing", s.group, ErrCorrupt, i)
			}
			if err != nil {
				return err
			}
			closer.Close()
		}
	}
	return nil
}

// bootstrapIndex is where a bootstrapped group's log starts: as if entry 1
// (term 1) had been applied and truncated. A replica added later therefore
// always starts from a snapshot, which is what tells it the configuration.
const bootstrapIndex = 1

// bootstrap writes the initial configuration of a brand-new group.
func (s *storage) bootstrap(b *pebble.Batch, voters []uint64) error {
	v := binary.BigEndian.AppendUint64(nil, bootstrapIndex)
	v = binary.BigEndian.AppendUint64(v, 1)
	if err := b.Set(stateKey(s.group, suffixTrunc), v, nil); err != nil {
		return err
	}
	s.truncIndex, s.truncTerm = bootstrapIndex, 1
	s.last, s.lastTerm = bootstrapIndex, 1
	if err := s.setHardState(b, &pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(bootstrapIndex)}); err != nil {
		return err
	}
	if err := s.setApplied(b, bootstrapIndex); err != nil {
		return err
	}
	return s.setConf(b, bootstrapIndex, &pb.ConfState{Voters: append([]uint64(nil), voters...)})
}

// setConf records cs as the configuration from entry index on.
func (s *storage) setConf(b *pebble.Batch, index uint64, cs *pb.ConfState) error {
	v, err := proto.Marshal(cs)
	if err != nil {
		return err
	}
	s.conf = proto.CloneOf(cs)
	if err := b.Set(confAtKey(s.group, index), v, nil); err != nil {
		return err
	}
	return b.Set(stateKey(s.group, suffixConf), v, nil)
}

// confAt returns the configuration in force at index (at least the log's
// start): the last one recorded at or before it.
func (s *storage) confAt(index uint64) (*pb.ConfState, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: confAtKey(s.group, 0), UpperBound: confAtKey(s.group, index+1),
	})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if !it.Last() {
		if err := it.Error(); err != nil {
			return nil, err
		}
		// A store from before configurations were recorded by index.
		return proto.CloneOf(s.conf), nil
	}
	cs := &pb.ConfState{}
	if err := proto.Unmarshal(it.Value(), cs); err != nil {
		return nil, fmt.Errorf("raftlog: group %d: %w: configuration at %x: %w", s.group, ErrCorrupt, it.Key(), err)
	}
	return cs, nil
}

func (s *storage) setHardState(b *pebble.Batch, hs *pb.HardState) error {
	v, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	s.hard = proto.CloneOf(hs)
	return b.Set(stateKey(s.group, suffixHard), v, nil)
}

func (s *storage) setApplied(b *pebble.Batch, index uint64) error {
	s.applied = index
	return b.Set(stateKey(s.group, suffixApplied), binary.BigEndian.AppendUint64(nil, index), nil)
}

// append writes entries to b, replacing any conflicting suffix of the log.
func (s *storage) append(b *pebble.Batch, ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	first := ents[0].GetIndex()
	if first <= s.truncIndex || first > s.last+1 {
		return fmt.Errorf("raftlog: group %d: append at %d outside (%d, %d]", s.group, first, s.truncIndex, s.last+1)
	}
	if first <= s.last {
		if err := b.DeleteRange(entryKey(s.group, first), entryKey(s.group, s.last+1), nil); err != nil {
			return err
		}
		s.trimCacheFrom(first)
	}
	for _, e := range ents {
		data := e.GetData()
		var hdr [1 + binary.MaxVarintLen64]byte
		hdr[0] = byte(e.GetType())
		n := 1 + binary.PutUvarint(hdr[1:], e.GetTerm())
		op := b.SetDeferred(18, n+len(data))
		copy(op.Key, entryKey(s.group, e.GetIndex()))
		copy(op.Value[copy(op.Value, hdr[:n]):], data)
		if err := op.Finish(); err != nil {
			return err
		}
	}
	lastEnt := ents[len(ents)-1]
	s.last, s.lastTerm = lastEnt.GetIndex(), lastEnt.GetTerm()
	if len(s.cache) > 0 && s.cacheFirst()+uint64(len(s.cache)) != first {
		s.cache, s.cacheBytes = nil, 0
	}
	for _, e := range ents {
		s.cache = append(s.cache, e)
		s.cacheBytes += entrySize(e)
	}
	return nil
}

func (s *storage) cacheFirst() uint64 {
	if len(s.cache) == 0 {
		return s.last + 1
	}
	return s.cache[0].GetIndex()
}

// trimCacheFrom drops cached entries at index >= i.
func (s *storage) trimCacheFrom(i uint64) {
	for len(s.cache) > 0 && s.cache[len(s.cache)-1].GetIndex() >= i {
		s.cacheBytes -= entrySize(s.cache[len(s.cache)-1])
		s.cache[len(s.cache)-1] = nil
		s.cache = s.cache[:len(s.cache)-1]
	}
}

// trimCacheTo drops cached entries at index <= i, and keeps the cache within
// maxBytes by dropping its oldest entries.
func (s *storage) trimCacheTo(i uint64, maxBytes int64) {
	n := 0
	for n < len(s.cache) && (s.cache[n].GetIndex() <= i || s.cacheBytes > maxBytes) {
		s.cacheBytes -= entrySize(s.cache[n])
		s.cache[n] = nil
		n++
	}
	if n > 0 {
		s.cache = s.cache[n:]
		if len(s.cache) == 0 {
			s.cache = nil
		}
	}
}

// truncatePrefix removes entries up to index (inclusive) from the front of
// the log with one range deletion, keeping their last term for matching.
func (s *storage) truncatePrefix(b *pebble.Batch, index uint64) error {
	term, err := s.Term(index)
	if err != nil {
		return err
	}
	if err := b.DeleteRange(entryKey(s.group, s.truncIndex+1), entryKey(s.group, index+1), nil); err != nil {
		return err
	}
	v := binary.BigEndian.AppendUint64(nil, index)
	v = binary.BigEndian.AppendUint64(v, term)
	if err := b.Set(stateKey(s.group, suffixTrunc), v, nil); err != nil {
		return err
	}
	// Keep the configuration in force at the new start; drop older ones.
	if err := s.dropConfsBefore(b, index); err != nil {
		return err
	}
	s.truncIndex, s.truncTerm = index, term
	s.trimCacheTo(index, 1<<62)
	return nil
}

// dropConfsBefore deletes the configurations recorded before the one in
// force at index.
func (s *storage) dropConfsBefore(b *pebble.Batch, index uint64) error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: confAtKey(s.group, 0), UpperBound: confAtKey(s.group, index+1),
	})
	if err != nil {
		return err
	}
	var keep []byte
	if it.Last() {
		keep = append([]byte(nil), it.Key()...)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil || keep == nil {
		return err
	}
	return b.DeleteRange(confAtKey(s.group, 0), keep, nil)
}

// InitialState implements raft.Storage.
func (s *storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return proto.CloneOf(s.hard), proto.CloneOf(s.conf), nil
}

// FirstIndex implements raft.Storage.
func (s *storage) FirstIndex() (uint64, error) { return s.truncIndex + 1, nil }

// LastIndex implements raft.Storage.
func (s *storage) LastIndex() (uint64, error) { return s.last, nil }

// Term implements raft.Storage.
func (s *storage) Term(i uint64) (uint64, error) {
	switch {
	case i == s.truncIndex:
		return s.truncTerm, nil
	case i < s.truncIndex:
		return 0, raft.ErrCompacted
	case i > s.last:
		return 0, raft.ErrUnavailable
	case i == s.last:
		return s.lastTerm, nil
	case i >= s.cacheFirst():
		return s.cache[i-s.cacheFirst()].GetTerm(), nil
	}
	v, closer, err := s.db.Get(entryKey(s.group, i))
	if err != nil {
		return 0, fmt.Errorf("raftlog: group %d term %d: %w", s.group, i, err)
	}
	defer closer.Close()
	_, term, _, err := decodeEntryHeader(v)
	return term, err
}

// Entries implements raft.Storage.
func (s *storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	if lo <= s.truncIndex {
		return nil, raft.ErrCompacted
	}
	if hi > s.last+1 {
		return nil, fmt.Errorf("raftlog: group %d: entries [%d, %d) beyond last %d", s.group, lo, hi, s.last)
	}
	var out []*pb.Entry
	var size uint64
	full := func(e *pb.Entry) bool {
		size += uint64(len(e.GetData()))
		return len(out) > 0 && size > maxSize
	}
	if cf := s.cacheFirst(); lo < cf {
		it, err := s.db.NewIter(&pebble.IterOptions{
			LowerBound: entryKey(s.group, lo),
			UpperBound: entryKey(s.group, min(hi, cf)),
		})
		if err != nil {
			return nil, err
		}
		want := lo
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				return nil, err
			}
			e, err := decodeEntry(want, v)
			if err != nil || entryKeyMust(it.Key()) != want {
				it.Close()
				return nil, errors.Join(fmt.Errorf("raftlog: group %d: %w at index %d", s.group, ErrCorrupt, want), err)
			}
			if full(e) {
				return out, it.Close()
			}
			out = append(out, e)
			want++
		}
		if err := it.Close(); err != nil {
			return nil, err
		}
		if want != min(hi, cf) {
			return nil, raft.ErrUnavailable
		}
		lo = want
	}
	for i := lo; i < hi; i++ {
		e := s.cache[i-s.cacheFirst()]
		if full(e) {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

func entryKeyMust(k []byte) uint64 {
	i, _ := entryKeyIndex(k)
	return i
}

// Snapshot implements raft.Storage. Snapshots carry metadata only: the
// state machines rebuild from the log itself (see the package doc).
//
// Its configuration is the one in force at the snapshot's index plus, as
// learners, the members of the current one it lacks. Raft ignores a
// snapshot whose configuration does not name the recipient, so without them
// a replica added after the log's start (always, unless the log was
// truncated past the change) would be sent the same snapshot forever.
// Learners do not vote, so no quorum changes, and the configuration changes
// in the log after the snapshot add each of them as they did on the leader.
func (s *storage) Snapshot() (*pb.Snapshot, error) {
	if s.truncIndex == 0 {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	cs, err := s.confAt(s.truncIndex)
	if err != nil {
		return nil, err
	}
	addMissingAsLearners(cs, s.conf)
	var data []byte
	if s.snapData != nil {
		var err error
		if data, err = s.snapData(s.truncIndex); err != nil {
			return nil, fmt.Errorf("raftlog: group %d snapshot at %d: %w", s.group, s.truncIndex, err)
		}
	}
	return &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{
		Index:     proto.Uint64(s.truncIndex),
		Term:      proto.Uint64(s.truncTerm),
		ConfState: cs,
	}}, nil
}

// addMissingAsLearners adds to cs, as learners, the members of cur it does
// not name at all.
func addMissingAsLearners(cs, cur *pb.ConfState) {
	named := map[uint64]bool{}
	for _, set := range [][]uint64{cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext()} {
		for _, id := range set {
			named[id] = true
		}
	}
	for _, set := range [][]uint64{cur.GetVoters(), cur.GetVotersOutgoing(), cur.GetLearners(), cur.GetLearnersNext()} {
		for _, id := range set {
			if !named[id] {
				named[id] = true
				cs.Learners = append(cs.Learners, id)
			}
		}
	}
}

// installSnapshot makes the log empty, starting after the snapshot's index
// (a replica that fell behind the leader's first index jumps there).
func (s *storage) installSnapshot(b *pebble.Batch, snap *pb.Snapshot) error {
	md := snap.GetMetadata()
	idx, term := md.GetIndex(), md.GetTerm()
	if idx <= s.applied {
		return fmt.Errorf("raftlog: group %d: snapshot at %d not after applied index %d", s.group, idx, s.applied)
	}
	if err := b.DeleteRange(entryKey(s.group, 0), entryKey(s.group, ^uint64(0)), nil); err != nil {
		return err
	}
	v := binary.BigEndian.AppendUint64(nil, idx)
	v = binary.BigEndian.AppendUint64(v, term)
	if err := b.Set(stateKey(s.group, suffixTrunc), v, nil); err != nil {
		return err
	}
	if err := b.DeleteRange(confAtKey(s.group, 0), confAtKey(s.group, ^uint64(0)), nil); err != nil {
		return err
	}
	if err := s.setConf(b, idx, md.GetConfState()); err != nil {
		return err
	}
	s.truncIndex, s.truncTerm = idx, term
	s.last, s.lastTerm = idx, term
	s.cache, s.cacheBytes = nil, 0
	return s.setApplied(b, idx)
}
