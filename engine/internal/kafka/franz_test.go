package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produced is what a test compares of a record: what a producer sent and
// where the broker put it.
type produced struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
}

func summary(r *kgo.Record) produced {
	return produced{r.Partition, r.Offset, r.Key, r.Value, r.Headers}
}

// produceAll produces recs synchronously and returns them as the broker
// acknowledged them (offsets, LogAppendTime timestamps).
func produceAll(t *testing.T, c *kgo.Client, recs []*kgo.Record) []produced {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := c.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := make([]produced, len(res))
	for i, r := range res {
		out[i] = summary(r.Record)
	}
	return out
}

// consumeN reads n records with a fresh consumer starting at start, and
// fails if any other arrives within the reads (or too few arrive in 60 s).
func consumeN(t *testing.T, n *kafkaNode, topic string, start kgo.Offset, want int) []produced {
	t.Helper()
	c := n.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []produced
	for len(got) < want {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), want, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, summary(r)) })
	}
	c.Close()
	if len(got) != want {
		t.Fatalf("consumed %d records, want %d", len(got), want)
	}
	sortProduced(got)
	return got
}

func sortProduced(rs []produced) {
	slices.SortFunc(rs, func(a, b produced) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
}

// testRecords are records with keys, empty and binary values, and
// headers (repeated keys, empty values).
func testRecords(n int, tag string) []*kgo.Record {
	out := make([]*kgo.Record, n)
	for i := range out {
		r := &kgo.Record{Value: bytes.Repeat([]byte(fmt.Sprintf("%s-%d|", tag, i)), 1+i%7)}
		if i%3 != 0 {
			r.Key = []byte{byte(i), 0, 0xff, 'k'}
		}
		if i%4 == 1 {
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte{0, 1, 2}}, {Key: "h", Value: []byte{}}, {Key: "trace-ü", Value: []byte(tag)}}
		}
		out[i] = r
	}
	return out
}

// TestFranzGoProduceConsume produces through the Kafka port with franz-go
// under every compression codec and consumes with franz-go from the
// start: every record comes back byte for byte (keys, values, headers)
// at the offset the produce returned. (franz-go keeps its own timestamp
// on a produced record; TestLogAppendTime checks the broker's.)
func TestFranzGoProduceConsume(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	admin := n.client(t)
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
	} {
		t.Run(codec.name, func(t *testing.T) {
			topic := "franz-" + codec.name
			createTopic(t, admin, topic, 3)
			p := n.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec.codec), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			want := produceAll(t, p, testRecords(200, codec.name))
			sortProduced(want)
			got := consumeN(t, n, topic, kgo.NewOffset().AtStart(), len(want))
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("consumed records differ from produced (-want +got):\n%s", d)
			}
		})
	}
}

// TestNullAndEmpty pins what docs/kafka.md says of null and empty byte
// strings, which Rewind does not tell apart: null or empty keys and
// values come back null, null or empty header values come back empty.
func TestNullAndEmpty(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	createTopic(t, n.client(t), "nulls", 1)
	p := n.client(t, kgo.DefaultProduceTopic("nulls"))
	produceAll(t, p, []*kgo.Record{
		{Key: nil, Value: nil, Headers: []kgo.RecordHeader{{Key: "n", Value: nil}}},
		{Key: []byte{}, Value: []byte{}, Headers: []kgo.RecordHeader{{Key: "e", Value: []byte{}}}},
	})
	got := consumeN(t, n, "nulls", kgo.NewOffset().AtStart(), 2)
	for i, r := range got {
		if r.Key != nil || r.Value != nil {
			t.Fatalf("record %d: key %#v, value %#v; want both null", i, r.Key, r.Value)
		}
		if len(r.Headers) != 1 || r.Headers[0].Value == nil || len(r.Headers[0].Value) != 0 {
			t.Fatalf("record %d: headers %#v; want one with an empty value", i, r.Headers)
		}
	}
}
