package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/record"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record batch v2 layout (Kafka's DefaultRecordBatch): the fields before
// the attributes are outside the CRC, so a broker may set the base offset
// and leader epoch without recomputing it.
const (
	batchHeaderBytes = 61 // base offset through record count
	batchCRCAt       = 17 // the CRC32C, over everything from crcFrom on
	batchCRCFrom     = 21 // the attributes onward
	batchLengthFrom  = 12 // Length counts the bytes after it

	attrCompression   = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// Compression codecs of the attributes' low bits.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// decodeBatch decodes one produce partition's records field: exactly one
// v2 record batch (what Produce v3+ requires), CRC32C checked,
// decompressed to at most maxBytes, every record parsed. Keys, values and
// headers are copied out of the request, byte for byte; the producer's
// timestamps become the records' event times. Refusals are *batchError
// with the Kafka code to answer; nothing of a refused batch is stored.
func decodeBatch(b []byte, maxBytes int) ([]broker.PublishRecord, error) {
	if len(b) < batchHeaderBytes {
		return nil, &batchError{kerr.CorruptMessage, fmt.Sprintf("a record batch of %d bytes (a v2 header alone has %d)", len(b), batchHeaderBytes)}
	}
	if magic := int8(b[16]); magic != 2 {
		return nil, &batchError{kerr.UnsupportedForMessageFormat, fmt.Sprintf("record batch magic %d: this broker takes v2 record batches only (Produce v3+)", magic)}
	}
	if n := int64(int32(binary.BigEndian.Uint32(b[8:]))); n != int64(len(b)-batchLengthFrom) {
		return nil, &batchError{kerr.CorruptMessage, fmt.Sprintf("batch length %d for %d bytes: a produce partition carries exactly one record batch", n, len(b)-batchLengthFrom)}
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		return nil, &batchError{kerr.CorruptMessage, "record batch header: " + err.Error()}
	}
	if got := crc32.Checksum(b[batchCRCFrom:], castagnoli); got != uint32(rb.CRC) {
		return nil, &batchError{kerr.CorruptMessage, fmt.Sprintf("record batch CRC32C %08x, computed %08x", uint32(rb.CRC), got)}
	}
	switch {
	case rb.Attributes&attrControl != 0:
		return nil, &batchError{kerr.InvalidRecord, "control batches are written by transactions, which this broker does not serve"}
	case rb.Attributes&attrTransactional != 0:
		return nil, &batchError{kerr.InvalidRecord, "transactional batches: this broker does not serve transactions"}
	case rb.ProducerID >= 0:
		return nil, &batchError{kerr.InvalidRecord, "idempotent batches (a producer id): this broker does not serve InitProducerId yet; turn idempotence off (enable.idempotence=false)"}
	case rb.NumRecords <= 0:
		return nil, &batchError{kerr.InvalidRecord, fmt.Sprintf("a record batch of %d records", rb.NumRecords)}
	case rb.LastOffsetDelta != rb.NumRecords-1:
		return nil, &batchError{kerr.InvalidRecord, fmt.Sprintf("last offset delta %d for %d records", rb.LastOffsetDelta, rb.NumRecords)}
	}
	raw, err := decompress(int(rb.Attributes&attrCompression), rb.Records, maxBytes)
	if err != nil {
		return nil, err
	}
	// Every record takes at least 7 bytes, so the count is bounded by the
	// data before anything is allocated for it.
	if int(rb.NumRecords) > len(raw)/7 {
		return nil, &batchError{kerr.CorruptMessage, fmt.Sprintf("%d records in %d bytes", rb.NumRecords, len(raw))}
	}
	// One allocation holds every key, value and header of the batch.
	slab := make([]byte, 0, len(raw))
	out := make([]broker.PublishRecord, rb.NumRecords)
	for i := range out {
		size, k := binary.Varint(raw)
		if k <= 0 || size < 0 || size > int64(len(raw)-k) {
			return nil, &batchError{kerr.CorruptMessage, fmt.Sprintf("record %d: length", i)}
		}
		var kr kmsg.Record
		if err := kr.ReadFrom(raw[:k+int(size)]); err != nil {
			return nil, &batchError{kerr.CorruptMessage, fmt.Sprintf("record %d: %v", i, err)}
		}
		raw = raw[k+int(size):]
		if kr.OffsetDelta != int32(i) {
			return nil, &batchError{kerr.InvalidRecord, fmt.Sprintf("record %d has offset delta %d", i, kr.OffsetDelta)}
		}
		r := &out[i].Record
		r.Key, slab = keep(slab, kr.Key)
		r.Value, slab = keep(slab, kr.Value)
		if len(kr.Headers) > 0 {
			r.Headers = make([]record.Header, len(kr.Headers))
			for j, h := range kr.Headers {
				r.Headers[j].Key, slab = keep(slab, []byte(h.Key))
				r.Headers[j].Value, slab = keep(slab, h.Value)
			}
		}
		if ts := rb.FirstTimestamp + kr.TimestampDelta64; ts > 0 && ts < maxMillis {
			r.EventTime = ts * 1e6
		}
	}
	if len(raw) != 0 {
		return nil, &batchError{kerr.CorruptMessage, fmt.Sprintf("%d bytes after the batch's %d records", len(raw), rb.NumRecords)}
	}
	return out, nil
}

// maxMillis is the largest millisecond time whose nanoseconds fit an int64.
const maxMillis = (1<<63 - 1) / 1_000_000

// keep copies b onto slab (which never reallocates: it has room for the
// whole batch) and returns the copy; nil stays nil.
func keep(slab, b []byte) ([]byte, []byte) {
	if b == nil {
		return nil, slab
	}
	start := len(slab)
	slab = append(slab, b...)
	return slab[start:len(slab):len(slab)], slab
}

// errTooLarge is a decompression that would pass the limit.
var errTooLarge = errors.New("kafka: decompressed batch over the limit")

// xerialMagic opens the framed snappy the Java client writes (xerial's
// snappy-java); librdkafka and franz-go write raw snappy blocks.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns the records of a batch compressed with codec,
// refusing (MESSAGE_TOO_LARGE) any that would expand past max bytes
// before writing more than max+1 of them: a small batch that expands a
// thousandfold is stopped at the limit, not after.
func decompress(codec int, src []byte, max int) ([]byte, error) {
	var out []byte
	var err error
	switch codec {
	case codecNone:
		if len(src) > max {
			err = errTooLarge
		}
		return src, wrapDecompress("uncompressed", err, max)
	case codecGzip:
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(src)); err == nil {
			out, err = readLimited(zr, max)
		}
		return out, wrapDecompress("gzip", err, max)
	case codecSnappy:
		out, err = unsnappy(src, max)
		return out, wrapDecompress("snappy", err, max)
	case codecLZ4:
		out, err = readLimited(lz4.NewReader(bytes.NewReader(src)), max)
		return out, wrapDecompress("lz4", err, max)
	case codecZstd:
		var zr *zstd.Decoder
		if zr, err = zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(max)+1)); err == nil {
			out, err = readLimited(zr, max)
			zr.Close()
		}
		return out, wrapDecompress("zstd", err, max)
	}
	return nil, &batchError{kerr.CorruptMessage, fmt.Sprintf("compression codec %d (known: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)", codec)}
}

