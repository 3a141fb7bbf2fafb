package transport_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/gen/rewind/peer/v1/peerv1connect"
	"github.com/rewind-io/rewind/raftlog"
	"github.com/rewind-io/rewind/raftlog/transport"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// waitLimit bounds every wait, so a broken transport fails the test
// instead of hanging it. It is not a performance assertion.
const waitLimit = 30 * time.Second

// recorder collects events from the transport's goroutines and lets the
// test wait for a condition on them without sleeping.
type recorder[T any] struct {
	mu     sync.Mutex
	events []T
	notify chan struct{}
}

func newRecorder[T any]() *recorder[T] { return &recorder[T]{notify: make(chan struct{}, 1)} }

func (r *recorder[T]) add(evs ...T) {
	r.mu.Lock()
	r.events = append(r.events, evs...)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.events...)
}

// wait blocks until cond holds for the events so far and returns them.
func (r *recorder[T]) wait(t testing.TB, what string, cond func([]T) bool) []T {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		if evs := r.all(); cond(evs) {
			return evs
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("gave up waiting for %s; have %d events", what, len(r.all()))
		}
	}
}

type snapReport struct {
	Group, Node uint64
	Failed      bool
}

// cluster maps node ids to addresses for Resolve.
type cluster struct {
	mu    sync.Mutex
	addrs map[uint64]string
}

func (c *cluster) set(node uint64, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addrs == nil {
		c.addrs = make(map[uint64]string)
	}
	c.addrs[node] = addr
}

func (c *cluster) resolve(node uint64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.addrs[node]
	return a, ok
}

// node is one transport with its HTTP server on loopback.
type node struct {
	id          uint64
	tr          *transport.Transport
	addr        string
	srv         *http.Server
	frames      *recorder[[]raftlog.Envelope] // one event per delivered frame
	unreachable *recorder[uint64]
	snaps       *recorder[snapReport]
}

// newNode starts node id of clusterID; edit adjusts its config.
func newNode(t *testing.T, c *cluster, clusterID, id uint64, edit func(*transport.Config)) *node {
	t.Helper()
	n := &node{
		id: id, frames: newRecorder[[]raftlog.Envelope](),
		unreachable: newRecorder[uint64](), snaps: newRecorder[snapReport](),
	}
	cfg := transport.Config{
		ClusterID: clusterID, NodeID: id, Resolve: c.resolve,
		Deliver:        func(envs []raftlog.Envelope) { n.frames.add(envs) },
		Unreachable:    func(node uint64) { n.unreachable.add(node) },
		SnapshotStatus: func(g, node uint64, failed bool) { n.snaps.add(snapReport{g, node, failed}) },
	}
	if edit != nil {
		edit(&cfg)
	}
	tr, err := transport.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.tr = tr
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.addr = ln.Addr().String()
	c.set(id, n.addr)
	n.serve(t, ln)
	t.Cleanup(tr.Close) // before the server closes
	return n
}

func (n *node) serve(t *testing.T, ln net.Listener) {
	mux := http.NewServeMux()
	mux.Handle(n.tr.Handler())
	n.srv = serve(t, ln, mux)
}

func serve(t *testing.T, ln net.Listener, h http.Handler) *http.Server {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: p}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// messages waits until n has been delivered at least count messages and
// returns them all, in delivery order.
func (n *node) messages(t *testing.T, count int) []raftlog.Envelope {
	t.Helper()
	frames := n.frames.wait(t, fmt.Sprintf("%d messages at node %d", count, n.id), func(fs [][]raftlog.Envelope) bool {
		return len(flatten(fs)) >= count
	})
	return flatten(frames)
}

func flatten(frames [][]raftlog.Envelope) []raftlog.Envelope {
	var out []raftlog.Envelope
	for _, f := range frames {
		out = append(out, f...)
	}
	return out
}

func msg(typ pb.MessageType, from, to, index uint64) *pb.Message {
	return &pb.Message{Type: typ.Enum(), From: proto.Uint64(from), To: proto.Uint64(to), Index: proto.Uint64(index), Term: proto.Uint64(1)}
}

