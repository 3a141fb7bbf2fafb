package check

import (
	"testing"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// TestResentRecordIsADuplicateOrAViolation: the runner sends some
// acknowledged records again (the same idempotency key and value); the
// answer must be a duplicate of the first. A broker that stored the resend
// again (dedupe skipped) is caught.
func TestResentRecordIsADuplicateOrAViolation(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rec := func(off uint64, v string) history.Record {
		return history.Record{Partition: 0, Offset: off, Key: "pub-0", Value: v, IdemKey: v, AppendTime: t0.Add(time.Duration(off) * time.Millisecond)}
	}
	pub := func(seq int, v string, off uint64, dup bool) history.Publish {
		return history.Publish{Publisher: 0, Seq: seq, Topic: "t", Key: "pub-0", IdemKey: v, Value: v, Outcome: history.Acked,
			Partition: 0, Offset: off, Duplicate: dup, Start: t0, End: t0.Add(time.Millisecond), Attempts: 1}
	}
	base := func() *history.History {
		return &history.History{Nodes: []uint64{1}, Topics: []history.Topic{{Name: "t", Partitions: 1}}}
	}
	good := base()
	good.Publishes = []history.Publish{pub(0, "a", 0, false), pub(0, "a", 0, true), pub(1, "b", 1, false)}
	good.Replicas = []history.Replica{{Node: 1, Topic: "t", Partition: 0, Start: 0, End: 2, Records: []history.Record{rec(0, "a"), rec(1, "b")}}}
	if v := Log(good); !v.OK {
		t.Fatalf("a resend answered as a duplicate: %s", describe(v))
	}
	bad := base()
	bad.Publishes = []history.Publish{pub(0, "a", 0, false), pub(0, "a", 1, false), pub(1, "b", 2, false)}
	bad.Replicas = []history.Replica{{Node: 1, Topic: "t", Partition: 0, Start: 0, End: 3, Records: []history.Record{rec(0, "a"), rec(1, "a"), rec(2, "b")}}}
	if v := Log(bad); v.OK {
		t.Fatal("a resend stored again passed")
	}
}
