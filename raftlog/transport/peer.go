package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/gen/rewind/peer/v1/peerv1connect"
	"github.com/rewind-io/rewind/internal/peerauth"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// item is one queued message.
type item struct {
	group uint64
	msg   *pb.Message
	// size is the message's exact share of a frame (itemSize).
	size int
	// dropped marks a message that was not queued or not written.
	dropped bool
}

// peer is the sending side of the stream to one node. Its goroutine (run)
// owns the stream; Send only touches the queue.
type peer struct {
	t      *Transport
	id     uint64
	log    hclog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// wake holds a token when Send had messages for the peer, queued or
	// dropped: it is the demand that makes a drained queue go out, and
	// makes a failed peer reconnect (a node nobody sends to is not
	// redialled).
	wake chan struct{}

	mu struct {
		sync.Mutex
		// Invariant: bytes is the sum of the sizes in queue,
		// len(queue) <= QueueMessages and bytes <= QueueBytes.
		queue []item
		bytes int
		// down is set when a stream fails and cleared once the next one
		// is open; meanwhile Send drops instead of queueing.
		down bool
		// upSince is when the current run of working streams began
		// (zero: down, or never opened); a stream that fails ends it.
		upSince time.Time
		stats   PeerStats
	}

	// Owned by run.
	spare []item
	// lastErr is the text of the last failure logged as a warning, so a
	// peer failing the same way again and again warns once.
	lastErr string
}

func newPeer(t *Transport, node uint64) *peer {
	ctx, cancel := context.WithCancel(t.ctx)
	p := &peer{
		t: t, id: node, log: t.log.With("peer", node),
		ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	p.mu.stats.Node = node
	return p
}

func (p *peer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// enqueue queues what fits of batch and reports the rest. It never blocks
// on the network.
func (p *peer) enqueue(batch []item) {
	cfg := &p.t.cfg
	dropped, full := 0, false
	p.mu.Lock()
	down := p.mu.down
	for i := range batch {
		it := &batch[i]
		if down || len(p.mu.queue) >= cfg.QueueMessages || p.mu.bytes+it.size > cfg.QueueBytes {
			it.dropped = true
			dropped++
			full = full || !down
			continue
		}
		p.mu.queue = append(p.mu.queue, *it)
		p.mu.bytes += it.size
	}
	p.mu.stats.Dropped += uint64(dropped)
	p.mu.Unlock()
	p.poke()
	if dropped == 0 {
		return
	}
	if full {
		// Like etcd's rafthttp: a full queue is a peer that cannot keep
		// up, and telling raft makes its leaders stop sending
		// optimistically. A peer that is down was reported when its
		// stream failed, and cannot have acknowledged anything since.
		cfg.Unreachable(p.id)
	}
	for _, it := range batch {
		if !it.dropped {
			continue
		}
		if it.size > cfg.QueueBytes {
			p.log.Error("message larger than the queue can never be sent", "group", it.group, "type", it.msg.GetType().String(), "bytes", it.size, "queue-bytes", cfg.QueueBytes)
		}
		if it.msg.GetType() == pb.MsgSnap {
			cfg.SnapshotStatus(it.group, p.id, true)
		}
	}
}

// take removes and returns everything queued.
func (p *peer) take() []item {
	p.mu.Lock()
	q := p.mu.queue
	p.mu.queue, p.spare = p.spare[:0], nil
	p.mu.bytes = 0
	p.mu.Unlock()
	return q
}

// recycle keeps q's array for the next take, without its references.
func (p *peer) recycle(q []item) {
	clear(q)
	p.spare = q[:0]
}

func (p *peer) stats() PeerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.mu.stats
	s.Queued = len(p.mu.queue)
	return s
}

// run keeps one stream open to the peer and writes one frame per wake with
// everything queued, until the peer's context ends.
func (p *peer) run() {
	defer p.t.wg.Done()
	defer close(p.done)
	var s *stream
	defer func() {
		if s != nil {
			s.close()
		}
	}()
	var backoff time.Duration
	for {
		if s == nil {
			var err error
			if s, err = p.connect(); err != nil {
				if p.ctx.Err() != nil {
					return
				}
				p.fail(err, nil)
				backoff = p.nextBackoff(backoff)
				if !p.await(backoff) {
					return
				}
				continue
			}
		}
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
		items := p.take()
		if len(items) == 0 {
			p.recycle(items)
			continue
		}
		if err := s.send(items, p.log); err != nil {
			lived := time.Since(s.opened)
			s.close()
			s = nil
			if p.ctx.Err() != nil {
				return
			}
			p.fail(err, items)
			if lived > p.t.cfg.MaxBackoff {
				backoff = 0 // it was a healthy stream: retry soon
			}
			backoff = p.nextBackoff(backoff)
			if !p.await(backoff) {
				return
			}
			continue
		}
		p.sent(items)
		p.recycle(items)
	}
}

func (p *peer) nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return p.t.cfg.MinBackoff
	}
	return min(2*d, p.t.cfg.MaxBackoff)
}

