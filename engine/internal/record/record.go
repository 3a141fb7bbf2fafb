// Package record is the record-batch codec: the unit Rewind stores,
// replicates, caches and delivers. One raft entry carries one batch.
//
// A batch is a fixed header followed by the records:
//
//	off  size  field
//	  0     1  version (1)
//	  1     1  attributes (0; reserved for compression)
//	  2     4  CRC-32C (Castagnoli) of bytes [6, end), little-endian
//	  6     8  proposal id, little-endian (who proposed it; not part of the data model)
//	 14     8  append time, Unix nanoseconds, little-endian (the leader's clock)
//	 22     4  record count, little-endian
//	 26     4  offset span, little-endian (last offset delta + 1)
//	 30        records
//
// and each record is
//
//	uvarint  length of the rest of the record
//	uvarint  offset delta (strictly increasing within a batch; dense when written)
//	varint   event time (Unix nanoseconds; 0 = none)
//	uvarint  key length, key
//	uvarint  value length, value
//	uvarint  idempotency key length, idempotency key
//	uvarint  header count, then per header: uvarint key length, key, uvarint value length, value
//
// The base offset is not stored: offsets are assigned when the batch is
// applied (base = the partition's next offset), so every replica agrees.
// The decoder never panics on any input: every length is checked.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the size of the fixed batch header.
const HeaderSize = 30

// Version is the batch format written by this code.
const Version = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned for bytes that are not a valid batch.
var ErrCorrupt = errors.New("record: corrupt batch")

// Header is one record header. Slices alias the batch.
type Header struct {
	Key, Value []byte
}

// Record is one decoded record. Its slices alias the batch bytes.
type Record struct {
	OffsetDelta    uint32
	EventTime      int64
	Key            []byte
	Value          []byte
	IdempotencyKey []byte
	Headers        []Header
}

// EncodedSize is the size of r's encoding inside a batch, close enough for
// size limits (exact for the payload, within a few bytes for varints).
func (r *Record) EncodedSize() int {
	n := len(r.Key) + len(r.Value) + len(r.IdempotencyKey) + 16
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 4
	}
	return n
}

