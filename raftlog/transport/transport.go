package transport

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rewind-io/rewind/raftlog"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

const (
	// MaxFrameBytes bounds one received frame (encoded SendRequest). A
	// stream that sends a bigger one ends with ResourceExhausted.
	MaxFrameBytes = 256 << 20
	// frameHeaderMax bounds the bytes of a frame that are not messages:
	// three varint fields.
	frameHeaderMax = 3 * (1 + binary.MaxVarintLen64)

	defaultQueueMessages = 10000
	defaultQueueBytes    = 64 << 20
	defaultWriteTimeout  = 10 * time.Second
	defaultMinBackoff    = 50 * time.Millisecond
	defaultMaxBackoff    = time.Second
)

var (
	// ErrUnknownNode is the stream error of a peer Config.Resolve has no
	// address for.
	ErrUnknownNode = errors.New("transport: no address for node")
	// ErrClosed ends inbound streams once the transport is closed.
	ErrClosed = errors.New("transport: closed")
)

// Config configures a Transport. The zero value of every field but NodeID,
// Resolve and Deliver selects the default. Every function must be safe for
// concurrent use, return quickly and not call Send; Unreachable and
// SnapshotStatus are also called from inside Send, on its caller's
// goroutine (the host's are asynchronous, as they must be).
type Config struct {
	// ClusterID is the cluster's id. Frames carry it and a receiver refuses
	// frames for another cluster.
	ClusterID uint64
	// NodeID is this node's raft id. Required, non-zero.
	NodeID uint64
	// Resolve returns node's address ("host:port", or a base URL with an
	// http:// scheme). Required. It is called on every (re)connect, so an
	// address may change as nodes join; ok false means the node is not
	// known (yet): the stream fails with ErrUnknownNode and is retried.
	Resolve func(node uint64) (addr string, ok bool)
	// Deliver receives the messages of each inbound frame (the host's
	// Deliver). Required. It must not block; it may keep the slice and the
	// messages.
	Deliver func(envs []raftlog.Envelope)
	// Unreachable is told that a node could not be reached: its stream
	// failed, or its queue was full (the host's ReportUnreachable).
	// Default: nothing.
	Unreachable func(node uint64)
	// SnapshotStatus is told the fate of every MsgSnap: failed when it was
	// dropped or lost with a stream, not failed once written to a stream
	// (the host's ReportSnapshot). Default: nothing.
	SnapshotStatus func(group, node uint64, failed bool)
	// Allowed, if set, is asked about the sender of every inbound frame;
	// false ends the stream with PermissionDenied (a removed node).
	Allowed func(node uint64) bool
	// Authorize, if set, is asked about every inbound frame before
	// anything else: ctx is the stream's request context and from the
	// sender the frame claims. An error ends the stream (counted as
	// refused) before any message is decoded or delivered; it should be a
	// *connect.Error (Unauthenticated, PermissionDenied). The engine
	// checks from against the member the request authenticated as.
	Authorize func(ctx context.Context, from uint64) error
	// HTTPClient sends the streams. It must speak HTTP/2 to the URLs
	// Resolve gives (prior knowledge to http://). Requests' contexts are
	// marked with the node they are for (peerauth.WithTarget), for a
	// client that signs them or picks the TLS server name. Default: a client of its own doing exactly that,
	// with liveness pings; Close closes its idle connections.
	HTTPClient *http.Client
	// Dial opens the connections of the default HTTPClient. Default: TCP
	// with a 5 s timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// QueueMessages bounds each peer's queue in messages. Default 10000.
	QueueMessages int
	// QueueBytes bounds each peer's queue in encoded bytes, so one frame;
	// a message bigger than it is never sent. Default 64 MiB; at most
	// MaxFrameBytes less a few bytes of frame header.
	QueueBytes int
	// WriteTimeout bounds one frame write: a peer that takes longer to
	// accept it (it stopped reading) has its stream failed. Default 10 s.
	WriteTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnects, which
	// doubles after each failed stream. Defaults 50 ms and 1 s.
	MinBackoff, MaxBackoff time.Duration
	// Logger; default: a null logger.
	Logger hclog.Logger
}

