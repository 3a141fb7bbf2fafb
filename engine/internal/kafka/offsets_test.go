package kafka_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFranzGoStartPositions consumes with franz-go from a timestamp
// (ListOffsets through Rewind's time index: the first record appended at
// or after it, exactly) and from the end (only records produced after the
// consumer resolved the end come).
func TestFranzGoStartPositions(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	admin := n.client(t)
	const topic = "positions"
	createTopic(t, admin, topic, 1)
	p := n.client(t, kgo.DefaultProduceTopic(topic))
	produceAll(t, p, testRecords(10, "first"))
	// The second produce gets a later millisecond than the first (the
	// node's clock is this process's), so a seek can tell them apart.
	last := appendTimes(t, admin, topic, 10)[9]
	for time.Now().UnixMilli() <= last {
		time.Sleep(time.Millisecond)
	}
	produceAll(t, p, testRecords(5, "second"))
	times := appendTimes(t, admin, topic, 15)
	if times[10] <= times[9] {
		t.Fatalf("append times %v: the second produce is not later", times)
	}

	t.Run("timestamp", func(t *testing.T) {
		for _, at := range []int64{times[0] - 1, times[10], times[14], times[14] + 1} {
			want := firstAtOrAfter(times, at)
			c := n.client(t)
			got := listOffset(t, c, topic, at)
			if want == len(times) {
				want = -1 // no record that recent: Kafka answers -1
			}
			if got != int64(want) {
				t.Fatalf("ListOffsets at %d ms: %d, want %d (times %v)", at, got, want, times)
			}
			if at == times[10] && want != 10 {
				t.Fatalf("the first record at or after %d ms is %d, want 10", at, want)
			}
			if want >= 0 {
				recs := consumeN(t, n, topic, kgo.NewOffset().AfterMilli(at), 15-want)
				if recs[0].Offset != int64(want) {
					t.Fatalf("franz-go from %d ms started at %d, want %d", at, recs[0].Offset, want)
				}
			}
		}
	})
	t.Run("earliest and latest", func(t *testing.T) {
		c := n.client(t)
		if got := listOffset(t, c, topic, -2); got != 0 {
			t.Fatalf("earliest: %d, want 0", got)
		}
		if got := listOffset(t, c, topic, -1); got != 15 {
			t.Fatalf("latest: %d, want 15", got)
		}
	})
	t.Run("end", func(t *testing.T) {
		seen := &fetchSeen{ch: make(chan struct{})}
		c := n.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.WithHooks(seen))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		got := make(chan []produced, 1)
		go func() {
			var rs []produced
			for len(rs) < 3 && ctx.Err() == nil {
				c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { rs = append(rs, summary(r)) })
			}
			got <- rs
		}()
		// Once the consumer fetches it has resolved the end (15).
		select {
		case <-seen.ch:
		case <-ctx.Done():
			t.Fatal("the consumer sent no Fetch")
		}
		produceAll(t, p, testRecords(3, "third"))
		rs := <-got
		if len(rs) != 3 || rs[0].Offset != 15 {
			t.Fatalf("from the end: %d records from offset %v, want 3 from 15", len(rs), rs)
		}
	})
}

// fetchSeen is a franz-go hook closing ch once a Fetch is written.
type fetchSeen struct {
	ch   chan struct{}
	once sync.Once
}

func (f *fetchSeen) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.Fetch.Int16() && err == nil {
		f.once.Do(func() { close(f.ch) })
	}
}

// firstAtOrAfter is the index of the first time at or after at.
func firstAtOrAfter(times []int64, at int64) int {
	for i, ts := range times {
		if ts >= at {
			return i
		}
	}
	return len(times)
}

// listOffset asks ListOffsets (v6) for partition 0 of topic at ts.
func listOffset(t *testing.T, c *kgo.Client, topic string, ts int64) int64 {
	t.Helper()
	return listOffsetOf(t, c, topic, 0, ts)
}

// listOffsetOf asks ListOffsets (v6) for partition p of topic at ts.
func listOffsetOf(t *testing.T, c *kgo.Client, topic string, p int32, ts int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 6
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(got.ErrorCode); err != nil {
		t.Fatalf("ListOffsets %d: %v", ts, err)
	}
	return got.Offset
}

// appendTimes fetches the first n records of partition 0 with a raw
// Fetch (v12) and returns each record's timestamp, checking on the way
// what a Kafka client relies on: every batch is marked LogAppendTime with
// its MaxTimestamp set, and its CRC32C covers that.
func appendTimes(t *testing.T, c *kgo.Client, topic string, n int) []int64 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, 100, 1, 50<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 10 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	part := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
		t.Fatal(err)
	}
	if part.HighWatermark != int64(n) || part.LastStableOffset != int64(n) || part.LogStartOffset != 0 {
		t.Fatalf("high watermark %d, last stable %d, log start %d; want %d, %d, 0", part.HighWatermark, part.LastStableOffset, part.LogStartOffset, n, n)
	}
	var times []int64
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for b := part.RecordBatches; len(b) > 0; {
		size := int(binary.BigEndian.Uint32(b[8:])) + 12
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:size]); err != nil {
			t.Fatal(err)
		}
		if got := crc32.Checksum(b[21:size], castagnoli); got != uint32(rb.CRC) {
			t.Fatalf("batch at %d: CRC %08x, computed %08x", rb.FirstOffset, uint32(rb.CRC), got)
		}
		if rb.Attributes&0x08 == 0 || rb.MaxTimestamp <= 0 {
			t.Fatalf("batch at %d: attributes %#x, max timestamp %d: want LogAppendTime", rb.FirstOffset, rb.Attributes, rb.MaxTimestamp)
		}
		for range rb.NumRecords {
			times = append(times, rb.MaxTimestamp)
		}
		b = b[size:]
	}
	if len(times) != n {
		t.Fatalf("fetched %d records, want %d", len(times), n)
	}
	return times
}

// TestProduceLogAppendTime checks a Produce response's LogAppendTime and
// base offset against what a Fetch then returns.
func TestProduceLogAppendTime(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := n.client(t)
	createTopic(t, c, "lat", 1)
	for i := range 2 {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "lat"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = rawBatch(t, 0, []kmsg.Record{{Value: []byte("a")}, {Value: []byte("b")}})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != 0 || got.BaseOffset != int64(2*i) || got.LogAppendTime <= 0 {
			t.Fatalf("produce %d: error %d, base offset %d, log append time %d; want 0, %d, > 0", i, got.ErrorCode, got.BaseOffset, got.LogAppendTime, 2*i)
		}
		times := appendTimes(t, c, "lat", 2*i+2)
		if times[2*i] != got.LogAppendTime {
			t.Fatalf("fetched timestamp %d, produce answered %d", times[2*i], got.LogAppendTime)
		}
	}
}
