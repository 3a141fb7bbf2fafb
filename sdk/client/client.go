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
// Given several members of a cluster (New("a,b,c")), a client moves
// publishes and new subscriptions to the next member when one cannot be
// reached. An open stream whose server stops, restarts, dies or becomes
// unavailable goes on (on the next member, if given several) from its last
// resume token, or for a group member by joining again, for up to a window
// (ReconnectWithin); Next says so with Disconnected and Reconnected events.
//
// A group member with AutoCommit that is stopped — its context cancelled,
// then Close — commits what it handed to the application before it leaves
// the group, so the next member does not deliver it again.
package client

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// Client talks to one Rewind server.
type Client struct {
	topics  rewindv1connect.TopicServiceClient
	pub     rewindv1connect.PublishServiceClient
	sub     rewindv1connect.SubscribeServiceClient
	groups  rewindv1connect.GroupServiceClient
	plugins rewindv1connect.PluginServiceClient
	cluster rewindv1connect.ClusterServiceClient
	retry   retryPolicy

	// opts made this client; peers are clients of other nodes it was
	// redirected to (subscriber groups live on their coordinator) or fails
	// over to.
	opts  []Option
	peers struct {
		sync.Mutex
		m map[string]*Client
	}
	// endpoints are the nodes given to New; cur indexes the one in use.
	endpoints []string
	cur       atomic.Int32
}

// current returns the client of the endpoint in use.
func (c *Client) current() *Client {
	i := int(c.cur.Load())
	if i == 0 || i >= len(c.endpoints) {
		return c
	}
	return c.peer(c.endpoints[i])
}

// failover moves to the next endpoint after from failed to connect (if no
// other call moved already).
func (c *Client) failover(from *Client) {
	if len(c.endpoints) < 2 || c.current() != from {
		return
	}
	i := c.cur.Load()
	c.cur.CompareAndSwap(i, (i+1)%int32(len(c.endpoints)))
}

// unreachable reports whether err means the node could not be reached or
// the connection broke (as opposed to an answer from the node).
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// peer returns a client like c for another node.
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
}

// Option configures a Client.
type Option func(*options)

// WithHTTPClient replaces the HTTP client. The default speaks HTTP/2 without
// TLS (h2c) to http:// addresses and HTTP/2 over TLS to https:// ones.
func WithHTTPClient(c connect.HTTPClient) Option { return func(o *options) { o.httpClient = c } }

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

// MaxMessageBytes bounds a message the client reads.
const MaxMessageBytes = 64 << 20

// New returns a client for the server at addr, e.g. "http://127.0.0.1:7070".
// It does not connect until the first call. addr may list several nodes of
// a cluster, comma-separated: publishes and new subscriptions then move to
// the next node when the one in use cannot be reached (any node serves any
// request).
func New(addr string, opts ...Option) *Client {
	if strings.Contains(addr, ",") {
		var eps []string
		for _, a := range strings.Split(addr, ",") {
			if a = strings.TrimSpace(a); a != "" {
				eps = append(eps, a)
			}
		}
		if len(eps) > 1 {
			c := New(eps[0], opts...)
			c.endpoints = eps
			return c
		}
		addr = strings.Join(eps, "")
	}
	o := options{retry: defaultRetry}
	for _, opt := range opts {
		opt(&o)
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	addr = strings.TrimRight(addr, "/")
	if o.httpClient == nil {
		o.httpClient = defaultHTTPClient()
	}
	copts := []connect.ClientOption{connect.WithReadMaxBytes(MaxMessageBytes), connect.WithSendMaxBytes(MaxMessageBytes)}
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
	return &Client{
		topics:  rewindv1connect.NewTopicServiceClient(o.httpClient, addr, copts...),
		pub:     rewindv1connect.NewPublishServiceClient(o.httpClient, addr, copts...),
		sub:     rewindv1connect.NewSubscribeServiceClient(o.httpClient, addr, copts...),
		groups:  rewindv1connect.NewGroupServiceClient(o.httpClient, addr, copts...),
		plugins: rewindv1connect.NewPluginServiceClient(o.httpClient, addr, copts...),
		cluster: rewindv1connect.NewClusterServiceClient(o.httpClient, addr, copts...),
		retry:   o.retry,
		opts:    append([]Option{WithHTTPClient(o.httpClient)}, opts...),
	}
}

func defaultHTTPClient() *http.Client {
	p := new(http.Protocols)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           p,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
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
		},
	}}
}
