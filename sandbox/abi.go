package sandbox

import (
	"encoding/binary"
	"fmt"
)

// This file is the host side of ABI v1's byte layout (sdk/guest/ABI.md,
// "Record encoding"): Batch encodes the input of
// a call, decodeOutputs checks and decodes what the guest wrote back. Both
// are pure and fuzzed; nothing here trusts a length it did not check.

// Header is one record header.
type Header struct {
	Key, Value []byte
}

// Batch is the encoded input of one guest call: records in ABI v1 layout.
// The zero value is empty and ready. A Batch is not safe for concurrent use.
type Batch struct {
	buf    []byte
	starts []int // where each record's u32 length sits in buf
	// headers is how many AddHeader calls the last record still expects.
	headers int
}

// Reset empties b, keeping its memory.
func (b *Batch) Reset() {
	b.buf, b.starts, b.headers = b.buf[:0], b.starts[:0], 0
}

// Len is the number of records in b.
func (b *Batch) Len() int { return len(b.starts) }

// Size is the encoded size of b in bytes.
func (b *Batch) Size() int { return len(b.buf) }

// EncodedSize is how many bytes a record adds to a batch.
func EncodedSize(key, value []byte, headers []Header) int {
	n := 4 + 8 + 8 + 4 + len(key) + 4 + len(value) + 4
	for _, h := range headers {
		n += 8 + len(h.Key) + len(h.Value)
	}
	return n
}

// HeaderSize is how many bytes one header adds to a record.
func HeaderSize(key, value []byte) int { return 8 + len(key) + len(value) }

// RecordOverhead is the size of a record with an empty key, value and no
// headers.
const RecordOverhead = 32

// Add appends a record; exactly headers calls of AddHeader must follow
// before the next Add or before the batch is used.
func (b *Batch) Add(offset uint64, appendTime int64, key, value []byte, headers int) {
	if b.headers != 0 {
		panic("sandbox: Batch.Add before the previous record's headers")
	}
	b.finish()
	b.starts = append(b.starts, len(b.buf))
	b.buf = binary.LittleEndian.AppendUint32(b.buf, 0) // patched by finish
	b.buf = binary.LittleEndian.AppendUint64(b.buf, offset)
	b.buf = binary.LittleEndian.AppendUint64(b.buf, uint64(appendTime))
	b.buf = appendBytes(b.buf, key)
	b.buf = appendBytes(b.buf, value)
	b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(headers))
	b.headers = headers
}

// AddHeader appends a header to the last record.
func (b *Batch) AddHeader(key, value []byte) {
	if b.headers == 0 {
		panic("sandbox: Batch.AddHeader beyond the record's header count")
	}
	b.headers--
	b.buf = appendBytes(b.buf, key)
	b.buf = appendBytes(b.buf, value)
}

// finish patches the length of the last record.
func (b *Batch) finish() {
	if len(b.starts) == 0 {
		return
	}
	s := b.starts[len(b.starts)-1]
	binary.LittleEndian.PutUint32(b.buf[s:], uint32(len(b.buf)-s-4))
}

// span returns the bytes of records [i, j).
func (b *Batch) span(i, j int) []byte {
	if b.headers != 0 {
		panic("sandbox: Batch used before the last record's headers")
	}
	b.finish()
	end := len(b.buf)
	if j < len(b.starts) {
		end = b.starts[j]
	}
	return b.buf[b.starts[i]:end]
}

// offset is the offset of record i.
func (b *Batch) offset(i int) uint64 {
	return binary.LittleEndian.Uint64(b.buf[b.starts[i]+4:])
}

// recordSize is the encoded size of record i.
func (b *Batch) recordSize(i int) int { return len(b.span(i, i+1)) }

func appendBytes(dst, p []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(p)))
	return append(dst, p...)
}

// Output is one record to deliver, in input order.
type Output struct {
	// Index is the 0-based index of the input record this output stands
	// for: it carries that record's offset, message ID and idempotency key.
	Index int
	// Replaced reports a transform's replacement: Key, Value and Headers
	// are then the new contents (copied out of guest memory, owned by the
	// caller). Otherwise the input record is delivered unchanged and they
	// are nil.
	Replaced   bool
	Key, Value []byte
	Headers    []Header
}

