package kafka_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
)

// kafkaNode is a node served by enginetest with a Kafka listener on
// loopback.
type kafkaNode struct {
	*enginetest.Node
	// Kafka is the Kafka listener's host:port.
	Kafka string
}

// startKafkaNode starts a node alone with the Kafka listener on.
func startKafkaNode(t testing.TB, kc engine.KafkaConfig) *kafkaNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := enginetest.StartNode(t, engine.Config{}, enginetest.WithServeConfig(func(sc *engine.ServeConfig) {
		sc.KafkaListener, sc.Kafka = ln, kc
	}))
	return &kafkaNode{Node: n, Kafka: ln.Addr().String()}
}

// client is a franz-go client of the node, closed at the test's end.
func (n *kafkaNode) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(n.Kafka), kgo.DisableIdempotentWrite(), kgo.RequestRetries(3)}, opts...)
	c, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// createTopic creates a topic through the Kafka port (CreateTopics).
func createTopic(t testing.TB, c *kgo.Client, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("CreateTopics answered %d topics", len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v (%v)", name, err, resp.Topics[0].ErrorMessage)
	}
}

// rawBatch encodes recs as one uncompressed v2 record batch with a valid
// CRC32C, as a producer sends it; codec sets the compression attribute
// (the records must then be compressed by the caller: see rawBatchWith).
func rawBatch(t testing.TB, attrs int16, recs []kmsg.Record) []byte {
	t.Helper()
	var body []byte
	for i := range recs {
		r := recs[i]
		r.OffsetDelta = int32(i)
		enc := r.AppendTo(nil)
		r.Length = int32(len(enc) - 1)
		body = r.AppendTo(body)
	}
	return rawBatchWith(attrs, int32(len(recs)), body)
}

// rawBatchWith wraps records bytes (maybe compressed) in a batch header
// with a valid CRC32C.
func rawBatchWith(attrs int16, count int32, records []byte) []byte {
	rb := kmsg.RecordBatch{
		Length: int32(49 + len(records)), PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: count - 1, FirstTimestamp: 1, MaxTimestamp: 1,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: count, Records: records,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crcOf(b[21:]))
	return b
}

// crcOf is Kafka's batch checksum, CRC32C.
func crcOf(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
