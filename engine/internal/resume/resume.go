// Package resume encodes resume tokens: where a stream stood in each of its
// partitions, so that a new stream can continue exactly there.
//
// Layout before base64url (no padding):
//
//	version (1 byte, = 1) | uvarint topic id | uvarint partition count n |
//	n × (uvarint partition, uvarint next offset), partitions strictly increasing |
//	CRC-32C of the preceding bytes (4 bytes, little-endian)
//
// Version 1 carries positions only; later versions add what else a stream
// must carry over (a filter, a group epoch) behind the version byte.
package resume

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// ErrInvalid is returned for a string that is not a resume token.
var ErrInvalid = errors.New("resume: not a valid resume token")

// MaxPartitions bounds the partitions one token can carry.
const MaxPartitions = 1 << 16

const version = 1

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	enc        = base64.RawURLEncoding
)

// Position is where a stream stands in one partition: the next offset it
// will look at.
type Position struct {
	Partition uint32
	Next      uint64
}

// Token is a decoded resume token.
type Token struct {
	TopicID   uint64
	Positions []Position // sorted by partition, no duplicates
}

// String encodes t. Positions must be sorted by partition.
func (t Token) String() string {
	b := make([]byte, 0, 8+len(t.Positions)*6)
	b = append(b, version)
	b = binary.AppendUvarint(b, t.TopicID)
	b = binary.AppendUvarint(b, uint64(len(t.Positions)))
	for _, p := range t.Positions {
		b = binary.AppendUvarint(b, uint64(p.Partition))
		b = binary.AppendUvarint(b, p.Next)
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return enc.EncodeToString(b)
}

// Parse decodes s.
func Parse(s string) (Token, error) {
	if len(s) == 0 || len(s) > 4*MaxPartitions*20/3 {
		return Token{}, fmt.Errorf("%w: length %d", ErrInvalid, len(s))
	}
	raw, err := enc.DecodeString(s)
	if err != nil {
		return Token{}, fmt.Errorf("%w: not base64url", ErrInvalid)
	}
	if len(raw) < 7 || raw[0] != version {
		return Token{}, fmt.Errorf("%w: unknown version", ErrInvalid)
	}
	body, sum := raw[:len(raw)-4], binary.LittleEndian.Uint32(raw[len(raw)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return Token{}, fmt.Errorf("%w: checksum mismatch", ErrInvalid)
	}
	p := body[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	var t Token
	var ok bool
	if t.TopicID, ok = next(); !ok {
		return Token{}, fmt.Errorf("%w: truncated", ErrInvalid)
	}
	n, ok := next()
	if !ok || n > MaxPartitions || n > uint64(len(p))/2 {
		return Token{}, fmt.Errorf("%w: partition count", ErrInvalid)
	}
	t.Positions = make([]Position, 0, n)
	for i := range n {
		part, ok1 := next()
		off, ok2 := next()
		if !ok1 || !ok2 || part > 1<<32-1 {
			return Token{}, fmt.Errorf("%w: truncated", ErrInvalid)
		}
		if i > 0 && uint32(part) <= t.Positions[i-1].Partition {
			return Token{}, fmt.Errorf("%w: partitions out of order", ErrInvalid)
		}
		t.Positions = append(t.Positions, Position{Partition: uint32(part), Next: off})
	}
	if len(p) != 0 {
		return Token{}, fmt.Errorf("%w: trailing bytes", ErrInvalid)
	}
	if t.String() != s {
		return Token{}, fmt.Errorf("%w: not canonical", ErrInvalid)
	}
	return t, nil
}
