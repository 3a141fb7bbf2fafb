package kafka_test

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestCluster: in a three-member cluster every member serves the Kafka
// port. Records produced through one member to partitions led anywhere
// are read back byte for byte through another, and a third answers
// ListOffsets for them: each member routes to the partitions' raft
// leaders inside the cluster.
func TestCluster(t *testing.T) {
	// One Kafka listener per member, opened first; each member takes one
	// as it starts (members start on goroutines of their own).
	lns := make(chan net.Listener, 3)
	var addrs []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns <- ln
		addrs = append(addrs, ln.Addr().String())
	}
	enginetest.StartCluster(t, 3, nil, enginetest.WithServeConfig(func(sc *engine.ServeConfig) {
		select {
		case sc.KafkaListener = <-lns:
		default: // a restarted member: none (this test restarts none)
		}
	}))
	a, b, c := &kafkaNode{Kafka: addrs[0]}, &kafkaNode{Kafka: addrs[1]}, &kafkaNode{Kafka: addrs[2]}

	createTopic(t, a.client(t), "spread", 3)
	p := a.client(t, kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RequestRetries(20))
	want := produceAll(t, p, testRecords(90, "cluster"))
	sortProduced(want)
	got := consumeN(t, b, "spread", kgo.NewOffset().AtStart(), len(want))
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("read through another member (-want +got):\n%s", d)
	}
	cc := c.client(t)
	for part := range int32(3) {
		if end := listOffsetOf(t, cc, "spread", part, -1); end != 30 {
			t.Fatalf("partition %d: end %d through a third member, want 30", part, end)
		}
	}

	// Groups are coordinated by the metadata leader only: a join through
	// it is served, through the others NOT_COORDINATOR.
	eventually(t, "one member to serve a join and two to answer NOT_COORDINATOR", func() bool {
		var served, refused int
		for _, addr := range addrs {
			conn := dialRaw(t, addr)
			join := kmsg.NewPtrJoinGroupRequest()
			join.SetVersion(3) // no KIP-394 round trip
			join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "cg", "consumer", 10_000, 10_000
			pr := kmsg.NewJoinGroupRequestProtocol()
			pr.Name = "range"
			join.Protocols = append(join.Protocols, pr)
			jr := rawGroupCall(t, conn, join).(*kmsg.JoinGroupResponse)
			switch jr.ErrorCode {
			case 0:
				served++
				leave := kmsg.NewPtrLeaveGroupRequest()
				leave.SetVersion(1)
				leave.Group, leave.MemberID = "cg", jr.MemberID
				rawGroupCall(t, conn, leave)
			case kerr.NotCoordinator.Code:
				refused++
			}
			conn.Close()
		}
		return served == 1 && refused == 2
	})
}
