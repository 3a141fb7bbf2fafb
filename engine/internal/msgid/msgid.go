// Package msgid encodes message IDs: opaque, URL-safe strings that name one
// record by topic id, partition and offset.
//
// Layout before base64url (no padding):
//
//	version (1 byte, = 1) | uvarint topic id | uvarint partition | uvarint offset | CRC-32C of the preceding bytes (first 2 bytes, little-endian)
//
// The checksum makes garbage and typos fail to decode (InvalidArgument at
// the edge) instead of silently naming some other record. A message ID for
// topic 3, partition 1, offset 1,000,000 is 11 characters.
package msgid

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// ErrInvalid is returned for a string that is not a message ID.
var ErrInvalid = errors.New("msgid: not a valid message ID")

const version = 1

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	enc        = base64.RawURLEncoding
)

// ID names one record.
type ID struct {
	TopicID   uint64
	Partition uint32
	Offset    uint64
}

// String encodes id.
func (id ID) String() string {
	var buf [1 + 3*binary.MaxVarintLen64 + 2]byte
	return string(id.Append(buf[:0]))
}

// Append appends the encoded id to dst. It allocates nothing when dst has
// room: the raw id is built at the end of dst, encoded after itself, and
// the encoding moved down over it (a stack buffer would escape through the
// checksum call and cost an allocation per id).
func (id ID) Append(dst []byte) []byte {
	n0 := len(dst)
	dst = append(dst, version)
	dst = binary.AppendUvarint(dst, id.TopicID)
	dst = binary.AppendUvarint(dst, uint64(id.Partition))
	dst = binary.AppendUvarint(dst, id.Offset)
	sum := crc32.Checksum(dst[n0:], castagnoli)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(sum))
	raw := len(dst) - n0
	dst = enc.AppendEncode(dst, dst[n0:])
	n := copy(dst[n0:], dst[n0+raw:])
	return dst[:n0+n]
}

// Parse decodes s.
func Parse(s string) (ID, error) {
	if len(s) == 0 || len(s) > 64 {
		return ID{}, fmt.Errorf("%w: length %d", ErrInvalid, len(s))
	}
	raw, err := enc.DecodeString(s)
	if err != nil {
		return ID{}, fmt.Errorf("%w: not base64url", ErrInvalid)
	}
	if len(raw) < 6 || raw[0] != version {
		return ID{}, fmt.Errorf("%w: unknown version", ErrInvalid)
	}
	body, sum := raw[:len(raw)-2], binary.LittleEndian.Uint16(raw[len(raw)-2:])
	if uint16(crc32.Checksum(body, castagnoli)) != sum {
		return ID{}, fmt.Errorf("%w: checksum mismatch", ErrInvalid)
	}
	p := body[1:]
	var vals [3]uint64
	for i := range vals {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return ID{}, fmt.Errorf("%w: truncated", ErrInvalid)
		}
		vals[i], p = v, p[n:]
	}
	if len(p) != 0 || vals[1] > 1<<32-1 {
		return ID{}, fmt.Errorf("%w: malformed", ErrInvalid)
	}
	id := ID{TopicID: vals[0], Partition: uint32(vals[1]), Offset: vals[2]}
	if id.String() != s { // reject non-canonical encodings (padded varints)
		return ID{}, fmt.Errorf("%w: not canonical", ErrInvalid)
	}
	return id, nil
}