// PayloadSize is the number of bytes of r its publisher chose: key, value,
// idempotency key, and every header's key and value. A topic's record size
// limit counts these; the framing (a few bytes of lengths per field, see
// EncodedSize) is the server's.
func (r *Record) PayloadSize() int {
	n := len(r.Key) + len(r.Value) + len(r.IdempotencyKey)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// Builder encodes a batch. The zero value is not usable; call Reset.
type Builder struct {
	buf   []byte
	count uint32
	delta uint32
}

// Reset starts a new batch with the given proposal id and append time,
// reusing the builder's buffer.
func (b *Builder) Reset(proposalID uint64, appendTime int64) {
	b.buf = append(b.buf[:0], make([]byte, HeaderSize)...)
	b.buf[0] = Version
	binary.LittleEndian.PutUint64(b.buf[6:], proposalID)
	binary.LittleEndian.PutUint64(b.buf[14:], uint64(appendTime))
	b.count, b.delta = 0, 0
}

// Len returns the encoded size so far.
func (b *Builder) Len() int { return len(b.buf) }

// Count returns the number of records added.
func (b *Builder) Count() int { return int(b.count) }

// Add appends r with the next offset delta (r.OffsetDelta is ignored).
func (b *Builder) Add(r *Record) { b.add(r, b.delta) }

// Compact returns a copy of batch bt without the records drop selects
// (by offset delta), keeping everything else: the proposal id, the append
// time, the offset span and the deltas of the records kept. This is how key
// compaction removes records without changing any offset. The result may
// hold no record at all (a batch whose offsets all disappeared).
func Compact(bt Batch, drop func(delta uint32) bool) ([]byte, error) {
	var b Builder
	b.Reset(bt.ProposalID(), bt.AppendTime())
	it := bt.Iter()
	var r Record
	for it.Next(&r) {
		if !drop(r.OffsetDelta) {
			b.add(&r, r.OffsetDelta)
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	b.delta = bt.Span()
	return b.Finish(), nil
}

// Window returns a batch of bt's records from offset delta from on that
// keep selects, shifted down by from: what a reader of one key (or tag)
// delivers from a batch it shares with other keys. The result spans
// Span()-from offsets, so a reader that moves past it lands where it would
// have after bt; it keeps the proposal id and append time.
func Window(bt Batch, from uint32, keep func(r *Record) bool) ([]byte, error) {
	if from >= bt.Span() {
		return nil, fmt.Errorf("record: window from delta %d of a batch spanning %d", from, bt.Span())
	}
	var b Builder
	b.Reset(bt.ProposalID(), bt.AppendTime())
	it := bt.Iter()
	it.SeekDelta(from)
	var r Record
	for it.Next(&r) {
		if r.OffsetDelta >= from && keep(&r) {
			b.add(&r, r.OffsetDelta-from)
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	b.delta = bt.Span() - from
	return b.Finish(), nil
}

// Gap returns a batch with no record spanning span offsets: what a reader
// of one key delivers for a run of offsets holding none of its records.
func Gap(proposalID uint64, appendTime int64, span uint32) []byte {
	var b Builder
	b.Reset(proposalID, appendTime)
	b.delta = span
	return b.Finish()
}

func (b *Builder) add(r *Record, delta uint32) {
	b.delta = delta
	var scratch [binary.MaxVarintLen64]byte
	body := 0
	uv := func(v uint64) int { return binary.PutUvarint(scratch[:], v) }
	body += uv(uint64(b.delta))
	body += binary.PutVarint(scratch[:], r.EventTime)
	body += uv(uint64(len(r.Key))) + len(r.Key)
	body += uv(uint64(len(r.Value))) + len(r.Value)
	body += uv(uint64(len(r.IdempotencyKey))) + len(r.IdempotencyKey)
	body += uv(uint64(len(r.Headers)))
	for _, h := range r.Headers {
		body += uv(uint64(len(h.Key))) + len(h.Key) + uv(uint64(len(h.Value))) + len(h.Value)
	}
	b.buf = binary.AppendUvarint(b.buf, uint64(body))
	b.buf = binary.AppendUvarint(b.buf, uint64(b.delta))
	b.buf = binary.AppendVarint(b.buf, r.EventTime)
	b.buf = appendBytes(b.buf, r.Key)
	b.buf = appendBytes(b.buf, r.Value)
	b.buf = appendBytes(b.buf, r.IdempotencyKey)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		b.buf = appendBytes(b.buf, h.Key)
		b.buf = appendBytes(b.buf, h.Value)
	}
	b.count++
	b.delta++
}

func appendBytes(buf, v []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(v)))
	return append(buf, v...)
}

// Finish completes the header and returns the batch. The returned slice is
// the builder's buffer: it stays valid until the next Reset only if the
// caller copies it; pass it on and allocate a new Builder otherwise.
func (b *Builder) Finish() []byte {
	binary.LittleEndian.PutUint32(b.buf[22:], b.count)
	binary.LittleEndian.PutUint32(b.buf[26:], b.delta)
	binary.LittleEndian.PutUint32(b.buf[2:], crc32.Checksum(b.buf[6:], castagnoli))
	out := b.buf
	b.buf = nil
	return out
}

// Batch is a parsed view of encoded batch bytes. It does not copy them.
type Batch struct {
	data []byte
}

// Parse checks the header and the checksum of data and returns a view of it.
// It does not decode the records; Iter does, lazily.
func Parse(data []byte) (Batch, error) {
	if len(data) < HeaderSize {
		return Batch{}, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorrupt, len(data))
	}
	if data[0] != Version {
		return Batch{}, fmt.Errorf("%w: unknown version %d", ErrCorrupt, data[0])
	}
	if data[1] != 0 {
		return Batch{}, fmt.Errorf("%w: unknown attributes %#x", ErrCorrupt, data[1])
	}
	if want, got := binary.LittleEndian.Uint32(data[2:]), crc32.Checksum(data[6:], castagnoli); want != got {
		return Batch{}, fmt.Errorf("%w: checksum %#08x, want %#08x", ErrCorrupt, got, want)
	}
	b := Batch{data: data}
	if b.Count() > b.Span() || (b.Count() > 0 && b.Span() == 0) {
		return Batch{}, fmt.Errorf("%w: %d records over a span of %d", ErrCorrupt, b.Count(), b.Span())
	}
	return b, nil
}

// Bytes returns the encoded batch.
func (b Batch) Bytes() []byte { return b.data }

// ProposalID returns the id the proposer gave the batch.
func (b Batch) ProposalID() uint64 { return binary.LittleEndian.Uint64(b.data[6:]) }

// AppendTime returns the leader's clock when the batch was proposed.
func (b Batch) AppendTime() int64 { return int64(binary.LittleEndian.Uint64(b.data[14:])) }

// Count returns the number of records.
func (b Batch) Count() uint32 { return binary.LittleEndian.Uint32(b.data[22:]) }

// Span returns how many offsets the batch covers.
func (b Batch) Span() uint32 { return binary.LittleEndian.Uint32(b.data[26:]) }

// Validate decodes every record once, checking the structure the iterator
// relies on (lengths, strictly increasing deltas below the span, the record
// count).
func (b Batch) Validate() error {
	_, err := b.ValidatePayload()
	return err
}

// ValidatePayload is Validate that also returns the sum of the records'
// PayloadSize: what a retention bytes limit counts.
func (b Batch) ValidatePayload() (uint64, error) {
	it := b.Iter()
	var r Record
	n := uint32(0)
	var payload uint64
	for it.Next(&r) {
		n++
		payload += uint64(r.PayloadSize())
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	if n != b.Count() {
		return 0, fmt.Errorf("%w: header says %d records, body has %d", ErrCorrupt, b.Count(), n)
	}
	return payload, nil
}

// Iter returns an iterator over the records.
func (b Batch) Iter() Iter {
	return Iter{rest: b.data[HeaderSize:], span: b.Span(), first: true}
}

// Iter decodes records one at a time.
type Iter struct {
	rest  []byte
	span  uint32
	last  uint32
	first bool
	err   error
}

// Next decodes the next record into r (reusing r.Headers' storage) and
// reports whether there was one. After false, Err says why.
func (it *Iter) Next(r *Record) bool {
	if it.err != nil || len(it.rest) == 0 {
		return false
	}
	n, k := binary.Uvarint(it.rest)
	if k <= 0 || n > uint64(len(it.rest)-k) {
		it.err = fmt.Errorf("%w: record length", ErrCorrupt)
		return false
	}
	body := it.rest[k : k+int(n)]
	it.rest = it.rest[k+int(n):]
	if err := decodeRecord(body, r); err != nil {
		it.err = err
		return false
	}
	if r.OffsetDelta >= it.span || (!it.first && r.OffsetDelta <= it.last) {
		it.err = fmt.Errorf("%w: offset delta %d out of order or past span %d", ErrCorrupt, r.OffsetDelta, it.span)
		return false
	}
	it.first, it.last = false, r.OffsetDelta
	return true
}

// Err returns the decoding error that stopped the iterator, if any.
func (it *Iter) Err() error { return it.err }

// SeekDelta moves the iterator to the first record whose offset delta is
// at least delta, reading only each skipped record's length and delta (not
// decoding it): a reader that wants one record of a large batch (an
// entity's event) skips the rest cheaply. The next Next returns that
// record.
func (it *Iter) SeekDelta(delta uint32) {
	for it.err == nil && len(it.rest) > 0 {
		n, k := binary.Uvarint(it.rest)
		if k <= 0 || n > uint64(len(it.rest)-k) {
			it.err = fmt.Errorf("%w: record length", ErrCorrupt)
			return
		}
		d, j := binary.Uvarint(it.rest[k : k+int(n)])
		if j <= 0 || d > 1<<32-1 {
			it.err = fmt.Errorf("%w: offset delta", ErrCorrupt)
			return
		}
		if uint32(d) >= delta {
			return
		}
		if uint32(d) >= it.span || (!it.first && uint32(d) <= it.last) {
			it.err = fmt.Errorf("%w: offset delta %d out of order or past span %d", ErrCorrupt, d, it.span)
			return
		}
		it.first, it.last = false, uint32(d)
		it.rest = it.rest[k+int(n):]
	}
}

func decodeRecord(p []byte, r *Record) error {
	d := decoder{p: p}
	delta := d.uvarint()
	if delta > 1<<32-1 {
		return fmt.Errorf("%w: offset delta %d", ErrCorrupt, delta)
	}
	r.OffsetDelta = uint32(delta)
	r.EventTime = d.varint()
	r.Key = d.bytes()
	r.Value = d.bytes()
	r.IdempotencyKey = d.bytes()
	nh := d.uvarint()
	if nh > uint64(len(d.p)) { // every header takes at least 2 bytes
		return fmt.Errorf("%w: %d headers", ErrCorrupt, nh)
	}
	r.Headers = r.Headers[:0]
	for range nh {
		k := d.bytes()
		v := d.bytes()
		r.Headers = append(r.Headers, Header{Key: k, Value: v})
	}
	if d.err != nil {
		return d.err
	}
	if len(d.p) != 0 {
		return fmt.Errorf("%w: %d trailing bytes in record", ErrCorrupt, len(d.p))
	}
	return nil
}

type decoder struct {
	p   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.err = fmt.Errorf("%w: truncated varint", ErrCorrupt)
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.p)
	if n <= 0 {
		d.err = fmt.Errorf("%w: truncated varint", ErrCorrupt)
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.err = fmt.Errorf("%w: length %d past the end", ErrCorrupt, n)
		return nil
	}
	v := d.p[:n:n]
	d.p = d.p[n:]
	if n == 0 {
		return nil
	}
	return v
}
