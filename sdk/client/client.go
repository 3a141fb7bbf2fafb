// Package client is the Go client of Rewind. It wraps the generated Connect
// clients with Go types: topics, publishing (one call or a batching
// Publisher), and subscriptions that read live, replay history, or both, with
// resume tokens to continue exactly where a stream stopped.
//
//	c := client.New("http://127.0.0.1:7070")
//	c.CreateTopic(ctx, "orders", client.WithPartitions(4))
//	c.Publish(ctx, "orders", client.Message{Key: []byte("o-1"), Value: []byte(`{"total":12}`)})
//	sub, _ := c.Subscribe(ctx, "orders", client.From(client.Time(t)), client.Until(client.End()))
//	for rec, err := range sub.Records() { ... }
//
// A Client is safe for concurrent use; a Subscription is not.
//
// Given several members of a cluster (New("a,b,c")), a client uses one at
// a time and leaves it for the next when it cannot be reached, gives no
// answer in time, or answers Unavailable — a node that is down, paused,
// cut off or broken:
//
//  1. A publish attempt is bounded (2 s, WithPublishRetry); after an
//     attempt that failed so, the next goes to another node, or to the
//     partition's leader when the refusal names it. The request is re-sent
//     unchanged: records with idempotency keys are stored once; a record
//     without one may be stored twice when an attempt's outcome was
//     unknown (WithGeneratedIdempotencyKeys gives each such record a key).
//     By default a call is retried 4 times and for at least 5 s
//     (WithRetryWindow), so refusals during an election are outlasted.
//     A request that may run twice with the effect of once (a read, or a
//     publish whose every record has an idempotency key) is also sent to
//     the next node when its node has not answered within 500 ms
//     (WithHedgeDelay), and the first answer is taken: a paused or
//     cut-off node costs that, not the attempt's 2 s.
//  2. The node that failed is skipped for a few seconds (WithNodePenalty)
//     by every call that picks a node.
//  3. A new stream that sends no first event in time (WithStreamOpenTimeout)
//     or is unavailable is opened on the next node. An open stream whose
//     server stops, restarts, dies, stops answering (the connection's
//     health check, WithHealthCheck) or becomes unavailable goes on (on
//     the next node, if given several) from its last resume token, or for
//     a group member by joining again, for up to a window
//     (ReconnectWithin); Next says so with Disconnected and Reconnected
//     events.
//  4. Topic, group, plugin and cluster calls pick their node the same way.
//     Those that may run twice — reads (list, describe, get, status, a
//     reset's or rebalance's plan), AlterTopic and Commit, which set a
//     value — are bounded and retried like a publish. The others (create,
//     delete, upload, an executed reset, RemoveNode, Rebalance) have no
//     attempt deadline and are sent again only when the first attempt
//     certainly did nothing: its connection could not be made, or the
//     node answered Unavailable with Rewind-Not-Stored. When their node
//     fails otherwise, the error is ErrOutcomeUnknown (errors.Is): a
//     repeat could say AlreadyExists or NotFound about the client's own
//     change, or apply a relative reset twice. TransferLeader goes to the
//     first address only (any member passes it on).
//
// A group member with AutoCommit that is stopped — its context cancelled,
// then Close — commits what it handed to the application before it leaves
// the group, so the next member does not deliver it again.
package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client/fastpath"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// Client talks to one Rewind server, or to the members of a cluster.
type Client struct {
	topics  rewindv1connect.TopicServiceClient
	pub     rewindv1connect.PublishServiceClient
	sub     rewindv1connect.SubscribeServiceClient
	groups  rewindv1connect.GroupServiceClient
	plugins rewindv1connect.PluginServiceClient
	cluster rewindv1connect.ClusterServiceClient
	auth    rewindv1connect.AuthServiceClient
	store   rewindv1connect.EventStoreServiceClient
	retry   retryPolicy
	// addr is the node's base URL ("http://host:port").
	addr string
	// openTimeout bounds opening a stream (WithStreamOpenTimeout); genKeys
	// gives records without an idempotency key one
	// (WithGeneratedIdempotencyKeys).
	openTimeout time.Duration
	genKeys     bool

	// opts made this client; peers are clients of other nodes it was
	// redirected to (subscriber groups live on their coordinator) or moves
	// on to.
	opts  []Option
	peers struct {
		sync.Mutex
		m map[string]*Client
	}
	// nodes are the nodes calls go to (nodes.go); members maps the
	// cluster's node ids to base URLs, learnt to follow leader hints.
	nodes   *nodes
	members struct {
		sync.Mutex
		m map[uint64]string
	}
}

