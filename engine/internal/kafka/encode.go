package kafka

import (
	"encoding/binary"
	"hash/crc32"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// batchWriter turns the records a stream delivers into v2 record batches
// for a Fetch response. Rewind stamps every record with the leader's
// append time, which is the Kafka timestamp: each batch is marked
// LogAppendTime with MaxTimestamp set (clients then give every record of
// the batch that time), and a new batch starts wherever the append time
// changes. Batches are uncompressed. Offsets are Rewind's: a batch's
// records keep their own offsets as deltas, so a compacted topic's gaps
// stay gaps.
type batchWriter struct {
	out []byte
	// buf is the pooled buffer out came from (nil: none taken yet).
	buf *[]byte
	// open batch: where it starts in out, its first offset and time (ms),
	// its last offset and record count; n == 0: none open.
	start      int
	base, last uint64
	ms         int64
	n          int32
	// rec is reused for every record.
	rec kmsg.Record
}

// bufPool holds the buffers of Fetch batches and response frames, so
// that a busy consumer does not allocate its fetch size for every
// partition of every Fetch. Buffers larger than maxPooledBuf are left to
// the garbage collector.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuf = 16 << 20

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// release returns the writer's buffer to the pool; the bytes it returned
// must no longer be used.
func (w *batchWriter) release() {
	if w.buf != nil {
		*w.buf = w.out
		putBuf(w.buf)
		w.buf, w.out = nil, nil
	}
}

// add appends one record.
func (w *batchWriter) add(r *rewindv1.Record) {
	if w.buf == nil {
		w.buf = getBuf()
		w.out = (*w.buf)[:0]
	}
	ms := r.GetAppendTimeUnixNanos() / 1e6
	if w.n > 0 && (ms != w.ms || r.GetOffset()-w.base > 1<<31-1) {
		w.close()
	}
	if w.n == 0 {
		w.start, w.base, w.ms = len(w.out), r.GetOffset(), ms
		w.out = append(w.out, make([]byte, batchHeaderBytes)...)
	}
	w.last = r.GetOffset()
	w.n++
	kr := &w.rec
	kr.Length, kr.Attributes, kr.TimestampDelta, kr.TimestampDelta64 = 0, 0, 0, 0
	kr.OffsetDelta = int32(r.GetOffset() - w.base)
	kr.Key, kr.Value = r.GetKey(), r.GetValue()
	kr.Headers = kr.Headers[:0]
	for _, h := range r.GetHeaders() {
		// Rewind keeps no null header value apart from an empty one; an
		// empty one is what producers send far more often.
		v := h.GetValue()
		if v == nil {
			v = []byte{}
		}
		kr.Headers = append(kr.Headers, kmsg.Header{Key: h.GetKey(), Value: v})
	}
	// A record opens with the length (a varint) of what follows it.
	kr.Length = int32(recordBodySize(kr))
	w.out = kr.AppendTo(w.out)
}

// recordBodySize is the encoded size of r after its length field, as
// kmsg.Record.AppendTo writes it (attributes, then zigzag varints and
// varint-prefixed bytes; a nil byte string is the one-byte -1).
func recordBodySize(r *kmsg.Record) int {
	n := 1 + varintSize(r.TimestampDelta64) + varintSize(int64(r.OffsetDelta)) +
		bytesSize(r.Key) + bytesSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintSize(int64(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	return n
}

func bytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintSize(int64(len(b))) + len(b)
}

func varintSize(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}

// close finishes the open batch: its header, then its CRC32C over the
// attributes onward (which cover MaxTimestamp and the LogAppendTime bit).
func (w *batchWriter) close() {
	if w.n == 0 {
		return
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          int64(w.base),
		Length:               int32(len(w.out) - w.start - batchLengthFrom),
		PartitionLeaderEpoch: leaderEpoch,
		Magic:                2,
		Attributes:           attrLogAppendTime,
		LastOffsetDelta:      int32(w.last - w.base),
		FirstTimestamp:       w.ms,
		MaxTimestamp:         w.ms,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           w.n,
	}
	rb.AppendTo(w.out[w.start:w.start])
	b := w.out[w.start:]
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchCRCFrom:], castagnoli))
	w.n = 0
}

// bytes finishes the open batch and returns every batch written.
func (w *batchWriter) bytes() []byte {
	w.close()
	return w.out
}

// size is the bytes written so far.
func (w *batchWriter) size() int { return len(w.out) }
