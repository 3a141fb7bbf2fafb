package filter

import "iter"

// Record is one record as the host passes it to a filter or transform.
//
// In a record handed to a Filter or Transform function, Key, Value and the
// bytes behind Headers alias the input buffer: they are valid only until
// the function returns, and must not be modified (copy what you keep, and
// build changed bytes in a buffer of your own). Their capacity is their
// length, so appending to them copies instead of overwriting the next
// field.
type Record struct {
	// Offset is the record's offset in its partition. A transform's
	// returned Offset is ignored: the host attaches the input's.
	Offset uint64
	// Time is the record's append time in Unix nanoseconds. A transform's
	// returned Time is ignored, as Offset.
	Time int64
	// Key and Value are the record's bytes; nil and empty are the same.
	Key, Value []byte
	// Headers are the record's headers, in stored order.
	Headers Headers
}

// Header is one header, for NewHeaders.
type Header struct {
	Key, Value []byte
}

// Headers is a read-only view of a record's headers in their wire encoding
// (per header: u32 key length, key, u32 value length, value). Reading it
// allocates nothing. The zero Headers has no headers. Headers are values:
// copying one copies the view, not the bytes.
type Headers struct {
	// Invariant: enc holds exactly n well-formed headers, so the readers
	// below never fail; the decoder checks this before building a
	// Headers, NewHeaders by construction.
	enc []byte
	n   int
}

// NewHeaders builds Headers holding copies of hs, in order, for a
// transform's output or a test's input. It allocates one buffer.
func NewHeaders(hs ...Header) Headers {
	size := 0
	for _, h := range hs {
		size += 8 + len(h.Key) + len(h.Value)
	}
	enc := make([]byte, 0, size)
	for _, h := range hs {
		enc = appendBytes(enc, h.Key)
		enc = appendBytes(enc, h.Value)
	}
	return Headers{enc: enc, n: len(hs)}
}

// Len is the number of headers.
func (h Headers) Len() int { return h.n }

// At returns the key and value of header i, 0 <= i < Len(); it panics
// otherwise, as a slice index would. It walks the headers before i, so
// loop with All rather than At.
func (h Headers) At(i int) (key, value []byte) {
	if i < 0 || i >= h.n {
		panic("filter: header index out of range")
	}
	p := 0
	for ; i > 0; i-- {
		p = skipBytes(h.enc, skipBytes(h.enc, p))
	}
	key, p = readBytes(h.enc, p)
	value, _ = readBytes(h.enc, p)
	return key, value
}

// Get returns the value of the first header whose key is key.
func (h Headers) Get(key string) (value []byte, ok bool) {
	for k, v := range h.All() {
		if string(k) == key {
			return v, true
		}
	}
	return nil, false
}

// All yields each header's key and value in order.
func (h Headers) All() iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		p := 0
		for range h.n {
			var k, v []byte
			k, p = readBytes(h.enc, p)
			v, p = readBytes(h.enc, p)
			if !yield(k, v) {
				return
			}
		}
	}
}

// readBytes reads the length-prefixed bytes at enc[p:] of a well-formed
// encoding and returns them (capacity limited) and the offset after them.
func readBytes(enc []byte, p int) ([]byte, int) {
	n := int(le32(enc[p:]))
	p += 4
	return enc[p : p+n : p+n], p + n
}

func skipBytes(enc []byte, p int) int { return p + 4 + int(le32(enc[p:])) }