// unreachable reports whether err means the node could not be reached or
// the connection broke (as opposed to an answer from the node).
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		// A connection whose health check went unanswered (WithHealthCheck);
		// net/http's error has no type, and Connect reports it as Internal
		// when it breaks a stream.
		strings.Contains(err.Error(), "http2: client connection lost")
}

// peer returns a client like c for another node (addr normalised).
func (c *Client) peer(addr string) *Client {
	c.peers.Lock()
	defer c.peers.Unlock()
	if p, ok := c.peers.m[addr]; ok {
		return p
	}
	if c.peers.m == nil {
		c.peers.m = map[string]*Client{}
	}
	p := New(addr, c.opts...)
	c.peers.m[addr] = p
	return p
}

// coordinatorOf returns the node a refused group request names as the
// groups' coordinator ("" if err is no such refusal).
func coordinatorOf(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable {
		return ""
	}
	return ce.Meta().Get("Rewind-Coordinator")
}

// followCoordinator runs a group request, and again on the node a refusal
// names as the coordinator (a cluster coordinates groups on one node).
func followCoordinator[T any](c *Client, call func(*Client) (T, error)) (T, error) {
	cur := c
	for i := 0; ; i++ {
		v, err := call(cur)
		addr := coordinatorOf(err)
		if addr == "" || i == 2 {
			return v, err
		}
		cur = c.peer(addr)
	}
}

// Protocol selects the wire protocol.
type Protocol int

// Protocols.
const (
	Connect Protocol = iota // the default
	GRPC
	GRPCWeb
)

type options struct {
	httpClient  connect.HTTPClient
	protocol    Protocol
	connectOpts []connect.ClientOption
	gzip        bool
	retry       retryPolicy
	penalty     time.Duration
	now         func() time.Time
	openTimeout time.Duration
	// healthIdle and healthTimeout configure the default transport's
	// HTTP/2 health checks (WithHealthCheck).
	healthIdle, healthTimeout time.Duration
	genKeys                   bool
	// tls configures the default transport's TLS (WithTLS).
	tls *tls.Config
	// penalties are nodes penalised from the start (WithPenalties).
	penalties map[string]time.Time
	// noFastPath sends unary calls over HTTP/2 (WithFastPath(false)).
	noFastPath bool
}

// Option configures a Client.
type Option func(*options)

// WithHTTPClient replaces the HTTP client. The default speaks HTTP/2 without
// TLS (h2c) to http:// addresses and HTTP/2 over TLS to https:// ones.
func WithHTTPClient(c connect.HTTPClient) Option { return func(o *options) { o.httpClient = c } }

// WithFastPath turns the unary fast path on (the default) or off. With
// it, the default transport sends unary calls (publishes, appends, key
// reads, admin calls) as frames on one HTTP/1.1 stream per node instead of
// as HTTP/2 requests: the server runs each as the request it describes,
// with the same checks, and answers at a fraction of HTTP/2's cost per
// call (docs/architecture.md, "The fast path"). Streams (Subscribe)
// always use HTTP/2, and so does every call to a server without the fast
// path. It has no effect with WithHTTPClient or a protocol other than
// Connect.
func WithFastPath(on bool) Option { return func(o *options) { o.noFastPath = !on } }

