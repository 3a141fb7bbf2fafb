package cliente2e_test

// Gray failures seen from the client: a node that is paused (it accepts
// connections and answers nothing) or broken (it answers Unavailable). The
// client must move on to another node, and what it re-sends must be stored
// once.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// Gate modes.
const (
	gatePass        = iota // forward both ways
	gatePaused             // accept, hold what comes in, answer nothing: a SIGSTOPped node
	gateLoseAnswers        // forward requests, drop the answers: the node acts, the client never hears
)

// gate is a TCP proxy in front of a node that can be switched to behave
// like a paused node (connections are accepted, as the kernel of a stopped
// process does, but nothing moves until it resumes) without pausing the
// node for its other clients.
type gate struct {
	t      testing.TB
	ln     net.Listener
	target string
	addr   string
	mode   atomic.Int32
	mu     struct {
		sync.Mutex
		conns  []net.Conn
		closed bool
		// resumed is closed when the mode changes.
		resumed chan struct{}
	}
	wg sync.WaitGroup
}

func startGate(t testing.TB, target string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{t: t, ln: ln, target: strings.TrimPrefix(target, "http://"), addr: "http://" + ln.Addr().String()}
	g.mu.resumed = make(chan struct{})
	g.wg.Add(1)
	go g.accept()
	t.Cleanup(g.close)
	return g
}

func (g *gate) set(mode int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode.Store(mode)
	close(g.mu.resumed)
	g.mu.resumed = make(chan struct{})
}

// hold waits while the gate is paused; false once it is closed.
func (g *gate) hold() bool {
	for {
		g.mu.Lock()
		m, ch, closed := g.mode.Load(), g.mu.resumed, g.mu.closed
		g.mu.Unlock()
		if closed {
			return false
		}
		if m != gatePaused {
			return true
		}
		<-ch
	}
}

func (g *gate) accept() {
	defer g.wg.Done()
	for {
		in, err := g.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", g.target)
		if err != nil {
			in.Close()
			continue
		}
		g.mu.Lock()
		if g.mu.closed {
			g.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		g.mu.conns = append(g.mu.conns, in, out)
		g.mu.Unlock()
		g.wg.Add(2)
		go g.pipe(out, in, false)
		go g.pipe(in, out, true)
	}
}

// pipe copies src to dst; while the gate is paused it holds what it read,
// and with gateLoseAnswers it drops the answers.
func (g *gate) pipe(dst, src net.Conn, answers bool) {
	defer g.wg.Done()
	buf := make([]byte, 64<<10)
	for g.hold() {
		n, err := src.Read(buf)
		if n > 0 {
			if !g.hold() {
				return
			}
			if !(answers && g.mode.Load() == gateLoseAnswers) {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				tc.CloseWrite()
			}
			return
		}
	}
}

func (g *gate) close() {
	g.ln.Close()
	g.mu.Lock()
	g.mu.closed = true
	close(g.mu.resumed)
	g.mu.resumed = make(chan struct{})
	for _, c := range g.mu.conns {
		c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// noHang bounds a test step that, without the behaviour under test, would
// wait forever: it fails the test instead of hanging the package. It is no
// speed limit: the step needs a small fraction of it.
const noHang = 2 * time.Minute

// TestPublishMovesOnFromAPausedNode: a client connected to a node that
// stops answering (paused) publishes through its next node once an attempt
// times out, and the record is stored once.
func TestPublishMovesOnFromAPausedNode(t *testing.T) {
	s := startServer(t, "")
	g := startGate(t, s.addr)
	direct := client.New(s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	if _, err := direct.CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	c := client.New(g.addr+","+s.addr, client.WithPublishRetry(10, time.Millisecond, 500*time.Millisecond))
	if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("before"), IdempotencyKey: "k-before"}); err != nil {
		t.Fatal(err)
	}
	g.set(gatePaused)
	for i, v := range []string{"during-1", "during-2"} {
		if _, err := c.Publish(ctx, "t", client.Message{Value: []byte(v), IdempotencyKey: "k-" + v}); err != nil {
			t.Fatalf("publish %d while the node in use is paused: %v", i, err)
		}
	}
	got := values(readAll(t, direct, "t", client.Until(client.End())))
	slices.Sort(got)
	if want := []string{"before", "during-1", "during-2"}; !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
}

// TestPublishWhoseAnswerIsLostIsStoredOnce: the node in use stores a
// publish but its answer never arrives; the client re-sends the same
// request through the next node, and the idempotency key makes it a
// duplicate rather than a second record.
func TestPublishWhoseAnswerIsLostIsStoredOnce(t *testing.T) {
	s := startServer(t, "")
	g := startGate(t, s.addr)
	direct := client.New(s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	if _, err := direct.CreateTopic(ctx, "t", client.WithPartitions(4)); err != nil {
		t.Fatal(err)
	}
	c := client.New(g.addr+","+s.addr, client.WithPublishRetry(10, time.Millisecond, 500*time.Millisecond))
	if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("warm-up"), IdempotencyKey: "k-0"}); err != nil {
		t.Fatal(err)
	}
	g.set(gateLoseAnswers)
	msgs := []client.Message{{Key: []byte("a"), Value: []byte("x"), IdempotencyKey: "k-x"}, {Value: []byte("y"), IdempotencyKey: "k-y"}}
	if _, err := c.Publish(ctx, "t", msgs...); err != nil {
		t.Fatal(err)
	}
	got := values(readAll(t, direct, "t", client.Until(client.End())))
	slices.Sort(got)
	if want := []string{"warm-up", "x", "y"}; !slices.Equal(got, want) {
		t.Fatalf("stored %v, want each record once: %v", got, want)
	}
}

// TestPublishMovesOnFromAnUnavailableNode: a node that answers every
// request with Unavailable (a draining node here; a node with a broken
// disk answers the same) is left for the next one.
func TestPublishMovesOnFromAnUnavailableNode(t *testing.T) {
	sick, well := startServer(t, ""), startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	for _, s := range []*server{sick, well} {
		if _, err := client.New(s.addr).CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
			t.Fatal(err)
		}
	}
	sick.node.Drain()
	c := client.New(sick.addr+","+well.addr, client.WithPublishRetry(3, time.Millisecond, 0))
	for _, v := range []string{"a", "b", "c"} {
		if _, err := c.Publish(ctx, "t", client.Message{Value: []byte(v)}); err != nil {
			t.Fatalf("publish %s: %v", v, err)
		}
	}
	if got := values(readAll(t, client.New(well.addr), "t", client.Until(client.End()))); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("the healthy node stored %v", got)
	}
}

