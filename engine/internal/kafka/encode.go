package kafka

import (
	"encoding/binary"
	"hash/crc32"

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
	// open batch: where it starts in out, its first offset and time (ms),
	// its last offset and record count; n == 0: none open.
	start      int
	base, last uint64
	ms         int64
	n          int32
	// rec is reused for every record; scratch holds one record's encoding.
	rec     kmsg.Record
	scratch []byte
}

// add appends one record.
func (w *batchWriter) add(r *rewindv1.Record) {
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
	// A record opens with its length (a varint) of what follows; encode
	// once with length 0 (one byte) to learn it.
	w.scratch = kr.AppendTo(w.scratch[:0])
	kr.Length = int32(len(w.scratch) - 1)
	w.out = kr.AppendTo(w.out)
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
		PartitionLeaderEpoch: -1,
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
