package partition

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
)

// State is a partition's applied state. It is persisted in the same batch
// as the index rows and the raft applied index, so it always agrees with
// them after a crash.
type State struct {
	// LogStart is the first offset still stored on this node.
	// Invariant: LogStart <= Next.
	LogStart uint64
	// ReadStart is the first offset readers may read: LogStart, or lower
	// when older records are in tiered storage (tier.go). Invariant:
	// ReadStart <= LogStart. Bounds shows it as the log start.
	ReadStart uint64
	// Next is the offset the next applied record gets (the end offset).
	Next uint64
	// FirstTime and LastTime are the append times of the first stored and
	// the last applied batch; meaningful only when Next > LogStart.
	FirstTime, LastTime int64
	// Bytes counts stored batch bytes.
	Bytes uint64
	// Payload sums record.Record.PayloadSize over the stored records: what
	// a retention bytes limit counts. It is meaningful only if PayloadKnown:
	// a state written before it existed does not know it until the
	// partition is empty once (retention then walks the offset index).
	Payload      uint64
	PayloadKnown bool
	// LastIndex is the raft index of the last applied batch: readers of the
	// raft log stop there.
	LastIndex uint64
	// LastProposer is the proposer incarnation of the last applied batch,
	// and LastOther the raft index of the last applied batch of another
	// incarnation: what apply needs to know whether a batch's keys were
	// already checked against everything before it (dedupe.go).
	LastProposer, LastOther uint64
}

// Empty reports whether the partition holds no records.
func (s State) Empty() bool { return s.Next == s.LogStart }

// State rows are version 4; versions 3 (without ReadStart) and 2 (without
// Payload either) are still read.
const (
	stateVersion   = 4
	stateSize      = 1 + 10*8
	stateV3Size    = 1 + 9*8
	stateV2Size    = 1 + 8*8
	unknownPayload = ^uint64(0)
)

func (s State) encode() []byte {
	b := make([]byte, 1, stateSize)
	b[0] = stateVersion
	b = binary.BigEndian.AppendUint64(b, s.LogStart)
	b = binary.BigEndian.AppendUint64(b, s.Next)
	b = binary.BigEndian.AppendUint64(b, uint64(s.FirstTime))
	b = binary.BigEndian.AppendUint64(b, uint64(s.LastTime))
	b = binary.BigEndian.AppendUint64(b, s.Bytes)
	b = binary.BigEndian.AppendUint64(b, s.LastIndex)
	b = binary.BigEndian.AppendUint64(b, s.LastProposer)
	b = binary.BigEndian.AppendUint64(b, s.LastOther)
	payload := s.Payload
	if !s.PayloadKnown {
		payload = unknownPayload
	}
	b = binary.BigEndian.AppendUint64(b, payload)
	return binary.BigEndian.AppendUint64(b, s.ReadStart)
}

func decodeState(b []byte) (State, error) {
	if !(len(b) == stateSize && b[0] == stateVersion || len(b) == stateV3Size && b[0] == 3 || len(b) == stateV2Size && b[0] == 2) {
		return State{}, fmt.Errorf("%w: partition state of %d bytes, version %v", ErrCorrupt, len(b), b[:min(1, len(b))])
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[1+8*i:]) }
	s := State{LogStart: u(0), Next: u(1), FirstTime: int64(u(2)), LastTime: int64(u(3)), Bytes: u(4), LastIndex: u(5),
		LastProposer: u(6), LastOther: u(7)}
	if len(b) >= stateV3Size && u(8) != unknownPayload {
		s.Payload, s.PayloadKnown = u(8), true
	}
	s.ReadStart = s.LogStart
	if len(b) == stateSize {
		s.ReadStart = u(9)
	}
	if s.LogStart > s.Next || s.ReadStart > s.LogStart {
		return State{}, fmt.Errorf("%w: read start %d, log start %d, end %d out of order", ErrCorrupt, s.ReadStart, s.LogStart, s.Next)
	}
	return s, nil
}

// indexRow is the value of an offset index row: where a batch lives in the
// raft log, its effective append time and its offset span.
type indexRow struct {
	raftIndex  uint64
	appendTime int64
	span       uint32
	size       uint32 // bytes of the batch now (compaction and retention shrink it)
	// payload is the record-size-limit measure (record.Record.PayloadSize)
	// summed over the records the batch holds now: what the bytes limit
	// counts. Rows written before it existed lack it (hasPayload false);
	// it is then computed from the batch when needed.
	payload    uint32
	hasPayload bool
}

// Offset index rows are 28 bytes; rows of 24 bytes (without the payload)
// are still read.
const (
	indexRowSize       = 28
	legacyIndexRowSize = 24
)

func (r indexRow) encode() []byte {
	b := make([]byte, 0, indexRowSize)
	b = binary.BigEndian.AppendUint64(b, r.raftIndex)
	b = binary.BigEndian.AppendUint64(b, uint64(r.appendTime))
	b = binary.BigEndian.AppendUint32(b, r.span)
	b = binary.BigEndian.AppendUint32(b, r.size)
	return binary.BigEndian.AppendUint32(b, r.payload)
}

func decodeIndexRow(b []byte) (indexRow, error) {
	if len(b) != indexRowSize && len(b) != legacyIndexRowSize {
		return indexRow{}, fmt.Errorf("%w: offset index row of %d bytes", ErrCorrupt, len(b))
	}
	r := indexRow{
		raftIndex:  binary.BigEndian.Uint64(b),
		appendTime: int64(binary.BigEndian.Uint64(b[8:])),
		span:       binary.BigEndian.Uint32(b[16:]),
		size:       binary.BigEndian.Uint32(b[20:]),
	}
	if len(b) == indexRowSize {
		r.payload, r.hasPayload = binary.BigEndian.Uint32(b[24:]), true
	}
	if r.span == 0 {
		return indexRow{}, fmt.Errorf("%w: offset index row with an empty span", ErrCorrupt)
	}
	return r, nil
}

// verify checks the applied state against the offset index at open, so a
// damaged store is refused instead of serving wrong history: the first row
// must hold the log start (retention may have trimmed its head, so the log
// start can be inside it), the last must end at the next offset and point
// at the last applied batch.
func (p *Partition) verify() error {
	lo, hi := keys.GroupSpan(keys.Offset, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	st := p.st
	fail := func(format string, args ...any) error {
		return fmt.Errorf("partition %d (group %d): %w: %s", p.cfg.Index, p.cfg.Group, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if !it.First() {
		if err := it.Error(); err != nil {
			return err
		}
		if !st.Empty() {
			return fail("state holds offsets [%d, %d) but the offset index is empty", st.LogStart, st.Next)
		}
		return nil
	}
	first, _ := keys.OffsetKeyBase(it.Key())
	if st.Empty() {
		return fail("state is empty at %d but the offset index has a batch at %d", st.Next, first)
	}
	firstRow, err := decodeIndexRow(it.Value())
	if err != nil {
		return err
	}
	if first > st.LogStart || st.LogStart >= first+uint64(firstRow.span) {
		return fail("first batch [%d, %d), log start %d", first, first+uint64(firstRow.span), st.LogStart)
	}
	if !it.Last() {
		return it.Error()
	}
	last, _ := keys.OffsetKeyBase(it.Key())
	row, err := decodeIndexRow(it.Value())
	if err != nil {
		return err
	}
	if last+uint64(row.span) != st.Next || row.raftIndex != st.LastIndex {
		return fail("last batch [%d, %d) in entry %d, but the state ends at %d after entry %d",
			last, last+uint64(row.span), row.raftIndex, st.Next, st.LastIndex)
	}
	return nil
}