// Output actions.
const (
	actionKeep    = 0
	actionReplace = 1
)

// decodeOutputs checks and decodes the n bytes of outputs the guest wrote
// for a call of count inputs, appending them to dst. Replacement bytes are
// copied, so the result does not alias out. Every violation is a
// KindOutput or KindLimit error naming the byte position.
func decodeOutputs(dst []Output, out []byte, count, maxPerInput int) ([]Output, error) {
	d := outDecoder{b: out}
	// First pass: validate, and measure what must be copied.
	last, run, replaced, headers := -1, 0, false, 0
	for d.pos < len(d.b) {
		start := d.pos
		idx, ok1 := d.u32()
		act, ok2 := d.u8()
		if !ok1 || !ok2 {
			return dst, outErr(start, "truncated output header")
		}
		if int64(idx) >= int64(count) {
			return dst, outErr(start, "input_index %d out of range (the call had %d records)", idx, count)
		}
		i := int(idx)
		switch {
		case i < last:
			return dst, outErr(start, "input_index %d after %d: outputs must keep input order", i, last)
		case i == last:
			run++
			if run > maxPerInput {
				return dst, &Error{Kind: KindLimit, Reason: fmt.Sprintf("more than %d outputs for input %d", maxPerInput, i)}
			}
		default:
			last, run = i, 1
		}
		switch act {
		case actionKeep:
		case actionReplace:
			replaced = true
			if !d.skipPair() {
				return dst, outErr(start, "replacement key or value runs past the output")
			}
			nh, ok := d.u32()
			if !ok {
				return dst, outErr(start, "truncated header count")
			}
			for h := uint32(0); h < nh; h++ {
				if !d.skipPair() {
					return dst, outErr(start, "header %d runs past the output", h)
				}
			}
			headers += int(nh)
		default:
			return dst, outErr(start, "unknown action %d", act)
		}
	}
	// Second pass: decode. The input is known good now.
	var data []byte
	var hs []Header
	if replaced {
		data = append([]byte(nil), out...)
		hs = make([]Header, 0, headers)
	}
	d = outDecoder{b: data}
	if !replaced {
		d.b = out
	}
	for d.pos < len(d.b) {
		idx, _ := d.u32()
		act, _ := d.u8()
		o := Output{Index: int(idx)}
		if act == actionReplace {
			o.Replaced = true
			o.Key, o.Value = d.bytes(), d.bytes()
			nh, _ := d.u32()
			h0 := len(hs)
			for range nh {
				hs = append(hs, Header{Key: d.bytes(), Value: d.bytes()})
			}
			if nh > 0 {
				o.Headers = hs[h0:len(hs):len(hs)]
			}
		}
		dst = append(dst, o)
	}
	return dst, nil
}

func outErr(pos int, format string, args ...any) *Error {
	return &Error{Kind: KindOutput, Reason: fmt.Sprintf("at output byte %d: ", pos) + fmt.Sprintf(format, args...)}
}

type outDecoder struct {
	b   []byte
	pos int
}

func (d *outDecoder) u32() (uint32, bool) {
	if len(d.b)-d.pos < 4 {
		return 0, false
	}
	v := binary.LittleEndian.Uint32(d.b[d.pos:])
	d.pos += 4
	return v, true
}

func (d *outDecoder) u8() (byte, bool) {
	if d.pos >= len(d.b) {
		return 0, false
	}
	d.pos++
	return d.b[d.pos-1], true
}

func (d *outDecoder) skipBytes() bool {
	n, ok := d.u32()
	if !ok || int64(n) > int64(len(d.b)-d.pos) {
		return false
	}
	d.pos += int(n)
	return true
}

// bytes reads a length-prefixed field already validated by skipBytes.
// skipPair skips two length-prefixed fields (key and value).
func (d *outDecoder) skipPair() bool {
	if !d.skipBytes() {
		return false
	}
	return d.skipBytes()
}

func (d *outDecoder) bytes() []byte {
	n, _ := d.u32()
	p := d.b[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	return p
}