func wrapDecompress(codec string, err error, max int) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errTooLarge), errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return &batchError{kerr.MessageTooLarge, fmt.Sprintf("%s batch expands past %d bytes", codec, max)}
	default:
		return &batchError{kerr.CorruptMessage, fmt.Sprintf("%s: %v", codec, err)}
	}
}

// readLimited reads r to its end, or fails with errTooLarge past max bytes.
func readLimited(r io.Reader, max int) ([]byte, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if n > int64(max) {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// unsnappy decodes raw snappy, or the xerial framing of it (a 16-byte
// header, then blocks each prefixed by its 4-byte size), checking each
// block's decoded length against what is left of max before decoding it.
func unsnappy(src []byte, max int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlock(nil, src, max)
	}
	if len(src) < 16 {
		return nil, errors.New("xerial header truncated")
	}
	src = src[16:]
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errors.New("xerial block size truncated")
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return nil, fmt.Errorf("xerial block of %d bytes in %d", n, len(src))
		}
		var err error
		if out, err = snappyBlock(out, src[:n], max-len(out)); err != nil {
			return nil, err
		}
		src = src[n:]
	}
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to dst, if it
// decodes to at most max bytes.
func snappyBlock(dst, block []byte, max int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > max {
		return nil, errTooLarge
	}
	dec, err := snappy.Decode(make([]byte, n), block)
	if err != nil {
		return nil, err
	}
	if dst == nil {
		return dec, nil
	}
	return append(dst, dec...), nil
}
