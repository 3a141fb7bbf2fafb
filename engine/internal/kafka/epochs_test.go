package kafka_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wantEpoch is the leader epoch of every partition (epochs.go).
const wantEpoch int32 = 0

// epochAnswer is one partition's OffsetForLeaderEpoch answer.
type epochAnswer struct {
	Code        int16
	LeaderEpoch int32
	EndOffset   int64
}

// askEpoch sends one OffsetForLeaderEpoch at exactly version v (a kgo
// client would pick its own) for one partition, on a raw connection.
func askEpoch(t *testing.T, c *rawConn, v int16, topic string, p, current, epoch int32) epochAnswer {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = v, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p, current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.Version = v
	if err := resp.ReadFrom(c.roundTrip(frameRequest(req), req.IsFlexible())); err != nil {
		t.Fatalf("OffsetForLeaderEpoch v%d: %v", v, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Topic != topic {
		t.Fatalf("OffsetForLeaderEpoch v%d: answered %+v", v, resp.Topics)
	}
	got := resp.Topics[0].Partitions[0]
	if got.Partition != p {
		t.Fatalf("answered partition %d, asked %d", got.Partition, p)
	}
	return epochAnswer{got.ErrorCode, got.LeaderEpoch, got.EndOffset}
}

// TestOffsetForLeaderEpoch pins the mapping of epochs.go at every
// version: one epoch, 0, per partition, reported by Metadata and ending
// at the log end offset; other epochs unknown; a current epoch past 0
// refused; unknown partitions answered as such. A kgo client's own
// OffsetForLeaderEpoch (kadm-style, through client.Request) agrees.
func TestOffsetForLeaderEpoch(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, c, "epochs", 2)
	recs := testRecords(5, "e")
	for _, r := range recs {
		r.Topic, r.Partition = "epochs", 0
	}
	produceAll(t, c, recs)

	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("epochs")
	md.Topics = append(md.Topics, mt)
	mresp, err := md.RequestWith(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range mresp.Topics[0].Partitions {
		if p.LeaderEpoch != wantEpoch {
			t.Fatalf("Metadata: partition %d leader epoch %d, want %d", p.Partition, p.LeaderEpoch, wantEpoch)
		}
	}

	raw := dialRaw(t, n.Kafka)
	unknownTopic := kerr.UnknownTopicOrPartition.Code
	for _, v := range []int16{0, 1, 2, 3, 4} {
		for _, tc := range []struct {
			name           string
			topic          string
			p, cur, epoch  int32
			want           epochAnswer
			currentChecked bool
		}{
			{"epoch 0 ends at the log end", "epochs", 0, -1, 0, epochAnswer{0, 0, 5}, false},
			{"empty partition", "epochs", 1, 0, 0, epochAnswer{0, 0, 0}, false},
			{"later epoch unknown", "epochs", 0, -1, 1, epochAnswer{0, -1, -1}, false},
			{"undefined epoch", "epochs", 0, -1, -1, epochAnswer{0, -1, -1}, false},
			{"current epoch ahead", "epochs", 0, 3, 0, epochAnswer{kerr.UnknownLeaderEpoch.Code, -1, -1}, true},
			{"unknown topic", "nope", 0, -1, 0, epochAnswer{unknownTopic, -1, -1}, false},
			{"partition past the count", "epochs", 9, -1, 0, epochAnswer{unknownTopic, -1, -1}, false},
			{"negative partition", "epochs", -4, -1, 0, epochAnswer{unknownTopic, -1, -1}, false},
		} {
			want := tc.want
			if tc.currentChecked && v < 2 { // no CurrentLeaderEpoch before v2
				want = epochAnswer{0, 0, 5}
			}
			if v == 0 && want.Code == 0 { // v0 has no LeaderEpoch field
				want.LeaderEpoch = -1
			}
			got := askEpoch(t, raw, v, tc.topic, tc.p, tc.cur, tc.epoch)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("v%d %s (-want +got):\n%s", v, tc.name, d)
			}
		}
	}
	kreq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	kt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	kt.Topic = "epochs"
	kp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	kp.Partition, kp.CurrentLeaderEpoch, kp.LeaderEpoch = 0, wantEpoch, wantEpoch
	kt.Partitions = append(kt.Partitions, kp)
	kreq.Topics = append(kreq.Topics, kt)
	kresp, err := kreq.RequestWith(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := kresp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.LeaderEpoch != wantEpoch || got.EndOffset != 5 {
		t.Fatalf("through kgo: %+v, want epoch 0 ending at 5", got)
	}
}

// epochHook counts the OffsetForLeaderEpoch requests a client writes.
type epochHook struct{ n atomic.Int32 }

func (h *epochHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.OffsetForLeaderEpoch.Int16() && err == nil {
		h.n.Add(1)
	}
}

// TestConsumeAfterEpochCheck starts a franz-go consumer at an offset
// with a leader epoch, as one resumes from a committed position: it
// validates the position with OffsetForLeaderEpoch first (KIP-320), then
// consumes from it, every record stamped with epoch 0.
func TestConsumeAfterEpochCheck(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	p := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, p, "validated", 1)
	recs := testRecords(6, "v")
	for _, r := range recs {
		r.Topic, r.Partition = "validated", 0
	}
	produceAll(t, p, recs)

	hook := &epochHook{}
	c := n.client(t, kgo.WithHooks(hook), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			"validated": {0: kgo.NewOffset().At(2).WithEpoch(wantEpoch)},
		}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var offsets []int64
	for len(offsets) < 4 {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed offsets %v of 2..5: %v", offsets, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.LeaderEpoch != wantEpoch {
				t.Errorf("record %d: leader epoch %d, want %d", r.Offset, r.LeaderEpoch, wantEpoch)
			}
			offsets = append(offsets, r.Offset)
		})
	}
	if d := cmp.Diff([]int64{2, 3, 4, 5}, offsets); d != "" {
		t.Fatalf("consumed offsets (-want +got):\n%s", d)
	}
	if hook.n.Load() == 0 {
		t.Fatal("the consumer never validated its position with OffsetForLeaderEpoch")
	}
}