// WithTLS makes the client speak TLS with cfg (a server started with
// --tls-cert): the CA to verify the server with (RootCAs; default the
// system's), and a client certificate for a server that requires one
// (Certificates or GetClientCertificate). Addresses without a scheme then
// mean https://; an explicit http:// address stays plaintext. It has no
// effect on a client given WithHTTPClient: configure that client's
// transport instead. WithTLSFiles reads the same from PEM files.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithTLSFiles is WithTLS with a configuration read from PEM files: ca
// verifies the server (empty: the system roots), cert and key are the
// client certificate (both empty: none). A file that cannot be read makes
// every call fail with the reason.
func WithTLSFiles(ca, cert, key string) Option {
	return func(o *options) {
		cfg, err := tlsFromFiles(ca, cert, key)
		if err != nil {
			cfg = &tls.Config{GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return nil, err },
				VerifyConnection: func(tls.ConnectionState) error { return err }}
		}
		o.tls = cfg
	}
}

// tlsFromFiles builds a client TLS configuration from PEM files.
func tlsFromFiles(ca, cert, key string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("client: TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("client: TLS CA %s holds no PEM certificate", ca)
		}
		cfg.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("client: a TLS client certificate needs both its certificate and key files")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("client: TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// WithProtocol selects Connect (default), gRPC or gRPC-web.
func WithProtocol(p Protocol) Option { return func(o *options) { o.protocol = p } }

// WithGzip compresses requests and asks for compressed responses: worth it
// over slow links, not on loopback or a LAN.
func WithGzip() Option { return func(o *options) { o.gzip = true } }

// WithConnectOptions passes options to the underlying Connect clients
// (interceptors, compression, ...).
func WithConnectOptions(opts ...connect.ClientOption) Option {
	return func(o *options) { o.connectOpts = append(o.connectOpts, opts...) }
}

// MaxMessageBytes bounds a message the client sends or reads: a server's
// limit of a request (larger ones it refuses unread). A request over it
// is not sent: the call fails with InvalidArgument and ErrTooLarge, saying
// how large it is and what to do instead (a module is also over the
// server's module limits). An answer over it fails with ResourceExhausted
// and ErrTooLarge. Neither is retried.
const MaxMessageBytes = 64 << 20

// New returns a client for the server at addr, e.g. "http://127.0.0.1:7070".
// It does not connect until the first call. addr may list several nodes of
// a cluster, comma-separated (any node serves any request): calls and new
// streams go to one of them, and move to the next when it cannot be
// reached, does not answer in time or answers Unavailable (see the package
// documentation).
func New(addr string, opts ...Option) *Client {
	o := options{retry: defaultRetry, penalty: DefaultNodePenalty, now: time.Now, openTimeout: DefaultStreamOpenTimeout,
		healthIdle: DefaultHealthCheckIdle, healthTimeout: DefaultHealthCheckTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	scheme := "http://"
	if o.tls != nil {
		scheme = "https://"
	}
	var eps []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			eps = append(eps, normalize(a, scheme))
		}
	}
	if len(eps) == 0 {
		eps = []string{normalize(addr, scheme)}
	}
	if o.httpClient == nil {
		o.httpClient = defaultHTTPClient(o.healthIdle, o.healthTimeout, o.tls)
		if o.protocol == Connect && !o.noFastPath {
			o.httpClient = &fastpath.Transport{Fallback: o.httpClient, TLS: o.tls, HealthIdle: o.healthIdle, HealthTimeout: o.healthTimeout}
		}
	}
	copts := []connect.ClientOption{connect.WithReadMaxBytes(MaxMessageBytes), connect.WithSendMaxBytes(MaxMessageBytes),
		connect.WithInterceptors(sizeInterceptor{})}
	if !o.gzip {
		// Compression costs more CPU than it saves bandwidth on loopback
		// and LANs (gzip took half the CPU of a replay); opt in with
		// WithGzip.
		copts = append(copts, connect.WithAcceptCompression("gzip", nil, nil))
	} else {
		copts = append(copts, connect.WithSendGzip())
	}
	switch o.protocol {
	case GRPC:
		copts = append(copts, connect.WithGRPC())
	case GRPCWeb:
		copts = append(copts, connect.WithGRPCWeb())
	}
	copts = append(copts, o.connectOpts...)
	a := eps[0]
	return &Client{
		topics:      rewindv1connect.NewTopicServiceClient(o.httpClient, a, copts...),
		pub:         rewindv1connect.NewPublishServiceClient(o.httpClient, a, copts...),
		sub:         rewindv1connect.NewSubscribeServiceClient(o.httpClient, a, copts...),
		groups:      rewindv1connect.NewGroupServiceClient(o.httpClient, a, copts...),
		plugins:     rewindv1connect.NewPluginServiceClient(o.httpClient, a, copts...),
		cluster:     rewindv1connect.NewClusterServiceClient(o.httpClient, a, copts...),
		auth:        rewindv1connect.NewAuthServiceClient(o.httpClient, a, copts...),
		store:       rewindv1connect.NewEventStoreServiceClient(o.httpClient, a, copts...),
		retry:       o.retry,
		addr:        a,
		openTimeout: o.openTimeout,
		genKeys:     o.genKeys,
		opts:        append(slices.Clip(opts), WithHTTPClient(o.httpClient)),
		nodes:       newNodes(eps, o.penalty, o.now, o.penalties, scheme),
	}
}

// normalize turns a node address into the base URL calls use; scheme
// ("http://" or "https://") is added to an address without one.
func normalize(addr, scheme string) string {
	addr = strings.TrimSpace(addr)
	if !strings.Contains(addr, "://") {
		addr = scheme + addr
	}
	return strings.TrimRight(addr, "/")
}

// Health checks of the default transport: a connection that received
// nothing for DefaultHealthCheckIdle is pinged, and closed if the ping is
// not answered within DefaultHealthCheckTimeout — a paused or cut-off node
// then fails the calls and streams on it, which move to another node.
const (
	DefaultHealthCheckIdle    = 2 * time.Second
	DefaultHealthCheckTimeout = 2 * time.Second
)

// WithHealthCheck sets the default transport's health checks (HTTP/2
// pings, and the fast path's: those only while calls are out): a
// connection that received nothing for idle is pinged and closed when the
// ping is not answered within timeout (defaults DefaultHealthCheckIdle and
// DefaultHealthCheckTimeout; idle 0 turns them off). It has no effect
// with WithHTTPClient: configure that client's transport instead.
func WithHealthCheck(idle, timeout time.Duration) Option {
	return func(o *options) { o.healthIdle, o.healthTimeout = idle, timeout }
}

func defaultHTTPClient(healthIdle, healthTimeout time.Duration, tc *tls.Config) *http.Client {
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		tc = tc.Clone()
	}
	p := new(http.Protocols)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           p,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		HTTP2: &http.HTTP2Config{
			// Large windows: a replay stream moves hundreds of MB/s on
			// loopback; the default 1 MiB window would throttle it.
			MaxReceiveBufferPerConnection: 64 << 20,
			MaxReceiveBufferPerStream:     16 << 20,
			// Large frames: the server writes a stream's data in frames
			// of up to this size, each a write and goroutine hand-offs on
			// its side (16 KiB by default: 64 per 1 MiB event).
			MaxReadFrameSize: 1 << 20,
			SendPingTimeout:  healthIdle,
			PingTimeout:      healthTimeout,
		},
	}}
}

// DefaultStreamOpenTimeout bounds opening a stream unless
// WithStreamOpenTimeout says otherwise.
const DefaultStreamOpenTimeout = 10 * time.Second

// WithStreamOpenTimeout bounds how long a new stream (Subscribe, and each
// reconnect of a broken one) waits for its first event: a node that sends
// nothing within d is left for the next node (default
// DefaultStreamOpenTimeout; 0: only the caller's context bounds it). The
// server sends the first event once the stream is set up (a filter module
// compiled, a group joined), so d must exceed that.
func WithStreamOpenTimeout(d time.Duration) Option { return func(o *options) { o.openTimeout = d } }