// hinting is a node that refuses every publish with Unavailable, naming
// node 7 as the partition's leader, and lists node 7's address in its
// cluster status: what a node answers when it cannot reach the leader.
type hinting struct {
	rewindv1connect.UnimplementedPublishServiceHandler
	rewindv1connect.UnimplementedClusterServiceHandler
	leader string // host:port
	byAddr bool   // name the leader's address too, and know no members
	asked  atomic.Int32
}

func (h *hinting) Publish(context.Context, *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
	h.asked.Add(1)
	e := connect.NewError(connect.CodeUnavailable, errors.New("cannot reach the leader of partition 0"))
	e.Meta().Set("Rewind-Leader", "7")
	if h.byAddr {
		e.Meta().Set("Rewind-Leader-Address", h.leader)
	}
	e.Meta().Set("Rewind-Not-Stored", "1")
	return nil, e
}

func (h *hinting) GetClusterStatus(context.Context, *rewindv1.GetClusterStatusRequest) (*rewindv1.GetClusterStatusResponse, error) {
	if h.byAddr {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("no member list here: the hint names the address"))
	}
	return &rewindv1.GetClusterStatusResponse{NodeId: 2, Nodes: []*rewindv1.NodeStatus{
		{Id: 2, Address: "127.0.0.1:1", Self: true}, {Id: 7, Address: h.leader},
	}}, nil
}