func env(group uint64, m *pb.Message) raftlog.Envelope { return raftlog.Envelope{Group: group, Msg: m} }

type key struct{ Group, Index uint64 }

func keys(envs []raftlog.Envelope) []key {
	out := make([]key, len(envs))
	for i, e := range envs {
		out[i] = key{e.Group, e.Msg.GetIndex()}
	}
	return out
}

func peerStats(t *testing.T, tr *transport.Transport, node uint64) transport.PeerStats {
	t.Helper()
	ps, ok := tr.Stats().Peer(node)
	if !ok {
		t.Fatalf("no stats for peer %d", node)
	}
	return ps
}

func TestSendDeliversInOrder(t *testing.T) {
	var c cluster
	a := newNode(t, &c, 1, 1, nil)
	b := newNode(t, &c, 1, 2, nil)
	var want []key
	for i := range 100 {
		var envs []raftlog.Envelope
		for j := range 10 {
			g, idx := uint64(j%3+1), uint64(i*10+j)
			envs = append(envs, env(g, msg(pb.MsgApp, 1, 2, idx)))
			want = append(want, key{g, idx})
		}
		a.tr.Send(envs)
	}
	got := b.messages(t, len(want))
	if diff := cmp.Diff(want, keys(got)); diff != "" {
		t.Fatalf("delivered (-want +got):\n%s", diff)
	}
	for _, e := range got {
		if e.Msg.GetFrom() != 1 || e.Msg.GetTo() != 2 || e.Msg.GetType() != pb.MsgApp {
			t.Fatalf("delivered %v", e.Msg)
		}
	}
	a.tr.Close() // waits for the peer goroutine: its counters are final
	ps := peerStats(t, a.tr, 2)
	if ps.Messages != uint64(len(want)) || ps.Dropped != 0 || !ps.Connected || ps.Frames == 0 || ps.Frames > 100 {
		t.Fatalf("sender stats %+v", ps)
	}
	if st := b.tr.Stats(); st.ReceivedMessages != uint64(len(want)) || st.Refused != 0 {
		t.Fatalf("receiver stats %+v", st)
	}
}

// TestGroupsShareAFrame sends the heartbeats of many groups to two peers in
// one Send: each peer gets them all in one frame.
func TestGroupsShareAFrame(t *testing.T) {
	var c cluster
	a := newNode(t, &c, 1, 1, nil)
	b := newNode(t, &c, 1, 2, nil)
	d := newNode(t, &c, 1, 3, nil)
	var envs []raftlog.Envelope
	for g := uint64(1); g <= 100; g++ {
		envs = append(envs, env(g, msg(pb.MsgHeartbeat, 1, 2, 0)), env(g, msg(pb.MsgHeartbeat, 1, 3, 0)))
	}
	a.tr.Send(envs)
	for _, n := range []*node{b, d} {
		n.messages(t, 100)
		if frames := n.frames.all(); len(frames) != 1 || len(frames[0]) != 100 {
			t.Fatalf("node %d: %d frames, want 1 of 100 messages", n.id, len(frames))
		}
		if st := n.tr.Stats(); st.ReceivedFrames != 1 || st.ReceivedMessages != 100 {
			t.Fatalf("node %d received %+v", n.id, st)
		}
	}
	a.tr.Close() // waits for the peer goroutines: their counters are final
	for _, n := range []*node{b, d} {
		if ps := peerStats(t, a.tr, n.id); ps.Frames != 1 || ps.Messages != 100 {
			t.Fatalf("stats for %d: %+v", n.id, ps)
		}
	}
}

