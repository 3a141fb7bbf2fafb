package tier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/rewind-io/rewind/engine/internal/record"
)

const (
	magic      = "RWSEG\x00\x00\x01"
	entrySize  = 36
	footerSize = 48
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned for an object that is not a valid segment.
var ErrCorrupt = errors.New("tier: corrupt segment")

// Batch is one batch of a segment: its offsets, its append time as the
// partition applied it (which may be later than the time in the batch's own
// header), and its bytes in the record format.
type Batch struct {
	Base       uint64
	Span       uint32
	AppendTime int64
	Data       []byte
}

// End is the offset after the batch.
func (b Batch) End() uint64 { return b.Base + uint64(b.Span) }

// Entry is a segment's index entry for one batch.
type Entry struct {
	Base       uint64
	Span       uint32
	AppendTime int64
	Pos        uint64
	Len        uint32
	CRC        uint32
}

// End is the offset after the entry's batch.
func (e Entry) End() uint64 { return e.Base + uint64(e.Span) }

// Footer describes a whole segment.
type Footer struct {
	IndexPos            uint64
	Count               uint32
	Base, End           uint64
	FirstTime, LastTime int64
}

// Build encodes batches, which must be contiguous (each starts where the
// previous ended), as a segment object.
func Build(batches []Batch) ([]byte, Footer, error) {
	if len(batches) == 0 {
		return nil, Footer{}, errors.New("tier: a segment needs at least one batch")
	}
	size := len(magic) + footerSize + entrySize*len(batches)
	for _, b := range batches {
		size += len(b.Data)
	}
	out := make([]byte, 0, size)
	out = append(out, magic...)
	entries := make([]Entry, len(batches))
	for i, b := range batches {
		if b.Span == 0 {
			return nil, Footer{}, fmt.Errorf("tier: batch at %d has no span", b.Base)
		}
		if i > 0 && b.Base != batches[i-1].End() {
			return nil, Footer{}, fmt.Errorf("tier: batch at %d does not follow the one ending at %d", b.Base, batches[i-1].End())
		}
		if i > 0 && b.AppendTime < batches[i-1].AppendTime {
			return nil, Footer{}, fmt.Errorf("tier: batch at %d goes back in time", b.Base)
		}
		if uint64(len(b.Data)) > 1<<32-1 {
			return nil, Footer{}, fmt.Errorf("tier: batch at %d is %d bytes", b.Base, len(b.Data))
		}
		entries[i] = Entry{Base: b.Base, Span: b.Span, AppendTime: b.AppendTime, Pos: uint64(len(out)),
			Len: uint32(len(b.Data)), CRC: crc32.Checksum(b.Data, castagnoli)}
		out = append(out, b.Data...)
	}
	f := Footer{IndexPos: uint64(len(out)), Count: uint32(len(entries)), Base: batches[0].Base,
		End: batches[len(batches)-1].End(), FirstTime: batches[0].AppendTime, LastTime: batches[len(batches)-1].AppendTime}
	for _, e := range entries {
		out = appendEntry(out, e)
	}
	out = appendFooter(out, f)
	return out, f, nil
}

func appendEntry(b []byte, e Entry) []byte {
	b = binary.BigEndian.AppendUint64(b, e.Base)
	b = binary.BigEndian.AppendUint32(b, e.Span)
	b = binary.BigEndian.AppendUint64(b, uint64(e.AppendTime))
	b = binary.BigEndian.AppendUint64(b, e.Pos)
	b = binary.BigEndian.AppendUint32(b, e.Len)
	return binary.BigEndian.AppendUint32(b, e.CRC)
}

// appendFooter appends f to a buffer that ends with the index, and the CRC
// of the index and the footer.
func appendFooter(b []byte, f Footer) []byte {
	idx := int(f.IndexPos)
	b = binary.BigEndian.AppendUint64(b, f.IndexPos)
	b = binary.BigEndian.AppendUint32(b, f.Count)
	b = binary.BigEndian.AppendUint64(b, f.Base)
	b = binary.BigEndian.AppendUint64(b, f.End)
	b = binary.BigEndian.AppendUint64(b, uint64(f.FirstTime))
	b = binary.BigEndian.AppendUint64(b, uint64(f.LastTime))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[idx:], castagnoli))
}

