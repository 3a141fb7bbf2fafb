package api

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/internal/httpedge"
	"github.com/rewind-io/rewind/internal/peerauth"
)

// The authentication gate: with auth on, a request's credentials are
// checked on its headers alone, and a request without valid ones is
// refused before a byte of its body is read (issue 24, finding 5: a body
// of up to 64 MiB used to be read, and buffered, before the interceptor
// refused the call). Nothing behind the gate serves an unauthenticated
// caller: the interceptor refused every such call anyway, only later.
// The probes, gRPC health and reflection are not behind it (api.go), nor
// are the member endpoints (the raft transport and the peer reads), which
// the engine authenticates as members.

// admit authenticates r into c and reports whether the request may go on;
// if not, it has answered it: in the caller's protocol (Connect, gRPC or
// gRPC-web) when r is an RPC, else with HTTP 401 (503 while the
// authorization state is not initialized, 429 when limited).
//
// Failed authentications are counted by source (auth.Failures): a source
// past its limit is refused with ResourceExhausted and a Retry-After
// header, without its credentials being checked, and the audit log gets at
// most one line per source and interval, with the count of those it left
// out. Calls from authenticated members are neither limited nor counted:
// their callers' failures were counted where the callers connected; nor
// are loopback callers, unless configured (auth.FailureConfig.Loopback).
func (g *guard) admit(w http.ResponseWriter, r *http.Request, c *caller) bool {
	src := ""
	if _, member := peerauth.PeerOf(r.Context()); !member {
		src = g.sourceOf(r)
	}
	if src != "" {
		if retry, limited := g.failures.Limited(src); limited {
			secs := max(int64(math.Ceil(retry.Seconds())), 1)
			err := fmt.Errorf("auth: too many failed authentications from %s: retry in %d s", src, secs)
			g.auditFailure(r, c, src, err)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			refuseUnread(w, r, connect.NewError(connect.CodeResourceExhausted, err))
			return false
		}
	}
	c.id, c.err = g.identify(r)
	if c.err == nil {
		return true
	}
	if connect.CodeOf(c.err) == connect.CodeUnauthenticated && src != "" {
		g.auditFailure(r, c, src, c.err)
	} else {
		g.cfg.Audit.Log(auth.Event{Operation: r.URL.Path, Outcome: "unauthenticated", RequestID: c.requestID, Procedure: r.URL.Path, Detail: c.err.Error(), Source: src})
	}
	refuseUnread(w, r, connect.NewError(connect.CodeOf(c.err), c.err))
	return false
}

// auditFailure counts a failed authentication of src and writes its audit
// line unless src had one within the interval; it also writes the counts
// that sources quiet since then left pending.
func (g *guard) auditFailure(r *http.Request, c *caller, src string, err error) {
	if write, left := g.failures.Fail(src); write {
		g.cfg.Audit.Log(auth.Event{Operation: r.URL.Path, Outcome: "unauthenticated", RequestID: c.requestID, Procedure: r.URL.Path, Detail: err.Error(), Source: src, Suppressed: left})
	}
	for s, n := range g.failures.Pending() {
		g.cfg.Audit.Log(auth.Event{Outcome: "unauthenticated", Source: s, Suppressed: n, Detail: "failed authentications left out of the log"})
	}
}

// sourceOf is the source r's failures are counted under: the IPv4 address
// or IPv6 /64 of the connection's peer; "" for a source not counted
// (loopback, by default). Headers (X-Forwarded-For) are not believed:
// behind a proxy, every client is the proxy.
func (g *guard) sourceOf(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	if g.failures.Exempt(ap.Addr()) {
		return ""
	}
	p := httpedge.SourceOf(ap.Addr())
	if p.Addr().Is4() {
		return p.Addr().String()
	}
	return p.String()
}

// refuseUnread answers r with err without reading its body. Over HTTP/1
// the connection is closed after the answer: the unread body would
// otherwise be read (up to 256 KiB) or hold the connection.
func refuseUnread(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	if gateErrors.IsSupported(r) {
		_ = gateErrors.Write(w, r, err)
		return
	}
	status := http.StatusUnauthorized
	switch err.Code() {
	case connect.CodeUnavailable:
		status = http.StatusServiceUnavailable
	case connect.CodeResourceExhausted:
		status = http.StatusTooManyRequests
	case connect.CodePermissionDenied:
		status = http.StatusForbidden
	}
	http.Error(w, err.Message(), status)
}

var gateErrors = connect.NewErrorWriter()

// AdmitStream checks the credentials of the request that opens a
// fast-path stream (internal/httpedge), as every call's are checked: with
// authentication on, a client that cannot authenticate is refused before
// it can send a frame, so it pins no body memory, as on HTTP. Each call on
// the stream is still authenticated by its own headers. It writes the
// refusal and reports false.
func (s *Server) AdmitStream(w http.ResponseWriter, r *http.Request) bool {
	if s.guard == nil {
		return true
	}
	return s.guard.admit(w, r, &caller{requestID: r.Header.Get(RequestIDHeader)})
}
