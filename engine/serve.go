package engine

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/kafka"
)

// ServeConfig says how Node.Serve serves a node. The zero value serves
// Node.Handler under the default HTTPConfig, logs nothing and shuts down
// gracefully.
type ServeConfig struct {
	// HTTP bounds what clients may hold of the port (HTTPConfig).
	HTTP HTTPConfig
	// Handler is what to serve: Node.Handler, maybe wrapped (CORS, the web
	// console). Default: Node.Handler().
	Handler http.Handler
	// Logger gets "serving", "shutting down", "stopped" and a failed
	// store's last words, and, named "http", the HTTP server's own
	// messages (failed TLS handshakes at debug level). Default: none.
	Logger hclog.Logger
	// ShutdownTimeout bounds how long the HTTP server waits for in-flight
	// requests once the node has drained; then it closes what is left.
	// Default 10 s; negative: close every connection at once (a test
	// stopping a member, a demo ending).
	ShutdownTimeout time.Duration
	// MetricsListener, when set, serves /metrics alone (MetricsHandler)
	// under MetricsHTTP's limits, and stops with the API, before the store
	// closes (a scrape reads the store).
	MetricsListener net.Listener
	MetricsHTTP     HTTPConfig
	// KafkaListener, when set, serves the Kafka protocol on it
	// (docs/kafka.md): producers and simple consumers of Kafka clients
	// read and write the node's topics. It has neither TLS nor SASL yet,
	// so Serve refuses it on a node with authentication on; `rewind
	// serve` also refuses a non-loopback address for it without
	// --insecure. It stops with the API, before the store closes.
	KafkaListener net.Listener
	Kafka         KafkaConfig
}

// KafkaConfig configures the Kafka listener (ServeConfig.Kafka); its
// fields and their defaults are documented on the type it names.
type KafkaConfig = kafka.Config

// ErrKafkaWithAuth is Serve's refusal of a Kafka listener on a node with
// authentication on: the listener has no SASL yet, so it would serve
// every topic to anyone who reaches it, whatever the ACLs say.
var ErrKafkaWithAuth = errors.New("engine: the Kafka listener has no authentication yet (SASL is not built): it cannot run on a node with --auth, whose ACLs it would bypass; turn --kafka-listen off or --auth off")

// DefaultShutdownTimeout is ServeConfig.ShutdownTimeout's default.
const DefaultShutdownTimeout = 10 * time.Second

// failCloseTimeout bounds how long a node whose store failed waits for the
// store to close before Serve returns anyway.
const failCloseTimeout = 5 * time.Second

// Serve serves the node on ln, a TCP listener, until ctx ends or the store
// fails, and closes the node before it returns: Serve owns the node from
// its call on. The order of a shutdown matters, and is the reason Serve
// exists rather than each caller assembling it:
//
//  1. The connection caps wrap ln (HTTPConfig.Listener), then TLS when
//     the node serves it (Node.Listener), so a refused connection costs
//     no handshake.
//  2. When ctx ends, the node drains first (Node.Drain: a member hands
//     its partitions' leadership away, raft streams close, streams end
//     with Unavailable), so the HTTP server has nothing long-lived left.
//  3. The HTTP server then finishes in-flight requests (up to
//     ShutdownTimeout) and closes the rest; the Kafka listener, if any,
//     closes its connections (its long polls end with the drain).
//  4. The node closes its store (Node.Close).
//
// It returns nil after a shutdown through ctx that closed the store
// cleanly. When the store fails (Node.Failed), Serve closes every
// connection at once, closes the node (waiting up to 5 s) and returns an
// error wrapping the storage error: the process should exit and be
// restarted (docs/operations.md, "Disk full"). When the HTTP server stops
// on its own (ln failed), Serve closes the node and returns that error.
func (n *Node) Serve(ctx context.Context, ln net.Listener, cfg ServeConfig) error {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	h := cfg.Handler
	if h == nil {
		h = n.Handler()
	}
	timeout := cfg.ShutdownTimeout
	if timeout == 0 {
		timeout = DefaultShutdownTimeout
	}
	stopKafka, err := n.serveKafka(log, cfg)
	if err != nil {
		ln.Close()
		return errors.Join(err, n.Close())
	}
	hc := cfg.HTTP
	hc.admitStream = n.api.AdmitStream
	srv := hc.Server(h)
	srv.ErrorLog = stdlog.New(httpLogWriter{log.Named("http")}, "", 0)
	ln = n.Listener(cfg.HTTP.Listener(ln))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("serving", "address", ln.Addr().String(), "tls", n.TLSConfig() != nil)
	stopMetrics := n.serveMetrics(log, cfg)
	select {
	case err := <-errc:
		stopKafka()
		stopMetrics()
		n.Close()
		return err
	case <-n.Failed():
		stopKafka()
		stopMetrics()
		return n.failed(log, srv, errc)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	n.Drain()
	if timeout < 0 {
		srv.Close()
	} else {
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	}
	stopKafka()
	stopMetrics()
	err = n.Close()
	if err == nil {
		log.Info("stopped")
	}
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	return err
}

// serveMetrics serves MetricsHandler on cfg.MetricsListener, if set, until
// the returned function is called; it waits for the server to stop.
func (n *Node) serveMetrics(log hclog.Logger, cfg ServeConfig) (stop func()) {
	if cfg.MetricsListener == nil {
		return func() {}
	}
	srv := cfg.MetricsHTTP.Server(n.MetricsHandler())
	srv.ErrorLog = stdlog.New(httpLogWriter{log.Named("http")}, "", 0)
	ln := cfg.MetricsHTTP.Listener(cfg.MetricsListener)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "address", ln.Addr().String(), "error", err)
		}
	}()
	log.Info("serving metrics", "address", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { srv.Close(); <-done }
}

