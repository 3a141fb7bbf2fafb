package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTopicsAdmin: CreateTopics refuses what it cannot honour, each with
// its code; Metadata lists topics and names unknown ones; DeleteTopics
// deletes.
func TestTopicsAdmin(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := n.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createTopic(t, c, "adm", 4)

	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 30_000
	for _, tc := range []struct {
		name       string
		partitions int32
		config     bool
	}{{"adm", 1, false}, {"bad/name", 1, false}, {"zero", 0, false}, {"configured", 1, true}} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.name, tc.partitions, -1
		if tc.config {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "cleanup.policy", kmsg.StringPtr("compact")
			rt.Configs = append(rt.Configs, cfg)
		}
		create.Topics = append(create.Topics, rt)
	}
	cresp, err := create.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []*kerr.Error{kerr.TopicAlreadyExists, kerr.InvalidTopicException, kerr.InvalidPartitions, kerr.InvalidConfig} {
		if got := cresp.Topics[i]; got.ErrorCode != want.Code || got.ErrorMessage == nil {
			t.Errorf("create %s: %v (%s), want %s with a message", got.Topic, kerr.ErrorForCode(got.ErrorCode), deref(got.ErrorMessage), want.Message)
		}
	}

	meta := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"adm", "missing"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		meta.Topics = append(meta.Topics, mt)
	}
	mresp, err := meta.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := mresp.Topics[0]; got.ErrorCode != 0 || len(got.Partitions) != 4 || got.Partitions[3].Leader != mresp.Brokers[0].NodeID {
		t.Fatalf("metadata of adm: error %d, %d partitions", got.ErrorCode, len(got.Partitions))
	}
	if got := mresp.Topics[1]; got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata of a missing topic: %v", kerr.ErrorForCode(got.ErrorCode))
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames, del.TimeoutMillis = []string{"adm", "missing"}, 30_000
	dresp, err := del.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if dresp.Topics[0].ErrorCode != 0 || dresp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete: %v, %v", kerr.ErrorForCode(dresp.Topics[0].ErrorCode), kerr.ErrorForCode(dresp.Topics[1].ErrorCode))
	}
	all, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range all.Topics {
		if *mt.Topic == "adm" {
			t.Fatal("adm is still listed after its deletion")
		}
	}
}

// TestFetchErrorsAndWaits: a Fetch past the end, of a partition or topic
// that does not exist, gets its code; a Fetch with nothing to read waits
// its MaxWaitMillis and answers empty; acks=0 produces without an answer.
func TestFetchErrorsAndWaits(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := n.client(t)
	createTopic(t, c, "fe", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fetch := func(topic string, p int32, offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 11, 50, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		name   string
		topic  string
		p      int32
		offset int64
		want   *kerr.Error
	}{
		{"past the end", "fe", 0, 5, kerr.OffsetOutOfRange},
		{"negative offset", "fe", 0, -3, kerr.OffsetOutOfRange},
		{"unknown partition", "fe", 3, 0, kerr.UnknownTopicOrPartition},
		{"unknown topic", "nope", 0, 0, kerr.UnknownTopicOrPartition},
	} {
		if got := fetch(tc.topic, tc.p, tc.offset); got.ErrorCode != tc.want.Code {
			t.Errorf("%s: %v, want %s", tc.name, kerr.ErrorForCode(got.ErrorCode), tc.want.Message)
		}
	}
	if got := fetch("fe", 0, 0); got.ErrorCode != 0 || len(got.RecordBatches) != 0 || got.HighWatermark != 0 {
		t.Fatalf("empty partition: error %d, %d bytes, high watermark %d", got.ErrorCode, len(got.RecordBatches), got.HighWatermark)
	}

	p := n.client(t, kgo.DefaultProduceTopic("fe"), kgo.RequiredAcks(kgo.NoAck()))
	p.ProduceSync(ctx, testRecords(3, "noack")...)
	// No answer comes back; the records are there once a Fetch sees them.
	for {
		got := fetch("fe", 0, 0)
		if got.HighWatermark == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("acks=0 records never arrived")
		}
	}
}
