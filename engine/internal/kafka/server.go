package kafka

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine/internal/broker"
)

// Defaults of Config.
const (
	DefaultMaxRequestBytes = 100 << 20
	DefaultMaxBatchBytes   = 64 << 20
	DefaultIdleTimeout     = 10 * time.Minute
	DefaultMaxConnections  = 1024
	DefaultWriteTimeout    = time.Minute
)

// Config configures the Kafka listener. The zero value of every field
// selects its default.
type Config struct {
	// Advertise is the host:port Metadata gives clients for this node.
	// Default: the listener's address.
	Advertise string
	// MaxRequestBytes bounds one request frame; a larger size prefix
	// closes the connection before anything is read. Default 100 MiB
	// (Kafka's socket.request.max.bytes).
	MaxRequestBytes int32
	// MaxBatchBytes bounds one record batch once decompressed; a batch
	// that would expand past it is refused with MESSAGE_TOO_LARGE and
	// decompression stops there. Default 64 MiB.
	MaxBatchBytes int
	// MaxConnections bounds the connections open at once; more are
	// closed as they arrive. Default 1024.
	MaxConnections int
	// WriteTimeout bounds writing one response: a client that stops
	// reading its responses is disconnected after it. Default 60 s.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection that sends no request for this long.
	// Default 10 minutes (Kafka's connections.max.idle.ms).
	IdleTimeout time.Duration
	// Logger gets the listener's messages. Default: none.
	Logger hclog.Logger
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Advertise != "" {
		if _, port, err := net.SplitHostPort(c.Advertise); err != nil {
			errs = append(errs, fmt.Errorf("kafka: advertise address %q: %w", c.Advertise, err))
		} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			errs = append(errs, fmt.Errorf("kafka: advertise address %q: the port must be 1 to 65535", c.Advertise))
		}
	}
	if c.MaxRequestBytes < 0 {
		errs = append(errs, fmt.Errorf("kafka: MaxRequestBytes %d is negative", c.MaxRequestBytes))
	}
	if c.MaxBatchBytes < 0 {
		errs = append(errs, fmt.Errorf("kafka: MaxBatchBytes %d is negative", c.MaxBatchBytes))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("kafka: MaxConnections %d is negative", c.MaxConnections))
	}
	if c.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("kafka: WriteTimeout %s is negative", c.WriteTimeout))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("kafka: IdleTimeout %s is negative", c.IdleTimeout))
	}
	return errors.Join(errs...)
}

// Server serves the Kafka protocol on one listener for one node's broker.
// Serve runs the accept loop; each connection has one goroutine, which
// reads a request, serves it and writes its response before it reads the
// next (Kafka's own broker also serves a connection's requests one at a
// time, which keeps a producer's pipelined batches in order). Close stops
// everything Serve started and waits for it.
type Server struct {
	b    *broker.Broker
	cfg  Config
	log  hclog.Logger
	node int32 // this node's id, as a Kafka broker id
	host string
	port int32

	groups *coordinator // the consumer groups (groups.go)

	ctx    context.Context // ends at Close: cancels every request
	cancel context.CancelFunc
	wg     sync.WaitGroup // Serve's connection goroutines
	mu     struct {
		sync.Mutex
		closed bool
		ln     net.Listener
		conns  map[net.Conn]struct{}
	}
}

// New returns a server of b's records for the listener ln will be (its
// address is the default Advertise).
func New(b *broker.Broker, addr net.Addr, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxBatchBytes == 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Advertise == "" {
		cfg.Advertise = addr.String()
	}
	host, port, err := net.SplitHostPort(cfg.Advertise)
	if err != nil {
		return nil, fmt.Errorf("kafka: advertise address %q: %w", cfg.Advertise, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("kafka: advertise address %q: %w", cfg.Advertise, err)
	}
	s := &Server{b: b, cfg: cfg, log: cfg.Logger, node: brokerID(b.NodeID()), host: host, port: int32(p)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.groups = newCoordinator(s)
	s.mu.conns = map[net.Conn]struct{}{}
	return s, nil
}

// brokerID is a Rewind node id as a Kafka broker id (an int32).
func brokerID(id uint64) int32 {
	if id > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(id)
}

// Serve accepts connections on ln until Close, and returns nil then; any
// other accept error ends it and is returned. Serve owns ln.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.mu.ln = ln
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		switch s.track(c) {
		case trackClosed:
			c.Close()
			return nil
		case trackFull:
			s.log.Warn("refusing a connection: too many open", "remote", c.RemoteAddr().String(), "max", s.cfg.MaxConnections)
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			s.serveConn(c)
		}()
	}
}

// Outcomes of track.
const (
	tracked = iota
	trackClosed
	trackFull
)

