package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzMax bounds frames and decompressed batches in the fuzz target, so
// that a seed expanding past it exercises the limit.
const fuzzMax = 1 << 20

// FuzzRequest feeds bytes to the listener's decoders as a connection
// would: framing (readFrame), the header and body (parseRequest), and for
// a Produce every partition's record batch (decodeBatch, decompression
// included). Whatever the bytes, they must give an error or a value,
// never a panic, and never more than the limits' worth of memory. The
// seeds (run by plain `go test`) are valid requests of every served API
// and their breakages: truncations, wrong size prefixes, unknown keys
// and versions, bad CRCs, and batches of each codec that expand past the
// limit.
func FuzzRequest(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
		for _, cut := range []int{1, 4, 9, len(seed) / 2, len(seed) - 1} {
			if cut > 0 && cut < len(seed) {
				f.Add(seed[:cut])
			}
		}
		wrong := bytes.Clone(seed)
		binary.BigEndian.PutUint32(wrong, uint32(len(seed))) // one too many
		f.Add(wrong)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		frame, err := readFrame(bytes.NewReader(b), nil, fuzzMax)
		if err != nil {
			if !errors.Is(err, errFrame) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("readFrame: unexpected error class: %v", err)
			}
			return
		}
		req, err := parseRequest(frame)
		if err != nil {
			if !errors.Is(err, errFrame) {
				t.Fatalf("parseRequest: error outside errFrame: %v", err)
			}
			return
		}
		switch m := req.msg.(type) {
		case *kmsg.ProduceRequest:
			for _, tp := range m.Topics {
				for _, p := range tp.Partitions {
					recs, err := decodeBatch(p.Records, fuzzMax)
					var be *batchError
					if err != nil && !errors.As(err, &be) {
						t.Fatalf("decodeBatch: error outside batchError: %v", err)
					}
					size := 0
					for _, r := range recs {
						size += len(r.Key) + len(r.Value)
					}
					if size > fuzzMax {
						t.Fatalf("decoded %d bytes past the %d limit", size, fuzzMax)
					}
				}
			}
		case nil:
			// ApiVersions at an unknown version: answered at v0.
			appendResponse(nil, req, apiVersions(req))
		}
	})
}

// fuzzSeeds are valid frames of every served API, and Produce frames
// carrying good and bad batches.
func fuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	keys := slices.Sorted(maps.Keys(served))
	for _, key := range keys {
		r := served[key]
		for _, v := range []int16{r.min, r.max} {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			seeds = append(seeds, frameOf(req, 1))
		}
	}
	unknown := frameOf(kmsg.NewPtrApiVersionsRequest(), 2)
	binary.BigEndian.PutUint16(unknown[4:], 999)
	seeds = append(seeds, unknown)
	future := frameOf(kmsg.NewPtrApiVersionsRequest(), 3)
	binary.BigEndian.PutUint16(future[6:], 77)
	seeds = append(seeds, future, []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0})

	recs := []kmsg.Record{{Key: []byte("k"), Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte{1}}}}, {Value: bytes.Repeat([]byte("x"), 300)}}
	plain := recordsBytes(recs)
	good := batchOf(0, 2, plain)
	badCRC := bytes.Clone(good)
	badCRC[30] ^= 0xff
	zeros := make([]byte, 4*fuzzMax)
	var gz, lz, zs bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(zeros)
	gw.Close()
	lw := lz4.NewWriter(&lz)
	lw.Write(zeros)
	lw.Close()
	zw, err := zstd.NewWriter(&zs)
	if err != nil {
		tb.Fatal(err)
	}
	zw.Write(zeros)
	zw.Close()
	var gzGood bytes.Buffer
	gw = gzip.NewWriter(&gzGood)
	gw.Write(plain)
	gw.Close()
	for _, batch := range [][]byte{
		good, badCRC,
		batchOf(codecGzip, 2, gzGood.Bytes()),
		batchOf(codecSnappy, 2, snappy.Encode(nil, plain)),
		batchOf(codecGzip, 1, gz.Bytes()),
		batchOf(codecLZ4, 1, lz.Bytes()),
		batchOf(codecZstd, 1, zs.Bytes()),
		batchOf(codecSnappy, 1, snappy.Encode(nil, zeros)),
		batchOf(7, 1, plain),
		batchOf(0, 1<<30, plain),
	} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = 9, -1
		t := kmsg.NewProduceRequestTopic()
		t.Topic = "t"
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = batch
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		seeds = append(seeds, frameOf(req, 4))
	}
	return seeds
}

// frameOf frames req with a request header (v2 when flexible).
func frameOf(req kmsg.Request, id int32) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(id))
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// recordsBytes encodes records as a batch body.
func recordsBytes(recs []kmsg.Record) []byte {
	var body []byte
	for i := range recs {
		r := recs[i]
		r.OffsetDelta = int32(i)
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		body = r.AppendTo(body)
	}
	return body
}

// batchOf wraps records bytes in a v2 batch header with a valid CRC32C.
func batchOf(codec int16, count int32, records []byte) []byte {
	rb := kmsg.RecordBatch{
		Length: int32(49 + len(records)), PartitionLeaderEpoch: -1, Magic: 2, Attributes: codec,
		LastOffsetDelta: count - 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: count, Records: records,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchCRCFrom:], castagnoli))
	return b
}

// TestDecodeBatchCodecs decodes one batch under every codec, and the
// Java client's xerial-framed snappy, to the same records.
func TestDecodeBatchCodecs(t *testing.T) {
	recs := []kmsg.Record{{Key: []byte("k"), Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte{}}}}, {Value: bytes.Repeat([]byte("x"), 3000)}}
	plain := recordsBytes(recs)
	var gz, lz, zs bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(plain)
	gw.Close()
	lw := lz4.NewWriter(&lz)
	lw.Write(plain)
	lw.Close()
	zw, _ := zstd.NewWriter(&zs)
	zw.Write(plain)
	zw.Close()
	xerial := append(bytes.Clone(xerialMagic), 0, 0, 0, 1, 0, 0, 0, 1) // version, compatible version
	half := len(plain) / 2
	for _, part := range [][]byte{plain[:half], plain[half:]} {
		blk := snappy.Encode(nil, part)
		xerial = binary.BigEndian.AppendUint32(xerial, uint32(len(blk)))
		xerial = append(xerial, blk...)
	}
	for name, b := range map[string][]byte{
		"none":   batchOf(codecNone, 2, plain),
		"gzip":   batchOf(codecGzip, 2, gz.Bytes()),
		"snappy": batchOf(codecSnappy, 2, snappy.Encode(nil, plain)),
		"xerial": batchOf(codecSnappy, 2, xerial),
		"lz4":    batchOf(codecLZ4, 2, lz.Bytes()),
		"zstd":   batchOf(codecZstd, 2, zs.Bytes()),
	} {
		got, err := decodeBatch(b, fuzzMax)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != 2 || string(got[0].Key) != "k" || string(got[0].Value) != "v" || !bytes.Equal(got[1].Value, recs[1].Value) ||
			len(got[0].Headers) != 1 || string(got[0].Headers[0].Key) != "h" || got[0].Headers[0].Value == nil {
			t.Fatalf("%s: decoded %+v", name, got)
		}
	}
}