// TestDeadPeerDoesNotBlockOthers sends to a node nothing listens for and to
// a live one: the live one gets everything, the dead one is reported.
func TestDeadPeerDoesNotBlockOthers(t *testing.T) {
	var c cluster
	a := newNode(t, &c, 1, 1, nil)
	live := newNode(t, &c, 1, 3, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.set(2, ln.Addr().String())
	ln.Close() // nothing listens there now

	var want []key
	for i := range uint64(200) {
		a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgApp, 1, 2, i)), env(1, msg(pb.MsgApp, 1, 3, i))})
		want = append(want, key{1, i})
	}
	if diff := cmp.Diff(want, keys(live.messages(t, len(want)))); diff != "" {
		t.Fatalf("live peer got (-want +got):\n%s", diff)
	}
	a.unreachable.wait(t, "node 2 unreachable", func(ns []uint64) bool { return slices.Contains(ns, 2) })
	if slices.Contains(a.unreachable.all(), 3) {
		t.Fatal("live node 3 reported unreachable")
	}
	ps := peerStats(t, a.tr, 2)
	if ps.Failures == 0 || ps.Connected || ps.LastError == nil || ps.Messages != 0 {
		t.Fatalf("dead peer stats %+v", ps)
	}
	if a.tr.Reachable(2) || !a.tr.Reachable(3) || !a.tr.Reachable(4) {
		t.Fatalf("reachable: dead node 2 %v, live node 3 %v, node 4 never sent to %v", a.tr.Reachable(2), a.tr.Reachable(3), a.tr.Reachable(4))
	}
	if a.tr.UpFor(2) != 0 || a.tr.UpFor(3) <= 0 || a.tr.UpFor(4) != 0 {
		t.Fatalf("up for: dead node 2 %v, live node 3 %v, node 4 never sent to %v", a.tr.UpFor(2), a.tr.UpFor(3), a.tr.UpFor(4))
	}
}

// TestStalledPeerDoesNotBlockOthers sends to a server that takes the
// stream and never reads it: its queue fills and drops, its write stalls
// and fails, and a third node gets every message meanwhile.
func TestStalledPeerDoesNotBlockOthers(t *testing.T) {
	var c cluster
	a := newNode(t, &c, 1, 1, func(cfg *transport.Config) {
		cfg.QueueMessages = 4
		cfg.WriteTimeout = 300 * time.Millisecond
	})
	live := newNode(t, &c, 1, 3, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	serve(t, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(func() { close(release) }) // runs before the server closes
	c.set(2, ln.Addr().String())

	big := make([]byte, 256<<10)
	var want []key
	for i := uint64(0); ; i++ {
		m := msg(pb.MsgApp, 1, 2, i)
		m.Entries = []*pb.Entry{{Index: proto.Uint64(i), Data: big}}
		a.tr.Send([]raftlog.Envelope{env(1, m), env(1, msg(pb.MsgApp, 1, 3, i))})
		want = append(want, key{1, i})
		live.messages(t, len(want))
		ps := peerStats(t, a.tr, 2)
		if ps.Dropped > 0 && ps.Failures > 0 && ps.LastError != nil && strings.Contains(ps.LastError.Error(), "stalled") {
			break
		}
	}
	if diff := cmp.Diff(want, keys(live.messages(t, len(want)))); diff != "" {
		t.Fatalf("live peer got (-want +got):\n%s", diff)
	}
	if !slices.Contains(a.unreachable.all(), 2) {
		t.Fatal("stalled node 2 not reported unreachable")
	}
}

// TestQueueOverflowDropsAndCounts holds a peer's goroutine in Resolve, so
// nothing leaves its queue, and overfills it.
func TestQueueOverflowDropsAndCounts(t *testing.T) {
	var c cluster
	b := newNode(t, &c, 1, 2, nil)
	release := make(chan struct{})
	resolve := func(node uint64) (string, bool) {
		<-release
		return c.resolve(node)
	}
	a := newNode(t, &c, 1, 1, func(cfg *transport.Config) {
		cfg.Resolve = resolve
		cfg.QueueMessages = 3
		cfg.QueueBytes = 4096
	})
	defer close(release) // before a closes
	big := msg(pb.MsgApp, 1, 2, 99)
	big.Entries = []*pb.Entry{{Data: make([]byte, 5000)}}
	a.tr.Send([]raftlog.Envelope{
		env(1, msg(pb.MsgApp, 1, 2, 1)),
		env(1, big), // larger than the queue's bytes
		env(1, msg(pb.MsgApp, 1, 2, 2)),
		env(1, msg(pb.MsgApp, 1, 2, 3)),
		env(7, msg(pb.MsgSnap, 1, 2, 4)), // the queue is full
		env(1, msg(pb.MsgApp, 1, 2, 5)),
	})
	// Dropping is synchronous: everything is reported when Send returns.
	ps := peerStats(t, a.tr, 2)
	if ps.Queued != 3 || ps.Dropped != 3 {
		t.Fatalf("stats %+v, want 3 queued and 3 dropped", ps)
	}
	if diff := cmp.Diff([]snapReport{{7, 2, true}}, a.snaps.all()); diff != "" {
		t.Fatalf("snapshot reports (-want +got):\n%s", diff)
	}
	if !slices.Contains(a.unreachable.all(), 2) {
		t.Fatal("overflow not reported as unreachable")
	}
	release <- struct{}{} // let the peer connect: the queued three go out
	if diff := cmp.Diff([]key{{1, 1}, {1, 2}, {1, 3}}, keys(b.messages(t, 3))); diff != "" {
		t.Fatalf("delivered (-want +got):\n%s", diff)
	}
}

// rawSend opens a stream to addr with a plain Connect client, sends
// frames, and returns how the receiver ended it.
func rawSend(t *testing.T, addr string, frames ...*peerv1.SendRequest) error {
	t.Helper()
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: p}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cs, err := peerv1connect.NewRaftServiceClient(hc, "http://"+addr).Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := cs.Send(f); err != nil {
			break // the receiver ended the stream; CloseAndReceive says why
		}
	}
	_, err = cs.CloseAndReceive()
	return err
}

