package enginetest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginehook"
)

// Node is an engine.Node served in this process on a loopback port by
// engine.Node.Serve, until Stop or the end of the test.
type Node struct {
	*engine.Node
	// URL is the node's base URL: http://127.0.0.1:PORT, or https:// when
	// the node serves TLS (Config.Security.TLSCertFile).
	URL string
	// Addr is the host:port it listens on.
	Addr string
	// Config is the configuration the node was opened with, defaults of
	// StartNode filled in.
	Config engine.Config

	stopOnce sync.Once
	stop     context.CancelFunc
	served   chan error
	err      error
}

// Option changes how StartNode, StartCluster or ServeHandler serve.
type Option func(*options)

type options struct {
	ln           net.Listener
	addr         string
	http         engine.HTTPConfig
	handler      func(http.Handler) http.Handler
	afterFailure bool
	serveConfig  func(*engine.ServeConfig)
}

// WithListener serves on ln, a TCP listener the test opened (to know the
// port before writing the configuration: Config.Join.Advertise, a handler that
// names its own address). The harness closes it.
func WithListener(ln net.Listener) Option { return func(o *options) { o.ln = ln } }

// WithAddr listens on addr (host:port; a port the test reserved, or the
// port of a node it stopped). Default 127.0.0.1:0.
func WithAddr(addr string) Option { return func(o *options) { o.addr = addr } }

// WithHTTP serves under hc's limits instead of the defaults.
func WithHTTP(hc engine.HTTPConfig) Option { return func(o *options) { o.http = hc } }

// WithHandler serves wrap(Node.Handler()) instead of Node.Handler(): CORS,
// the web console, a recording middleware. StartNode and StartCluster
// only.
func WithHandler(wrap func(http.Handler) http.Handler) Option {
	return func(o *options) { o.handler = wrap }
}

// WithServingAfterFailure keeps serving a node whose store failed, for a
// test of what a failed node answers (health NOT_SERVING, /readyz 503)
// before it would exit: engine.Node.Serve stops at once, as `rewind
// serve` must. The node is served with the same HTTP server, not through
// Node.Serve; Stop drains it, closes the connections and the node, and
// does not report the store's error (the test made it). StartNode only.
func WithServingAfterFailure() Option { return func(o *options) { o.afterFailure = true } }

// WithServeConfig lets f change the engine.ServeConfig a node is served
// with (a Kafka listener, say). StartNode and StartCluster only.
func WithServeConfig(f func(*engine.ServeConfig)) Option {
	return func(o *options) { o.serveConfig = f }
}

func collect(opts []Option) options {
	o := options{addr: "127.0.0.1:0"}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// listen returns the listener o names.
func (o options) listen() (net.Listener, error) {
	if o.ln != nil {
		return o.ln, nil
	}
	return net.Listen("tcp", o.addr)
}

// StartNode opens a node with cfg and serves it on loopback (Node.Serve,
// under TLS when cfg asks) until Stop or the end of the test. A zero
// cfg.Dir is a new temporary directory (unless an enginehook FS is set), a nil
// cfg.Logger discards. An error opening the node fails the test; use
// TryStartNode when it is the outcome under test.
func StartNode(tb testing.TB, cfg engine.Config, opts ...Option) *Node {
	tb.Helper()
	n, err := TryStartNode(tb, cfg, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// TryStartNode is StartNode returning engine.Open's error (a join that
// must be refused) instead of failing the test; other errors (no port)
// still fail it.
func TryStartNode(tb testing.TB, cfg engine.Config, opts ...Option) (*Node, error) {
	tb.Helper()
	if cfg.Dir == "" && enginehook.Of(&cfg).FS == nil {
		cfg.Dir = tb.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	o := collect(opts)
	ln, err := o.listen()
	if err != nil {
		tb.Fatal(err)
	}
	n, err := serve(cfg, ln, o)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() {
		if err := n.Stop(); err != nil {
			tb.Errorf("stop node %s: %v", n.Addr, err)
		}
	})
	return n, nil
}

// serve opens a node with cfg and serves it on ln; it closes ln when the
// node does not open.
func serve(cfg engine.Config, ln net.Listener, o options) (*Node, error) {
	en, err := engine.Open(cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	scheme := "http://"
	if en.TLSConfig() != nil {
		scheme = "https://"
	}
	h := en.Handler()
	if o.handler != nil {
		h = o.handler(h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{Node: en, URL: scheme + ln.Addr().String(), Addr: ln.Addr().String(), Config: cfg, stop: cancel, served: make(chan error, 1)}
	// Connections close at once on Stop: a test stopping a member is a
	// crash of its clients' connections, not a rolling restart.
	go func() {
		if o.afterFailure {
			n.served <- serveThroughFailure(ctx, en, ln, o.http, h)
			return
		}
		sc := engine.ServeConfig{HTTP: o.http, Handler: h, ShutdownTimeout: -1}
		if o.serveConfig != nil {
			o.serveConfig(&sc)
		}
		n.served <- en.Serve(ctx, ln, sc)
	}()
	return n, nil
}

// serveThroughFailure serves h as Node.Serve does, but only ctx ends it
// (WithServingAfterFailure); it returns the HTTP server's error alone.
func serveThroughFailure(ctx context.Context, en *engine.Node, ln net.Listener, hc engine.HTTPConfig, h http.Handler) error {
	srv := hc.Server(h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(en.Listener(hc.Listener(ln))) }()
	<-ctx.Done()
	en.Drain()
	srv.Close()
	en.Close() // the store's error, if it failed, is the test's doing
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Stop drains the node, closes its connections and its store
// (engine.Node.Serve's shutdown), and returns what Serve returned: nil,
// or the store's error. Later calls return the same. Safe for concurrent
// use.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		n.stop()
		n.err = <-n.served
	})
	return n.err
}