// TestPublishFollowsTheLeaderHint: a node that refuses a publish and names
// the partition's leader sends the client there, although the client was
// given only the refusing node: by its id (the address from the member
// list) or by its address (Rewind-Leader-Address, no lookup).
func TestPublishFollowsTheLeaderHint(t *testing.T) {
	for _, byAddr := range []bool{false, true} {
		t.Run(map[bool]string{false: "by id", true: "by address"}[byAddr], func(t *testing.T) {
			s := startServer(t, "")
			ctx, cancel := context.WithTimeout(context.Background(), noHang)
			defer cancel()
			if _, err := client.New(s.addr).CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
				t.Fatal(err)
			}
			h := &hinting{leader: strings.TrimPrefix(s.addr, "http://"), byAddr: byAddr}
			mux := http.NewServeMux()
			mux.Handle(rewindv1connect.NewPublishServiceHandler(h))
			mux.Handle(rewindv1connect.NewClusterServiceHandler(h))
			c := client.New(enginetest.ServeHandler(t, mux), client.WithPublishRetry(3, time.Millisecond, 0))
			for _, v := range []string{"a", "b"} {
				if _, err := c.Publish(ctx, "t", client.Message{Value: []byte(v)}); err != nil {
					t.Fatalf("publish %s: %v", v, err)
				}
			}
			if n := h.asked.Load(); n != 1 {
				t.Errorf("the hinting node was asked %d times; after its hint the client should use the leader", n)
			}
			if got := values(readAll(t, client.New(s.addr), "t", client.Until(client.End()))); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("the leader stored %v", got)
			}
		})
	}
}

// TestSubscribeMovesOnFromAPausedOrUnavailableNode: a stream opened through
// a client whose first node is paused, or answers Unavailable, is opened
// on the next node.
func TestSubscribeMovesOnFromAPausedOrUnavailableNode(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	direct := client.New(s.addr)
	if _, err := direct.CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishN(t, direct, "t", "v", 10)
	t.Run("paused", func(t *testing.T) {
		g := startGate(t, s.addr)
		g.set(gatePaused)
		c := client.New(g.addr+","+s.addr, client.WithStreamOpenTimeout(500*time.Millisecond))
		if got := readAll(t, c, "t", client.Until(client.End())); len(got) != 10 {
			t.Fatalf("replayed %d records, want 10", len(got))
		}
	})
	t.Run("unavailable", func(t *testing.T) {
		sick := startServer(t, "")
		if _, err := client.New(sick.addr).CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
			t.Fatal(err)
		}
		sick.node.Drain()
		c := client.New(sick.addr + "," + s.addr)
		if got := readAll(t, c, "t", client.Until(client.End())); len(got) != 10 {
			t.Fatalf("replayed %d records, want 10", len(got))
		}
	})
}

