package kafka_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/rewind-io/rewind/sdk/client"
)

// Sizes of the Kafka-against-native benchmarks: 100-byte records on a
// topic of 4 partitions.
const (
	benchRecordBytes   = 100
	benchPartitions    = 4
	benchProduceRounds = 50_000  // records per produce iteration
	benchConsumeTotal  = 200_000 // records each consume iteration reads
)

// BenchmarkKafkaVsNative measures franz-go through the Kafka port against
// Rewind's own Go client, on the same node in the same run (docs/kafka.md,
// "Performance"): producing (asynchronous, batched by each client as it
// does by default, acks=all; the native client's Publisher with 4
// requests in flight) and consuming a 4-partition topic from its start
// to its end.
func BenchmarkKafkaVsNative(b *testing.B) {
	n := startKafkaNode(b, engineKafka())
	native := client.New(n.URL)
	payload := make([]byte, benchRecordBytes)
	rand.Read(payload)
	admin := n.client(b)
	for _, topic := range []string{"p-kafka", "p-native", "c"} {
		createTopic(b, admin, topic, benchPartitions)
	}

	b.Run("produce/kafka", func(b *testing.B) {
		p := n.client(b, kgo.DefaultProduceTopic("p-kafka"), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(100_000))
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			for range benchProduceRounds {
				p.Produce(ctx, &kgo.Record{Value: payload}, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Error(err)
					}
				})
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*benchProduceRounds)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("produce/native", func(b *testing.B) {
		p := native.NewPublisher("p-native", client.WithMaxInFlight(4))
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			for range benchProduceRounds {
				if _, err := p.Publish(ctx, client.Message{Value: payload}); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*benchProduceRounds)/b.Elapsed().Seconds(), "records/s")
		p.Close(ctx)
	})

	// The consume benchmarks read one topic filled once.
	ctx := context.Background()
	msgs := make([]client.Message, 1000)
	for i := range msgs {
		msgs[i].Value = payload
	}
	for i := 0; i < benchConsumeTotal; i += len(msgs) {
		if _, err := native.Publish(ctx, "c", msgs...); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("consume/kafka", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := n.client(b, kgo.ConsumeTopics("c"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := 0
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			for got < benchConsumeTotal && cctx.Err() == nil {
				got += c.PollFetches(cctx).NumRecords()
			}
			cancel()
			c.Close()
			if got != benchConsumeTotal {
				b.Fatalf("consumed %d records, want %d", got, benchConsumeTotal)
			}
		}
		b.ReportMetric(float64(b.N*benchConsumeTotal)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("consume/native", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sub, err := native.Subscribe(ctx, "c", client.From(client.Earliest()), client.Until(client.End()))
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for sub.Next() {
				if r, ok := sub.Event().(*client.Records); ok {
					got += len(r.Records)
				}
			}
			if err := sub.Err(); err != nil {
				b.Fatal(err)
			}
			sub.Close()
			if got != benchConsumeTotal {
				b.Fatalf("consumed %d records, want %d", got, benchConsumeTotal)
			}
		}
		b.ReportMetric(float64(b.N*benchConsumeTotal)/b.Elapsed().Seconds(), "records/s")
	})
}