// await waits d, then for demand. It reports false when the peer stops.
func (p *peer) await(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.ctx.Done():
		return false
	case <-timer.C:
	}
	select {
	case <-p.ctx.Done():
		return false
	case <-p.wake:
		return true
	}
}

// connect resolves the peer's address and opens a stream to it.
func (p *peer) connect() (*stream, error) {
	addr, ok := p.t.cfg.Resolve(p.id)
	if !ok {
		return nil, fmt.Errorf("%w %d", ErrUnknownNode, p.id)
	}
	p.mu.Lock()
	p.mu.stats.Addr = addr
	p.mu.Unlock()
	s, err := openStream(p.ctx, p.t, p.id, addr)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.mu.down = false
	if p.mu.upSince.IsZero() {
		p.mu.upSince = time.Now()
	}
	p.mu.stats.Connected = true
	p.mu.Unlock()
	p.log.Debug("stream open", "addr", addr)
	return s, nil
}

// sent accounts for a written frame and reports its snapshots.
func (p *peer) sent(items []item) {
	n, bytes := 0, 0
	for _, it := range items {
		if !it.dropped {
			n++
			bytes += it.size
		}
	}
	p.mu.Lock()
	p.mu.stats.Frames++
	p.mu.stats.Messages += uint64(n)
	p.mu.stats.Bytes += uint64(bytes)
	p.mu.stats.Dropped += uint64(len(items) - n)
	p.mu.stats.Connected = true
	p.mu.Unlock()
	if p.lastErr != "" {
		p.log.Info("stream working again")
		p.lastErr = ""
	}
	for _, it := range items {
		if it.msg.GetType() == pb.MsgSnap {
			p.t.cfg.SnapshotStatus(it.group, p.id, it.dropped)
		}
	}
}

// fail records a failed stream: lost are the messages of the frame that
// failed, if any. Everything queued is dropped with them, and Send drops
// until the next stream is open.
func (p *peer) fail(err error, lost []item) {
	p.mu.Lock()
	queued := p.mu.queue
	p.mu.queue, p.mu.bytes = nil, 0
	p.mu.down = true
	p.mu.upSince = time.Time{}
	p.mu.stats.Connected = false
	p.mu.stats.Failures++
	p.mu.stats.LastError = err
	p.mu.stats.Dropped += uint64(len(lost) + len(queued))
	addr := p.mu.stats.Addr
	p.mu.Unlock()
	if msg := err.Error(); msg != p.lastErr {
		p.lastErr = msg
		p.log.Warn("raft stream failed", "addr", addr, "dropped", len(lost)+len(queued), "error", err)
	} else {
		p.log.Debug("raft stream failed again", "addr", addr, "error", err)
	}
	p.t.cfg.Unreachable(p.id)
	for _, q := range [][]item{lost, queued} {
		for _, it := range q {
			if it.msg.GetType() == pb.MsgSnap {
				p.t.cfg.SnapshotStatus(it.group, p.id, true)
			}
		}
	}
}

