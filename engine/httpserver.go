package engine

import (
	"net"
	"net/http"
	"time"

	"github.com/rewind-io/rewind/engine/internal/api"
	"github.com/rewind-io/rewind/internal/httpedge"
)

// HTTPConfig bounds what clients may hold of a node's port: how long they
// may take to send a request, how long an idle connection stays open, how
// many connections they may keep, how much memory their request bodies
// may pin, and by which names they may call it (docs/operations.md, "Slow
// and idle clients"; docs/security.md, "DNS rebinding"). The zero value of
// each field selects its default; a negative value turns the limit off.
//
// Server applies it to an http.Server, Listener to the TCP listener
// (under TLS: Node.Listener(cfg.Listener(ln))); Node.Serve does both.
type HTTPConfig struct {
	// ReadHeaderTimeout bounds the reading of a request's headers.
	// Default 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes an HTTP/1 keep-alive connection that waits this
	// long for its next request, and an HTTP/2 connection that has had no
	// stream for this long. Default 2 min.
	IdleTimeout time.Duration
	// BodyReadTimeout is how long after its headers a request's body must
	// have arrived, for every call but the raft stream between members (a
	// publish, an admin call, the request of a Subscribe: the streams it
	// opens are not cut). Default 1 min.
	BodyReadTimeout time.Duration
	// MaxBodyBytesInFlight bounds the request body bytes the node holds
	// while they arrive, all requests together: a request that would go
	// past it fails with ResourceExhausted. Default 256 MiB (four of the
	// largest requests, MaxRequestBytes).
	MaxBodyBytesInFlight int64
	// MaxConns caps the connections open at once (Listener); those beyond
	// it are closed as they are accepted. Default 4096, or half the
	// process's descriptor limit if that is less.
	MaxConns int
	// MaxConnsPerSource caps the connections open at once from one IPv4
	// address or IPv6 /64. Default MaxConns/4.
	MaxConnsPerSource int
	// AllowedHosts are the names besides IP literals and localhost that
	// requests may carry in their Host header: the hosts of the node's
	// listen and advertised addresses, its members', and the operator's
	// (--allowed-hosts). "*." prefixes admit a domain's names; "*" turns
	// the check off. Default: none (IP literals and loopback names only).
	AllowedHosts []string

	// admitStream checks who opens a fast-path stream (Node.Serve sets it
	// to the node's authentication; nil: anyone).
	admitStream func(http.ResponseWriter, *http.Request) bool
}

// Defaults of HTTPConfig.
const (
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultIdleTimeout          = 2 * time.Minute
	DefaultBodyReadTimeout      = time.Minute
	DefaultMaxBodyBytesInFlight = 256 << 20
	DefaultMaxConns             = 4096
)

// withDefaults fills the zero fields.
func (c HTTPConfig) withDefaults() HTTPConfig {
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.MaxBodyBytesInFlight == 0 {
		c.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
		if fds := descriptorLimit(); fds > 0 && fds/2 < c.MaxConns {
			c.MaxConns = max(fds/2, 1)
		}
	}
	if c.MaxConnsPerSource == 0 && c.MaxConns > 0 {
		c.MaxConnsPerSource = max(c.MaxConns/4, 1)
	}
	return c
}

// Limits returns c with its defaults filled in: what Server and Listener
// apply.
func (c HTTPConfig) Limits() HTTPConfig { return c.withDefaults() }

// Server returns the HTTP server configuration Rewind serves with:
// HTTP/1.1 and unencrypted HTTP/2 (h2c) on one port (or, on a TLS
// listener, HTTP/2 and HTTP/1.1 by ALPN), so Connect, gRPC and gRPC-web
// clients all connect, with flow-control windows large enough for a
// replay stream at loopback speed (the defaults throttle it), liveness
// pings, c's timeouts, its bounds on request bodies and its Host check.
//
// There is no http.Server.ReadTimeout: it covers the whole body and would
// cut the raft streams between members; bodies get deadlines of their own
// (BodyReadTimeout), each let go once its body is read.
func (c HTTPConfig) Server(h http.Handler) *http.Server {
	c = c.withDefaults()
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	guard := httpedge.NewBodyGuard(httpedge.BodyLimits{ReadTimeout: c.BodyReadTimeout, InFlight: c.MaxBodyBytesInFlight})
	// The fast path's calls run h as they are: their stream's request has
	// passed the Host check, and their bodies are counted as they arrive.
	fp := httpedge.NewFastpath(h, httpedge.FastpathConfig{
		Bodies:        guard,
		Admit:         c.admitStream,
		IdleTimeout:   positive(c.IdleTimeout),
		MaxFrameBytes: api.MaxRequestBytes + 1<<20,
	})
	h = httpedge.CheckHosts(fp.Handler(guard.Handler(h)), c.AllowedHosts)
	srv := &http.Server{
		Handler:           h,
		Protocols:         p,
		ReadHeaderTimeout: positive(c.ReadHeaderTimeout),
		IdleTimeout:       positive(c.IdleTimeout),
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          1000,
			MaxReceiveBufferPerConnection: 64 << 20,
			MaxReceiveBufferPerStream:     16 << 20,
			// A connection silent for 15 s is pinged and closed if the ping
			// goes unanswered for 15 s more: a subscriber group member that
			// vanished without closing its stream loses its partitions
			// within about 30 s (its session timeout).
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
	// A shutdown tells fast-path streams to finish their calls and end.
	srv.RegisterOnShutdown(fp.Shutdown)
	return srv
}

// Listener returns ln under c's connection caps (MaxConns,
// MaxConnsPerSource): a connection beyond them is closed as it is
// accepted, and counted in rewind_http_connections_refused_total. Wrap the
// TCP listener, then TLS over it (Node.Listener), so a refused connection
// costs no handshake.
func (c HTTPConfig) Listener(ln net.Listener) net.Listener {
	c = c.withDefaults()
	if c.MaxConns <= 0 && c.MaxConnsPerSource <= 0 {
		return ln
	}
	return httpedge.NewListener(ln, httpedge.ConnLimits{Max: c.MaxConns, PerSource: c.MaxConnsPerSource})
}

// positive is d, or 0 (net/http's "none") for a negative d.
func positive(d time.Duration) time.Duration { return max(d, 0) }