// serveKafka serves the Kafka protocol on cfg.KafkaListener, if set,
// until the returned function is called; it waits for the listener's
// connections to end. It refuses a node with authentication on
// (ErrKafkaWithAuth), closing the listener.
func (n *Node) serveKafka(log hclog.Logger, cfg ServeConfig) (stop func(), err error) {
	ln := cfg.KafkaListener
	if ln == nil {
		return func() {}, nil
	}
	if n.auth != nil {
		ln.Close()
		return nil, ErrKafkaWithAuth
	}
	kc := cfg.Kafka
	if kc.Logger == nil {
		kc.Logger = log.Named("kafka")
	}
	ks, err := kafka.New(n.b, ln.Addr(), kc)
	if err != nil {
		ln.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ks.Serve(ln); err != nil {
			log.Error("kafka listener stopped", "address", ln.Addr().String(), "error", err)
		}
	}()
	log.Info("serving kafka", "address", ln.Addr().String(), "advertise", ks.Advertise())
	return func() { ks.Close(); <-done }, nil
}

// failed stops a node whose store failed and returns the error Serve
// returns. A store that failed a WAL write or fsync cannot tell which of
// its last writes are on disk, and Pebble refuses to go on; serving reads
// alone from such a node would be a half-alive node that health checks,
// clients and operators cannot tell from a healthy one. So it stops
// promptly, with the disk error in its last log line, and a supervisor
// restarts the process: on restart it recovers from its WAL and catches
// up from the other replicas.
func (n *Node) failed(log hclog.Logger, srv *http.Server, errc <-chan error) error {
	err := n.Err()
	log.Error("storage failed: exiting; restart the node once its disk is healthy (free space, mounted, writable)", "error", err)
	srv.Close() // connections end now: clients move to other nodes
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case <-closed:
	case <-time.After(failCloseTimeout):
		log.Warn("the failed store did not close in time; exiting anyway", "timeout", failCloseTimeout)
	}
	<-errc
	return fmt.Errorf("storage failed, node stopped (restart it once the disk is healthy): %w", err)
}

// httpLogWriter puts the HTTP server's own messages in the node's log:
// failed TLS handshakes (scanners, clients without the right certificate
// or CA, plaintext clients) at debug level, so they cannot flood it; the
// rest as warnings.
type httpLogWriter struct{ log hclog.Logger }

func (w httpLogWriter) Write(b []byte) (int, error) {
	msg := strings.TrimSpace(string(b))
	if strings.Contains(msg, "TLS handshake error") {
		w.log.Debug("tls handshake failed", "detail", msg)
	} else {
		w.log.Warn("http server", "detail", msg)
	}
	return len(b), nil
}