func encode(t *testing.T, m *pb.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReceiverRefusesBadFrames(t *testing.T) {
	var c cluster
	b := newNode(t, &c, 7, 2, func(cfg *transport.Config) {
		cfg.Allowed = func(node uint64) bool { return node != 9 }
	})
	good := &peerv1.RaftEnvelope{Group: 1, Message: encode(t, msg(pb.MsgApp, 1, 2, 1))}
	cases := []struct {
		name  string
		frame *peerv1.SendRequest
		code  connect.Code
		text  string
	}{
		{"wrong cluster", &peerv1.SendRequest{ClusterId: 8, From: 1, To: 2, Messages: []*peerv1.RaftEnvelope{good}},
			connect.CodeFailedPrecondition, "frame for cluster 8 node 2 reached cluster 7 node 2: check --initial-cluster"},
		{"wrong node", &peerv1.SendRequest{ClusterId: 7, From: 1, To: 3, Messages: []*peerv1.RaftEnvelope{good}},
			connect.CodeFailedPrecondition, "frame for cluster 7 node 3 reached cluster 7 node 2"},
		{"from itself", &peerv1.SendRequest{ClusterId: 7, From: 2, To: 2},
			connect.CodeFailedPrecondition, "two nodes share an id"},
		{"removed node", &peerv1.SendRequest{ClusterId: 7, From: 9, To: 2},
			connect.CodePermissionDenied, "node 9 is not a member of cluster 7"},
		{"garbage after a good message", &peerv1.SendRequest{ClusterId: 7, From: 1, To: 2, Messages: []*peerv1.RaftEnvelope{
			good, {Group: 1, Message: []byte{0xff, 0xff, 0xff}}}},
			connect.CodeInvalidArgument, "message 1 of group 1"},
		{"message for another node", &peerv1.SendRequest{ClusterId: 7, From: 1, To: 2, Messages: []*peerv1.RaftEnvelope{
			{Group: 1, Message: encode(t, msg(pb.MsgApp, 1, 3, 1))}}},
			connect.CodeInvalidArgument, "is from 1 to 3 in a frame from 1 to 2"},
		{"group zero", &peerv1.SendRequest{ClusterId: 7, From: 1, To: 2, Messages: []*peerv1.RaftEnvelope{
			{Group: 0, Message: good.GetMessage()}}},
			connect.CodeInvalidArgument, "group 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := rawSend(t, b.addr, tc.frame)
			if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v, want %v containing %q", err, tc.code, tc.text)
			}
		})
	}
	if got := b.frames.all(); len(got) != 0 {
		t.Fatalf("refused frames delivered %d batches", len(got))
	}
	if st := b.tr.Stats(); st.Refused != uint64(len(cases)) || st.ReceivedMessages != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A good stream still works, and an empty frame delivers nothing.
	if err := rawSend(t, b.addr, &peerv1.SendRequest{ClusterId: 7, From: 1, To: 2},
		&peerv1.SendRequest{ClusterId: 7, From: 1, To: 2, Messages: []*peerv1.RaftEnvelope{good}}); err != nil {
		t.Fatal(err)
	}
	if got := b.frames.all(); len(got) != 1 || len(got[0]) != 1 {
		t.Fatalf("delivered %v", got)
	}
}