// TestGroupMemberJoinsThroughTheNextNode: a group member whose first node
// is paused joins through the next one and is given every partition.
func TestGroupMemberJoinsThroughTheNextNode(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	direct := client.New(s.addr)
	if _, err := direct.CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishTo(t, direct, "t", 0, "a", 2)
	publishTo(t, direct, "t", 1, "a", 2)
	g := startGate(t, s.addr)
	g.set(gatePaused)
	c := client.New(g.addr+","+s.addr, client.WithStreamOpenTimeout(500*time.Millisecond))
	sub, err := c.Subscribe(ctx, "t", client.Group("g"), client.From(client.Earliest()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r := &streamReader{t: t, sub: sub, seen: map[string]int{}}
	if got := sortedCopy(r.records(4)); !slices.Equal(got, []string{"0:a-0", "0:a-1", "1:a-0", "1:a-1"}) {
		t.Fatalf("member read %v", got)
	}
}

// TestLiveStreamMovesOnFromAPausedNode: a live stream whose node stops
// answering notices (the connection's health check goes unanswered) and
// goes on through the next node from its resume token: the records
// published meanwhile arrive once each, none again.
func TestLiveStreamMovesOnFromAPausedNode(t *testing.T) {
	s := startServer(t, "")
	g := startGate(t, s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	direct := client.New(s.addr)
	if _, err := direct.CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishTo(t, direct, "t", 0, "a", 3)
	c := client.New(g.addr+","+s.addr, client.WithHealthCheck(200*time.Millisecond, 300*time.Millisecond))
	sub, err := c.Subscribe(ctx, "t", client.From(client.Earliest()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r := &streamReader{t: t, sub: sub, seen: map[string]int{}}
	if got := r.records(3); !slices.Equal(got, []string{"0:a-0", "0:a-1", "0:a-2"}) {
		t.Fatalf("before the pause: %v", got)
	}
	g.set(gatePaused)
	publishTo(t, direct, "t", 0, "b", 2)
	publishTo(t, direct, "t", 1, "b", 2)
	if got := sortedCopy(r.records(4)); !slices.Equal(got, []string{"0:b-0", "0:b-1", "1:b-0", "1:b-1"}) {
		t.Fatalf("after the pause: %v", got)
	}
	if r.seen["reconnected"] < 1 {
		t.Fatalf("events %v: the stream went on without reconnecting", r.seen)
	}
}

// TestGeneratedIdempotencyKeys: with WithGeneratedIdempotencyKeys, records
// published without an idempotency key get one, so retries after lost
// answers store nothing twice (the control without it, in
// TestRetriesAfterLostResponsesDoNotDuplicate, does duplicate).
func TestGeneratedIdempotencyKeys(t *testing.T) {
	s := startServer(t, "")
	ctx := context.Background()
	if _, err := client.New(s.addr).CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	c := client.New(s.addr, client.WithGeneratedIdempotencyKeys(), client.WithPublishRetry(5, time.Millisecond, 0),
		client.WithConnectOptions(connect.WithInterceptors(dropFirstResponses(3))))
	for i := range 10 {
		msgs := make([]client.Message, 5)
		for j := range msgs {
			msgs[j].Value = []byte{byte(i), byte(j)}
		}
		msgs[0].IdempotencyKey = "mine-" + string(rune('a'+i))
		if _, err := c.Publish(ctx, "t", msgs...); err != nil {
			t.Fatal(err)
		}
	}
	got := readAll(t, client.New(s.addr), "t", client.Until(client.End()))
	if len(got) != 50 {
		t.Fatalf("%d records stored, want exactly 50", len(got))
	}
	keys := map[string]bool{}
	for _, r := range got {
		if r.IdempotencyKey == "" || keys[r.IdempotencyKey] {
			t.Fatalf("record %q has idempotency key %q (missing or repeated)", r.Value, r.IdempotencyKey)
		}
		keys[r.IdempotencyKey] = true
	}
	for i := range 10 {
		if !keys["mine-"+string(rune('a'+i))] {
			t.Fatalf("a key given by the caller was replaced: %v", keys)
		}
	}
}

// electedMeanwhile is a node that answers its first publish with
// Unavailable naming itself as the leader (by address), and stores the
// rest: a node whose forward to a paused leader was cut short by an
// election that it won.
type electedMeanwhile struct {
	rewindv1connect.UnimplementedPublishServiceHandler
	self  string // host:port
	asked atomic.Int32
}

func (h *electedMeanwhile) Publish(context.Context, *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
	if h.asked.Add(1) == 1 {
		e := connect.NewError(connect.CodeUnavailable, errors.New("forward to node 2 cut short: publish outcome unknown"))
		e.Meta().Set("Rewind-Leader", "1")
		e.Meta().Set("Rewind-Leader-Address", h.self)
		return nil, e
	}
	return &rewindv1.PublishResponse{Results: []*rewindv1.PublishResult{{}}}, nil
}

// TestPublishRetriesANodeThatHintsItself: a node that answers Unavailable
// naming itself as the leader (elected while it forwarded) gets the retry,
// with no penalty. Before, the client penalised it and moved on to the
// next node: in BenchmarkClusterGrayLatency that was the paused old
// leader, and the publish waited its whole 2 s attempt there.
func TestPublishRetriesANodeThatHintsItself(t *testing.T) {
	ln := enginetest.Listen(t)
	h := &electedMeanwhile{self: ln.Addr().String()}
	mux := http.NewServeMux()
	mux.Handle(rewindv1connect.NewPublishServiceHandler(h))
	url := enginetest.ServeHandler(t, mux, enginetest.WithListener(ln))
	other := &electedMeanwhile{}
	other.asked.Store(1) // stores every publish it gets
	omux := http.NewServeMux()
	omux.Handle(rewindv1connect.NewPublishServiceHandler(other))
	ourl := enginetest.ServeHandler(t, omux)

	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	c := client.New(url+","+ourl, client.WithPublishRetry(3, time.Millisecond, 0))
	for _, v := range []string{"a", "b"} {
		if _, err := c.Publish(ctx, "t", client.Message{Value: []byte(v), IdempotencyKey: v}); err != nil {
			t.Fatalf("publish %s: %v", v, err)
		}
	}
	if n, m := h.asked.Load(), other.asked.Load()-1; n != 3 || m != 0 {
		t.Fatalf("the self-hinting node was asked %d times and the other node %d; want 3 and 0", n, m)
	}
}

// publishRefuser is a node that refuses every publish with Unavailable, naming
// the leader at hint (by address) when hint is set.
type publishRefuser struct {
	rewindv1connect.UnimplementedPublishServiceHandler
	hint  string // host:port; "" for no hint
	asked atomic.Int32
}

func (h *publishRefuser) Publish(context.Context, *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
	h.asked.Add(1)
	e := connect.NewError(connect.CodeUnavailable, errors.New("cannot reach a leader"))
	if h.hint != "" {
		e.Meta().Set("Rewind-Leader", "3")
		e.Meta().Set("Rewind-Leader-Address", h.hint)
	}
	return nil, e
}

// servePublish serves h as a fake node and returns its host:port.
func servePublish(t *testing.T, h rewindv1connect.PublishServiceHandler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(rewindv1connect.NewPublishServiceHandler(h))
	return strings.TrimPrefix(enginetest.ServeHandler(t, mux), "http://")
}

// TestPublishTriesAThirdNodeAfterTwoRefusals: node A, cut off from a
// leader, hints node C; C, cut off from another leader the publish needs,
// refuses without a hint; the next attempt goes to B, not back to A (which
// would refuse again, as in BenchmarkGrayLatencyCutLink's 5.6 s publishes:
// each refusal costs its node's wait for a leader).
func TestPublishTriesAThirdNodeAfterTwoRefusals(t *testing.T) {
	cNode := &publishRefuser{}
	cAddr := servePublish(t, cNode)
	aNode := &publishRefuser{hint: cAddr}
	aAddr := servePublish(t, aNode)
	bNode := &electedMeanwhile{}
	bNode.asked.Store(1) // stores every publish it gets
	bAddr := servePublish(t, bNode)

	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	c := client.New("http://"+aAddr+",http://"+bAddr+",http://"+cAddr, client.WithPublishRetry(3, time.Millisecond, 0))
	if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("v"), IdempotencyKey: "v"}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if a, b, cc := aNode.asked.Load(), bNode.asked.Load()-1, cNode.asked.Load(); a != 1 || b != 1 || cc != 1 {
		t.Fatalf("nodes asked: A %d, B %d, C %d; want 1 each", a, b, cc)
	}
}

// electing refuses its first n publishes as a node in an election does
// (Unavailable, nothing stored, no leader named), then forwards them to
// the real node at to.
type electing struct {
	rewindv1connect.UnimplementedPublishServiceHandler
	n     int32
	asked atomic.Int32
	to    rewindv1connect.PublishServiceClient
}

func (r *electing) Publish(ctx context.Context, req *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
	if r.asked.Add(1) <= r.n {
		e := connect.NewError(connect.CodeUnavailable, errors.New("no leader known for partition 0"))
		e.Meta().Set("Rewind-Not-Stored", "1")
		return nil, e
	}
	return r.to.Publish(ctx, req)
}

// TestPublishRetriesForTheRetryWindow: refusals that come quickly one after
// the other (an election) are retried past the attempt count while the
// retry window lasts, and the record is stored once; WithPublishRetry
// alone makes the count exact. (Before the window, the default four
// attempts ran out during an election on a busy machine.) The window is
// set long here so that the outcome does not depend on the machine's
// speed; the default one is pinned below.
func TestPublishRetriesForTheRetryWindow(t *testing.T) {
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), noHang)
	defer cancel()
	if _, err := client.New(s.addr).CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	start := func(n int32) (*electing, string) {
		r := &electing{n: n, to: rewindv1connect.NewPublishServiceClient(http.DefaultClient, s.addr)}
		mux := http.NewServeMux()
		mux.Handle(rewindv1connect.NewPublishServiceHandler(r))
		return r, enginetest.ServeHandler(t, mux)
	}

	r, addr := start(6)
	c := client.New(addr, client.WithPublishRetry(3, time.Millisecond, 0), client.WithRetryWindow(time.Hour))
	if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("after the election")}); err != nil {
		t.Fatalf("publish through 6 refusals with a window: %v", err)
	}
	if n := r.asked.Load(); n != 7 {
		t.Errorf("asked %d times, want 7 (6 refusals, then stored)", n)
	}

	r, addr = start(6)
	c = client.New(addr, client.WithPublishRetry(3, time.Millisecond, 0))
	if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("never")}); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("publish with 3 attempts and no window through 6 refusals: %v, want Unavailable", err)
	}
	if n := r.asked.Load(); n != 3 {
		t.Errorf("asked %d times, want 3", n)
	}
	if got := values(readAll(t, client.New(s.addr), "t", client.Until(client.End()))); !slices.Equal(got, []string{"after the election"}) {
		t.Fatalf("stored %v", got)
	}
}