// track records a new connection, unless the server is closed or has
// MaxConnections open.
func (s *Server) track(c net.Conn) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.closed:
		return trackClosed
	case len(s.mu.conns) >= s.cfg.MaxConnections:
		return trackFull
	}
	s.mu.conns[c] = struct{}{}
	return tracked
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	c.Close()
}

// Close stops accepting, ends every request in flight (a long-polling
// Fetch returns at once), closes every connection and waits for their
// goroutines. Safe to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.mu.closed {
		s.mu.closed = true
		s.cancel()
		if s.mu.ln != nil {
			s.mu.ln.Close()
		}
		for c := range s.mu.conns {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.groups.close()
}

// serveConn serves one connection until it closes, sends something that
// is not a Kafka request this listener serves, or the server closes.
func (s *Server) serveConn(c net.Conn) {
	log := s.log.With("remote", c.RemoteAddr().String())
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	var frame []byte
	for {
		if err := c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout)); err != nil {
			return
		}
		f, err := readFrame(r, frame, s.cfg.MaxRequestBytes)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug("closing connection", "error", err)
			}
			return
		}
		frame = f[:0]
		req, err := parseRequest(f)
		if err != nil {
			log.Debug("closing connection", "error", err)
			return
		}
		req.host = host
		resp, release, err := s.handle(req)
		if err != nil {
			log.Error("closing connection", "error", err)
			return
		}
		if resp == nil { // Produce with acks=0: no response
			continue
		}
		out := getBuf()
		*out = appendResponse(*out, req, resp)
		release()
		err = c.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if err == nil {
			_, err = w.Write(*out)
		}
		putBuf(out)
		if err == nil && r.Buffered() == 0 {
			err = w.Flush()
		}
		if err != nil {
			log.Debug("closing connection", "error", err)
			return
		}
		if cap(frame) > 4<<20 {
			frame = nil
		}
	}
}

// handle serves one decoded request and returns its response at the
// request's version (nil: no response, for Produce with acks=0), and a
// function to call once the response is encoded (it returns the
// response's buffers to the pool).
func (s *Server) handle(req *request) (_ kmsg.Response, release func(), _ error) {
	var resp kmsg.Response
	release = func() {}
	switch m := req.msg.(type) {
	case nil: // ApiVersions at a version this listener does not know
		return apiVersions(req), release, nil
	case *kmsg.ApiVersionsRequest:
		resp = apiVersions(req)
	case *kmsg.MetadataRequest:
		resp = s.metadata(m)
	case *kmsg.ProduceRequest:
		r := s.produce(m)
		if m.Acks == 0 {
			return nil, release, nil
		}
		resp = r
	case *kmsg.FetchRequest:
		resp, release = s.fetch(m)
	case *kmsg.ListOffsetsRequest:
		resp = s.listOffsets(m)
	case *kmsg.OffsetForLeaderEpochRequest:
		resp = s.offsetForLeaderEpoch(m)
	case *kmsg.DescribeConfigsRequest:
		resp = s.describeConfigs(m)
	case *kmsg.DescribeClusterRequest:
		resp = s.describeCluster(m)
	case *kmsg.CreateTopicsRequest:
		resp = s.createTopics(m)
	case *kmsg.DeleteTopicsRequest:
		resp = s.deleteTopics(m)
	case *kmsg.FindCoordinatorRequest:
		resp = s.findCoordinator(m)
	case *kmsg.JoinGroupRequest:
		clientID := ""
		if req.clientID != nil {
			clientID = *req.clientID
		}
		resp = s.groups.joinGroup(s.ctx, req.host, clientID, m)
	case *kmsg.SyncGroupRequest:
		resp = s.groups.syncGroup(s.ctx, m)
	case *kmsg.HeartbeatRequest:
		resp = s.groups.heartbeat(m)
	case *kmsg.LeaveGroupRequest:
		resp = s.groups.leaveGroup(m)
	case *kmsg.OffsetCommitRequest:
		resp = s.groups.offsetCommit(s.ctx, m)
	case *kmsg.OffsetFetchRequest:
		resp = s.groups.offsetFetch(m)
	case *kmsg.ListGroupsRequest:
		resp = s.groups.listGroups(m)
	case *kmsg.DescribeGroupsRequest:
		resp = s.groups.describeGroups(m)
	case *kmsg.DeleteGroupsRequest:
		resp = s.groups.deleteGroups(s.ctx, m)
	default:
		// served and this switch disagree: a bug of ours.
		return nil, release, fmt.Errorf("kafka: %s is advertised but has no handler", kmsg.NameForKey(req.key))
	}
	resp.SetVersion(req.version)
	return resp, release, nil
}

// Advertise is the host:port Metadata gives clients for this node.
func (s *Server) Advertise() string { return s.cfg.Advertise }