// TestWrongClusterIsReportedToTheSender runs a transport against a node of
// another cluster: the sender's stream fails with the receiver's reason.
func TestWrongClusterIsReportedToTheSender(t *testing.T) {
	var c cluster
	a := newNode(t, &c, 8, 1, nil)
	b := newNode(t, &c, 7, 2, nil)
	resendUntil(t, func() { a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgHeartbeat, 1, 2, 0))}) }, func() bool {
		return slices.Contains(a.unreachable.all(), 2)
	})
	// The failure is recorded before it is reported.
	ps := peerStats(t, a.tr, 2)
	if connect.CodeOf(ps.LastError) != connect.CodeFailedPrecondition || !strings.Contains(ps.LastError.Error(), "check --initial-cluster") {
		t.Fatalf("sender's last error %v", ps.LastError)
	}
	if got := b.frames.all(); len(got) != 0 {
		t.Fatalf("delivered %d frames across clusters", len(got))
	}
}

// resendUntil calls send every few milliseconds, as raft's heartbeats
// would, until done holds. Messages to a peer without a stream are
// dropped, so a test waiting for one to come back must resend.
func resendUntil(t *testing.T, send func(), done func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitLimit)
	for !done() {
		send()
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("gave up resending")
		}
	}
}

func TestReconnectsAfterPeerRestart(t *testing.T) {
	var c cluster
	a := newNode(t, &c, 1, 1, nil)
	b := newNode(t, &c, 1, 2, nil)
	a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgApp, 1, 2, 1))})
	b.messages(t, 1)

	if err := b.srv.Close(); err != nil {
		t.Fatal(err)
	}
	resendUntil(t, func() { a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgHeartbeat, 1, 2, 0))}) }, func() bool {
		return slices.Contains(a.unreachable.all(), 2)
	})
	if up := a.tr.UpFor(2); up != 0 {
		t.Fatalf("node 2 down, yet up for %v", up)
	}

	restarted := time.Now()
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	b.serve(t, ln)
	resendUntil(t, func() { a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgApp, 1, 2, 2))}) }, func() bool {
		for _, e := range flatten(b.frames.all()) {
			if e.Msg.GetIndex() == 2 {
				return true
			}
		}
		return false
	})
	if ps := peerStats(t, a.tr, 2); ps.Failures == 0 || !ps.Connected || ps.Dropped == 0 {
		t.Fatalf("stats after restart %+v", ps)
	}
	if !a.tr.Reachable(2) {
		t.Fatal("node 2 unreachable after its stream reopened")
	}
	// Up since the new stream opened, not since the first one.
	if up := a.tr.UpFor(2); up <= 0 || up > time.Since(restarted) {
		t.Fatalf("node 2 up for %v, but it came back %v ago", up, time.Since(restarted))
	}
}

// TestPeerAddressChanges moves a peer to a new address: the next stream
// resolves it again.
func TestPeerAddressChanges(t *testing.T) {
	var c cluster
	a := newNode(t, &c, 1, 1, nil)
	b := newNode(t, &c, 1, 2, nil)
	a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgApp, 1, 2, 1))})
	b.messages(t, 1)
	if err := b.srv.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.serve(t, ln)
	c.set(2, ln.Addr().String())
	resendUntil(t, func() { a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgApp, 1, 2, 2))}) }, func() bool {
		return len(flatten(b.frames.all())) >= 2
	})
	if ps := peerStats(t, a.tr, 2); ps.Addr != ln.Addr().String() {
		t.Fatalf("peer address %q, want %q", ps.Addr, ln.Addr())
	}
}

