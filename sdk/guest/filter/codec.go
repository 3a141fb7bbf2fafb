package filter

import "unsafe"

// The ABI v1 byte layouts (sdk/guest/ABI.md), little-endian:
//
//	input, per record: u32 record_len, then record_len bytes:
//	  u64 offset, i64 append_time, u32 key_len, key, u32 value_len, value,
//	  u32 header_count, per header: u32 key_len, key, u32 value_len, value
//	output, per output: u32 input_index, u8 action (0 keep, 1 replace),
//	  and for action 1: u32 key_len, key, u32 value_len, value,
//	  u32 header_count, headers (as in the input)
//
// The decoders check every length against the bytes that are there and
// report malformed input instead of panicking: the host is trusted, but a
// bug on either side must fail the call, not crash the module.

const (
	actionKeep    = 0
	actionReplace = 1

	recordFixed = 8 + 8 + 4 + 4 + 4 // offset, time and the three counts
	outputFixed = 4 + 1             // input_index, action
)

func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func put32(b []byte, v uint32) {
	_ = b[3]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func append32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func append64(b []byte, v uint64) []byte {
	return append32(append32(b, uint32(v)), uint32(v>>32))
}

func appendBytes(b, s []byte) []byte {
	return append(append32(b, uint32(len(s))), s...)
}

// nextRecord decodes the record framed at in[p:] and returns it with the
// offset of the next one. It is one function on purpose: in WebAssembly
// every Go call costs tens of instructions, and this runs once per record
// (a record without headers calls nothing).
func nextRecord(in []byte, p int) (r Record, next int, ok bool) {
	if len(in)-p < 4+recordFixed {
		return r, p, false
	}
	n := int(le32(in[p:]))
	start := p + 4
	if n < recordFixed || n > len(in)-start {
		return r, p, false
	}
	next = start + n
	b := in[start:next:next]
	r.Offset = uint64(le32(b)) | uint64(le32(b[4:]))<<32
	r.Time = int64(uint64(le32(b[8:])) | uint64(le32(b[12:]))<<32)
	q := 16
	kl := int(le32(b[q:]))
	q += 4
	if kl > len(b)-q-8 { // the key, then value_len and header_count
		return r, next, false
	}
	r.Key = b[q : q+kl : q+kl]
	q += kl
	vl := int(le32(b[q:]))
	q += 4
	if vl > len(b)-q-4 { // the value, then header_count
		return r, next, false
	}
	r.Value = b[q : q+vl : q+vl]
	q += vl
	if le32(b[q:]) == 0 {
		return r, next, q+4 == len(b)
	}
	r.Headers, q, ok = cutHeaders(b, q)
	return r, next, ok && q == len(b)
}

// cut reads length-prefixed bytes at b[p:].
func cut(b []byte, p int) ([]byte, int, bool) {
	if len(b)-p < 4 {
		return nil, p, false
	}
	n := le32(b[p:])
	p += 4
	if uint64(n) > uint64(len(b)-p) {
		return nil, p, false
	}
	end := p + int(n)
	return b[p:end:end], end, true
}

// cutHeaders reads a header count and that many headers at b[p:].
func cutHeaders(b []byte, p int) (Headers, int, bool) {
	if len(b)-p < 4 {
		return Headers{}, p, false
	}
	count := le32(b[p:])
	p += 4
	if uint64(count) > uint64(len(b)-p)/8 { // each header takes >= 8 bytes
		return Headers{}, p, false
	}
	start := p
	for range count {
		var ok bool
		if _, p, ok = cut(b, p); !ok {
			return Headers{}, p, false
		}
		if _, p, ok = cut(b, p); !ok {
			return Headers{}, p, false
		}
	}
	return Headers{enc: b[start:p:p], n: int(count)}, p, true
}

// output writes outputs into the guest's output buffer.
type output struct {
	b []byte
	n int // bytes written; Invariant: n <= len(b)
}

// keep writes (i, 0); false if it does not fit.
func (o *output) keep(i int) bool {
	if len(o.b)-o.n < outputFixed {
		return false
	}
	w := o.b[o.n:]
	put32(w, uint32(i))
	w[4] = actionKeep
	o.n += outputFixed
	return true
}

// replace writes (i, 1, r); false if it does not fit.
func (o *output) replace(i int, r Record) bool {
	need := outputFixed + 4 + len(r.Key) + 4 + len(r.Value) + 4 + len(r.Headers.enc)
	if need > len(o.b)-o.n {
		return false
	}
	w := o.b[o.n : o.n+need]
	put32(w, uint32(i))
	w[4] = actionReplace
	p := outputFixed
	put32(w[p:], uint32(len(r.Key)))
	p += 4 + copy(w[p+4:], r.Key)
	put32(w[p:], uint32(len(r.Value)))
	p += 4 + copy(w[p+4:], r.Value)
	put32(w[p:], uint32(r.Headers.n))
	copy(w[p+4:], r.Headers.enc)
	o.n += need
	return true
}

// unchanged reports whether a transform returned its input's own bytes,
// which is sent as action 0 rather than copied.
func unchanged(in, out Record) bool {
	return same(in.Key, out.Key) && same(in.Value, out.Value) &&
		same(in.Headers.enc, out.Headers.enc) && in.Headers.n == out.Headers.n
}

func same(a, b []byte) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// appendRecord appends r framed as the host encodes it (for Harness).
func appendRecord(b []byte, r Record) []byte {
	b = append32(b, uint32(encodedSize(r)-4))
	b = append64(b, r.Offset)
	b = append64(b, uint64(r.Time))
	b = appendBytes(b, r.Key)
	b = appendBytes(b, r.Value)
	b = append32(b, uint32(r.Headers.n))
	return append(b, r.Headers.enc...)
}

// encodedSize is the size of r framed in the input, record_len included.
func encodedSize(r Record) int {
	return 4 + recordFixed + len(r.Key) + len(r.Value) + len(r.Headers.enc)
}