// Validate reports every problem with c at once.
func (c *Config) Validate() error {
	var errs []error
	if c.NodeID == 0 {
		errs = append(errs, errors.New("transport: NodeID is required"))
	}
	if c.Resolve == nil {
		errs = append(errs, errors.New("transport: Resolve is required"))
	}
	if c.Deliver == nil {
		errs = append(errs, errors.New("transport: Deliver is required"))
	}
	if c.QueueMessages < 0 {
		errs = append(errs, fmt.Errorf("transport: negative QueueMessages %d", c.QueueMessages))
	}
	if c.QueueBytes < 0 || c.QueueBytes > MaxFrameBytes-frameHeaderMax {
		errs = append(errs, fmt.Errorf("transport: QueueBytes %d out of range [0, %d]", c.QueueBytes, MaxFrameBytes-frameHeaderMax))
	}
	if c.WriteTimeout < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 {
		errs = append(errs, errors.New("transport: negative WriteTimeout, MinBackoff or MaxBackoff"))
	}
	if c.MinBackoff != 0 && c.MaxBackoff != 0 && c.MinBackoff > c.MaxBackoff {
		errs = append(errs, fmt.Errorf("transport: MinBackoff %s above MaxBackoff %s", c.MinBackoff, c.MaxBackoff))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Unreachable == nil {
		c.Unreachable = func(uint64) {}
	}
	if c.SnapshotStatus == nil {
		c.SnapshotStatus = func(uint64, uint64, bool) {}
	}
	if c.QueueMessages == 0 {
		c.QueueMessages = defaultQueueMessages
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = defaultQueueBytes
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = defaultWriteTimeout
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = min(defaultMinBackoff, max(c.MaxBackoff, time.Millisecond))
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(defaultMaxBackoff, c.MinBackoff)
	}
	return c
}

// Transport sends raft messages to the other nodes of a cluster and serves
// the messages they send. It implements raftlog.Transport. Its methods are
// safe for concurrent use.
type Transport struct {
	cfg       Config
	log       hclog.Logger
	client    *http.Client
	ownClient bool
	// ctx is cancelled by Close; every peer goroutine and inbound stream
	// ends with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Lock order: mu before no other lock; a peer's mu is never held with
	// it.
	mu struct {
		sync.Mutex
		peers  map[uint64]*peer
		closed bool
	}
	recv struct {
		frames, messages, refused atomic.Uint64
	}
}

// New returns a transport with no streams open: a peer's stream opens on
// the first Send to it.
func New(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Transport{cfg: cfg, log: cfg.Logger, client: cfg.HTTPClient}
	if t.client == nil {
		t.client, t.ownClient = newH2CClient(cfg.Dial), true
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.mu.peers = make(map[uint64]*peer)
	return t, nil
}

// Liveness pings between members: a connection silent for PingInterval is
// pinged, and closed when the answer takes longer than PingTimeout. A peer
// that stops answering (a paused process, a cut link) is thus noticed
// within about 2 s, about as fast as raft elects a new leader: before,
// 5 s + 5 s kept forwarded requests on a dead connection for 10 s. A
// ping is a 17-byte frame per idle second per connection.
const (
	PingInterval = time.Second
	PingTimeout  = time.Second
)

// newH2CClient speaks HTTP/2 with prior knowledge over plain TCP. A peer
// that stops answering is noticed by pings even when nothing is being
// written (a client stream receives nothing but flow-control updates).
func newH2CClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	if dial == nil {
		dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Client{Transport: &http.Transport{
		Protocols:   p,
		DialContext: dial,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout:  PingInterval,
			PingTimeout:      PingTimeout,
			WriteByteTimeout: 10 * time.Second,
		},
	}}
}

// Send queues envs for their destinations (Msg.To) and returns at once; it
// keeps the messages but not envs. Messages that do not fit in their
// peer's queue, or whose peer has no open stream after a failure, are
// dropped and counted (Stats), and their snapshots reported failed; a full
// queue also reports its node unreachable (a failed stream already did).
// After Close everything is dropped.
func (t *Transport) Send(envs []raftlog.Envelope) {
	var tosBuf [8]uint64
	tos := tosBuf[:0]
	for _, e := range envs {
		if to := e.Msg.GetTo(); !slices.Contains(tos, to) {
			tos = append(tos, to)
		}
	}
	batch := make([]item, 0, len(envs)/max(len(tos), 1))
	for _, to := range tos {
		if to == 0 || to == t.cfg.NodeID {
			// Raft addresses no message to nobody or to itself here
			// (storage writes are synchronous): a bug upstream.
			t.log.Error("dropped messages to an invalid node", "to", to)
			continue
		}
		batch = batch[:0]
		for _, e := range envs {
			if e.Msg.GetTo() == to {
				batch = append(batch, item{group: e.Group, msg: e.Msg, size: itemSize(e.Group, e.Msg)})
			}
		}
		p := t.peer(to)
		if p == nil {
			return
		}
		p.enqueue(batch)
	}
}

// itemSize is the exact number of bytes a message adds to a SendRequest:
// its RaftEnvelope, tagged and length-prefixed.
func itemSize(group uint64, m *pb.Message) int {
	n := proto.Size(m)
	env := protowire.SizeTag(1) + protowire.SizeVarint(group) + protowire.SizeTag(2) + protowire.SizeBytes(n)
	return protowire.SizeTag(4) + protowire.SizeBytes(env)
}

// peer returns node's peer, starting it if need be; nil once closed.
func (t *Transport) peer(node uint64) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil
	}
	p, ok := t.mu.peers[node]
	if !ok {
		p = newPeer(t, node)
		t.mu.peers[node] = p
		t.wg.Add(1)
		go p.run()
	}
	return p
}