func TestSnapshotStatus(t *testing.T) {
	var c cluster
	a := newNode(t, &c, 1, 1, nil)
	b := newNode(t, &c, 1, 2, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.set(3, ln.Addr().String())
	ln.Close()

	snap := func(to uint64) *pb.Message {
		m := msg(pb.MsgSnap, 1, to, 0)
		m.Snapshot = &pb.Snapshot{Data: []byte("state"), Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(10), Term: proto.Uint64(1)}}
		return m
	}
	a.tr.Send([]raftlog.Envelope{env(5, snap(2)), env(6, snap(3)), env(5, msg(pb.MsgApp, 1, 2, 11))})
	got := b.messages(t, 2)
	if got[0].Msg.GetType() != pb.MsgSnap || string(got[0].Msg.GetSnapshot().GetData()) != "state" {
		t.Fatalf("delivered %v", got[0].Msg)
	}
	evs := a.snaps.wait(t, "both snapshot reports", func(rs []snapReport) bool { return len(rs) >= 2 })
	want := map[snapReport]bool{{5, 2, false}: true, {6, 3, true}: true}
	for _, r := range evs {
		if !want[r] {
			t.Fatalf("snapshot reports %+v", evs)
		}
	}
}

func TestCloseEndsInboundStreams(t *testing.T) {
	var c cluster
	a := newNode(t, &c, 1, 1, nil)
	b := newNode(t, &c, 1, 2, nil)
	a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgApp, 1, 2, 1))})
	b.messages(t, 1)
	// b's inbound stream from a stays open; closing b's transport ends it,
	// so the server shuts down without waiting for a.
	b.tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	a.tr.Close()
	a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgApp, 1, 2, 2))}) // dropped, no panic
}

func TestConfigValidate(t *testing.T) {
	cfg := transport.Config{QueueBytes: transport.MaxFrameBytes, QueueMessages: -1, MinBackoff: time.Second, MaxBackoff: time.Millisecond}
	err := cfg.Validate()
	for _, want := range []string{"NodeID", "Resolve", "Deliver", "QueueMessages", "QueueBytes", "MinBackoff"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want a problem with %s", err, want)
		}
	}
	if _, err := transport.New(cfg); err == nil {
		t.Fatal("New accepted an invalid config")
	}
}

// BenchmarkSendHeartbeats sends the heartbeats of 1000 groups to two peers
// per Send, as a host leading them all does each tick. It reports how many
// frames and drops that took per Send.
func BenchmarkSendHeartbeats(b *testing.B) {
	var c cluster
	a := benchNode(b, &c, 1)
	benchNode(b, &c, 2)
	benchNode(b, &c, 3)
	var envs []raftlog.Envelope
	for g := uint64(1); g <= 1000; g++ {
		envs = append(envs, env(g, msg(pb.MsgHeartbeat, 1, 2, 0)), env(g, msg(pb.MsgHeartbeat, 1, 3, 0)))
	}
	b.ReportAllocs()
	for b.Loop() {
		a.Send(envs)
	}
	b.StopTimer()
	a.Close()
	var frames, dropped uint64
	for _, ps := range a.Stats().Peers {
		frames += ps.Frames
		dropped += ps.Dropped
	}
	b.ReportMetric(float64(frames)/float64(b.N), "frames/op")
	b.ReportMetric(float64(dropped)/float64(b.N), "dropped/op")
}

func benchNode(b *testing.B, c *cluster, id uint64) *transport.Transport {
	b.Helper()
	tr, err := transport.New(transport.Config{ClusterID: 1, NodeID: id, Resolve: c.resolve, Deliver: func([]raftlog.Envelope) {}})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	c.set(id, ln.Addr().String())
	mux := http.NewServeMux()
	mux.Handle(tr.Handler())
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: p}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	b.Cleanup(tr.Close)
	return tr
}
