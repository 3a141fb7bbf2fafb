package kafka_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine"
)

// TestRequestDecompressionBudget: the batches of one Produce share a
// budget of MaxRequestBytes decompressed, beside each batch's
// MaxBatchBytes, so many small batches cannot each expand to the limit.
func TestRequestDecompressionBudget(t *testing.T) {
	n := startKafkaNode(t, engine.KafkaConfig{MaxRequestBytes: 3 << 19, MaxBatchBytes: 1 << 20})
	c := n.client(t)
	createTopic(t, c, "budget", 2)
	// One record of 900 KiB of zeros (under the topic's 1 MiB record
	// limit), gzipped to a few KiB; two of them pass the 1.5 MiB budget.
	rec := kmsg.Record{Value: make([]byte, 900<<10)}
	var body []byte
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	body = rec.AppendTo(body)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(body)
	zw.Close()
	batch := rawBatchWith(1, 1, gz.Bytes())
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "budget"
	for p := range int32(2) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	ps := resp.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("errors %v, %v: want none for the first batch, MESSAGE_TOO_LARGE for the second past the request's budget",
			kerr.ErrorForCode(ps[0].ErrorCode), kerr.ErrorForCode(ps[1].ErrorCode))
	}
}

// TestMaxConnections: past MaxConnections, a new connection is closed
// at once; the open ones are served.
func TestMaxConnections(t *testing.T) {
	n := startKafkaNode(t, engine.KafkaConfig{MaxConnections: 1})
	first := dialRaw(t, n.Kafka)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	first.roundTrip(frameRequest(req), false) // served: it holds the one slot
	second := dialRaw(t, n.Kafka)
	second.closedByServer()
	first.roundTrip(frameRequest(req), false)
}