// ParseFooter decodes the last footerSize bytes of an object of size bytes.
// The footer's own fields are checked for consistency with the size; its
// CRC covers the index too, so ParseIndex checks it.
func ParseFooter(tail []byte, size int64) (Footer, error) {
	if len(tail) != footerSize || size < int64(len(magic)+footerSize) {
		return Footer{}, fmt.Errorf("%w: %d bytes is too short for a segment", ErrCorrupt, size)
	}
	f := Footer{
		IndexPos: binary.BigEndian.Uint64(tail[0:]), Count: binary.BigEndian.Uint32(tail[8:]),
		Base: binary.BigEndian.Uint64(tail[12:]), End: binary.BigEndian.Uint64(tail[20:]),
		FirstTime: int64(binary.BigEndian.Uint64(tail[28:])), LastTime: int64(binary.BigEndian.Uint64(tail[36:])),
	}
	idxEnd := uint64(size) - footerSize
	if f.Count == 0 || f.IndexPos < uint64(len(magic)) || f.IndexPos > idxEnd ||
		(idxEnd-f.IndexPos) != uint64(f.Count)*entrySize || f.End <= f.Base || f.LastTime < f.FirstTime {
		return Footer{}, fmt.Errorf("%w: footer %+v does not fit an object of %d bytes", ErrCorrupt, f, size)
	}
	return f, nil
}

// IndexRange is the byte range [pos, pos+n) of the index and footer of a
// segment with footer f: what ParseIndex reads.
func (f Footer) IndexRange() (pos, n int64) {
	return int64(f.IndexPos), int64(f.Count)*entrySize + footerSize
}

// ParseIndex decodes and checks the index and footer bytes of a segment
// (IndexRange of its footer) against f.
func ParseIndex(b []byte, f Footer) ([]Entry, error) {
	if _, n := f.IndexRange(); int64(len(b)) != n {
		return nil, fmt.Errorf("%w: index of %d bytes, want %d", ErrCorrupt, len(b), n)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: index checksum mismatch", ErrCorrupt)
	}
	entries := make([]Entry, f.Count)
	next, prevTime := f.Base, f.FirstTime
	pos := uint64(len(magic))
	for i := range entries {
		p := b[i*entrySize:]
		e := Entry{
			Base: binary.BigEndian.Uint64(p[0:]), Span: binary.BigEndian.Uint32(p[8:]),
			AppendTime: int64(binary.BigEndian.Uint64(p[12:])), Pos: binary.BigEndian.Uint64(p[20:]),
			Len: binary.BigEndian.Uint32(p[28:]), CRC: binary.BigEndian.Uint32(p[32:]),
		}
		if e.Base != next || e.Span == 0 || e.Pos != pos || e.AppendTime < prevTime || e.Pos+uint64(e.Len) > f.IndexPos {
			return nil, fmt.Errorf("%w: index entry %d (%+v) is out of place", ErrCorrupt, i, e)
		}
		next, prevTime, pos = e.End(), e.AppendTime, e.Pos+uint64(e.Len)
		entries[i] = e
	}
	if next != f.End || pos != f.IndexPos || prevTime != f.LastTime {
		return nil, fmt.Errorf("%w: index ends at offset %d, byte %d; footer says %d, %d", ErrCorrupt, next, pos, f.End, f.IndexPos)
	}
	return entries, nil
}

// Find returns the index of the entry holding offset off, or -1.
func Find(entries []Entry, off uint64) int {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].End() > off })
	if i == len(entries) || entries[i].Base > off {
		return -1
	}
	return i
}

// SeekTime returns the index of the first entry whose append time is at or
// after t (len(entries) if none).
func SeekTime(entries []Entry, t int64) int {
	return sort.Search(len(entries), func(i int) bool { return entries[i].AppendTime >= t })
}

// CheckBatch verifies the bytes read for entry e and parses them.
func CheckBatch(e Entry, data []byte) (record.Batch, error) {
	if uint32(len(data)) != e.Len || crc32.Checksum(data, castagnoli) != e.CRC {
		return record.Batch{}, fmt.Errorf("%w: batch at offset %d: checksum mismatch", ErrCorrupt, e.Base)
	}
	b, err := record.Parse(data)
	if err != nil {
		return record.Batch{}, fmt.Errorf("%w: batch at offset %d: %w", ErrCorrupt, e.Base, err)
	}
	if b.Span() != e.Span {
		return record.Batch{}, fmt.Errorf("%w: batch at offset %d has span %d, the index says %d", ErrCorrupt, e.Base, b.Span(), e.Span)
	}
	return b, nil
}

// Name is the object name of a segment of topic topicID's partition part:
// unique for its content (the offsets and the checksum of the whole
// object), sorted by offset within the partition's prefix.
func Name(topicID uint64, part uint32, f Footer, object []byte) string {
	return fmt.Sprintf("%s%020d-%020d-%08x.seg", Prefix(topicID, part), f.Base, f.End, crc32.Checksum(object, castagnoli))
}

// Prefix is the object name prefix of a partition's segments.
func Prefix(topicID uint64, part uint32) string {
	return fmt.Sprintf("topics/%d/%d/", topicID, part)
}