// RemovePeer stops node's stream and goroutine and forgets its counters
// (the node left the cluster). Messages queued for it are dropped without
// reports. A later Send to node starts it again.
func (t *Transport) RemovePeer(node uint64) {
	t.mu.Lock()
	p, ok := t.mu.peers[node]
	delete(t.mu.peers, node)
	t.mu.Unlock()
	if ok {
		p.cancel()
		<-p.done
	}
}

// Close stops every peer goroutine, ending its stream, ends inbound
// streams, and waits for the peer goroutines. Queued messages are dropped
// without reports (the host is closing too). Close is idempotent.
func (t *Transport) Close() {
	t.mu.Lock()
	t.mu.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	if t.ownClient {
		t.client.CloseIdleConnections()
	}
}

// Reachable reports false while node's stream is down: it failed (or could
// not be opened) and no new one is open yet. A node never sent to is
// reachable as far as the transport knows.
func (t *Transport) Reachable(node uint64) bool {
	t.mu.Lock()
	p, ok := t.mu.peers[node]
	t.mu.Unlock()
	if !ok {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.mu.down
}

// UpFor reports how long the streams to node have worked without a
// failure: 0 while it is down, and for a node never sent to. A node that
// just came back (or keeps crashing) has a short UpFor; the broker hands
// leadership only to a peer that has been up for a while.
func (t *Transport) UpFor(node uint64) time.Duration {
	t.mu.Lock()
	p, ok := t.mu.peers[node]
	t.mu.Unlock()
	if !ok {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.down || p.mu.upSince.IsZero() {
		return 0
	}
	return time.Since(p.mu.upSince)
}

// PeerStats describes the stream to one peer.
type PeerStats struct {
	Node uint64
	// Addr is the address of the current or last stream.
	Addr string
	// Connected is set while a stream is open and its last write
	// succeeded.
	Connected bool
	// Frames, Messages and Bytes count what was written to streams
	// (Bytes: encoded messages, without frame headers).
	Frames, Messages, Bytes uint64
	// Dropped counts messages never written: queue full, peer down, or
	// lost with a failed stream.
	Dropped uint64
	// Failures counts streams that failed or could not be opened.
	Failures uint64
	// Queued is the number of messages waiting for the next write.
	Queued int
	// LastError is why the last stream failed; nil if none has.
	LastError error
}

// Stats describes the transport.
type Stats struct {
	// Peers has one entry per peer sent to, by node id.
	Peers []PeerStats
	// ReceivedFrames and ReceivedMessages count what inbound streams
	// delivered (a frame without messages is not counted); Refused counts
	// inbound streams ended for a bad frame.
	ReceivedFrames, ReceivedMessages, Refused uint64
}

// Peer returns the stats of node, if it was sent to.
func (s Stats) Peer(node uint64) (PeerStats, bool) {
	i, ok := slices.BinarySearchFunc(s.Peers, node, func(p PeerStats, n uint64) int { return cmp.Compare(p.Node, n) })
	if !ok {
		return PeerStats{}, false
	}
	return s.Peers[i], true
}

// Stats returns current counters. The caller owns the result.
func (t *Transport) Stats() Stats {
	t.mu.Lock()
	peers := make([]*peer, 0, len(t.mu.peers))
	for _, p := range t.mu.peers {
		peers = append(peers, p)
	}
	t.mu.Unlock()
	s := Stats{
		ReceivedFrames:   t.recv.frames.Load(),
		ReceivedMessages: t.recv.messages.Load(),
		Refused:          t.recv.refused.Load(),
	}
	for _, p := range peers {
		s.Peers = append(s.Peers, p.stats())
	}
	slices.SortFunc(s.Peers, func(a, b PeerStats) int { return cmp.Compare(a.Node, b.Node) })
	return s
}
