package transport

import (
	"testing"

	"connectrpc.com/connect"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/raftlog"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// FuzzAccept feeds arbitrary frames to the receiver's checks and decoder:
// they are refused with one of the documented codes, or every message
// delivered is addressed to this node from the frame's sender.
func FuzzAccept(f *testing.F) {
	tr, err := New(Config{ClusterID: 7, NodeID: 2,
		Resolve: func(uint64) (string, bool) { return "", false },
		Deliver: func([]raftlog.Envelope) {},
		Allowed: func(node uint64) bool { return node != 9 },
	})
	if err != nil {
		f.Fatal(err)
	}
	defer tr.Close()
	m, _ := proto.Marshal(&pb.Message{Type: pb.MsgApp.Enum(), From: proto.Uint64(1), To: proto.Uint64(2),
		Entries: []*pb.Entry{{Index: proto.Uint64(3), Data: []byte("x")}}})
	for _, req := range []*peerv1.SendRequest{
		{ClusterId: 7, From: 1, To: 2, Messages: []*peerv1.RaftEnvelope{{Group: 1, Message: m}}},
		{ClusterId: 7, From: 1, To: 2, Messages: []*peerv1.RaftEnvelope{{Group: 1, Message: []byte{0xff}}}},
		{ClusterId: 7, From: 9, To: 2},
		{ClusterId: 8, From: 1, To: 2},
	} {
		b, _ := proto.Marshal(req)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req peerv1.SendRequest
		if proto.Unmarshal(b, &req) != nil {
			return // connect refuses the frame before accept sees it
		}
		envs, err := tr.accept(&req)
		if err != nil {
			switch connect.CodeOf(err) {
			case connect.CodeFailedPrecondition, connect.CodePermissionDenied, connect.CodeInvalidArgument:
			default:
				t.Fatalf("refused with %v", err)
			}
			return
		}
		for _, e := range envs {
			if e.Group == 0 || e.Msg.GetTo() != 2 || e.Msg.GetFrom() != req.GetFrom() {
				t.Fatalf("accepted %d %v from a frame from %d", e.Group, e.Msg, req.GetFrom())
			}
		}
	})
}