// stream is one open RaftService.Send call.
type stream struct {
	cs     *connect.ClientStreamForClientSimple[peerv1.SendRequest, peerv1.SendResponse]
	cancel context.CancelFunc
	// watchdog cancels the call when a write takes longer than timeout.
	watchdog *time.Timer
	timeout  time.Duration
	opened   time.Time

	// Reused by every write: req names the cluster and both nodes, buf
	// holds the encoded messages, envs the envelopes pointing into it.
	req  peerv1.SendRequest
	buf  []byte
	ends []int
	envs []*peerv1.RaftEnvelope
}

// openStream starts a call to addr and writes a frame without messages,
// which returns once the connection is up and lets the receiver check the
// cluster and node ids before any message travels.
func openStream(ctx context.Context, t *Transport, node uint64, addr string) (*stream, error) {
	base := addr
	if !strings.Contains(addr, "://") {
		base = "http://" + addr
	}
	client := peerv1connect.NewRaftServiceClient(t.client, base)
	ctx, cancel := context.WithCancel(peerauth.WithTarget(ctx, node))
	cs, err := client.Send(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &stream{cs: cs, cancel: cancel, timeout: t.cfg.WriteTimeout, opened: time.Now()}
	s.watchdog = time.AfterFunc(s.timeout, cancel)
	s.watchdog.Stop()
	s.req.ClusterId, s.req.From, s.req.To = t.cfg.ClusterID, t.cfg.NodeID, node
	if err := s.write(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// send writes items as one frame. A message that fails to encode (none
// should) is marked dropped and left out.
func (s *stream) send(items []item, log hclog.Logger) error {
	var opts proto.MarshalOptions
	s.buf, s.ends = s.buf[:0], s.ends[:0]
	for i := range items {
		start := len(s.buf)
		var err error
		s.buf, err = opts.MarshalAppend(s.buf, items[i].msg)
		if err != nil {
			log.Error("cannot encode raft message", "group", items[i].group, "error", err)
			items[i].dropped = true
			s.buf = s.buf[:start]
		}
		s.ends = append(s.ends, len(s.buf))
	}
	msgs := s.envs[:0]
	start := 0
	for i, end := range s.ends {
		if !items[i].dropped {
			if len(msgs) == len(s.envs) {
				s.envs = append(s.envs, new(peerv1.RaftEnvelope))
			}
			env := s.envs[len(msgs)]
			env.Group, env.Message = items[i].group, s.buf[start:end]
			msgs = s.envs[:len(msgs)+1]
		}
		start = end
	}
	s.req.Messages = msgs
	err := s.write()
	for _, env := range msgs {
		env.Message = nil
	}
	s.req.Messages = nil
	if cap(s.buf) > 4<<20 {
		s.buf = nil // do not pin one big frame's buffer
	}
	return err
}

// write sends s.req, failing the call if it takes longer than the timeout.
func (s *stream) write() error {
	s.watchdog.Reset(s.timeout)
	err := s.cs.Send(&s.req)
	if !s.watchdog.Stop() {
		return fmt.Errorf("transport: write stalled for %s", s.timeout)
	}
	if errors.Is(err, io.EOF) {
		// The receiver ended the call; its reason comes with the
		// response.
		s.watchdog.Reset(s.timeout)
		_, cerr := s.cs.CloseAndReceive()
		s.watchdog.Stop()
		if cerr != nil {
			return cerr
		}
		return errors.New("transport: peer ended the stream")
	}
	return err
}

// close abandons the call.
func (s *stream) close() {
	s.watchdog.Stop()
	s.cancel()
	_, _ = s.cs.CloseAndReceive()
}
