package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/auth"
)

// Authentication (with AuthConfig.Enabled): an HTTP middleware in front of
// the Connect handlers reads the caller's credentials once per request and
// leaves the outcome in the request's context; the Connect interceptor in
// authz.go refuses an unauthenticated call with Unauthenticated (in the
// caller's protocol) and checks its rights. The probes (/livez, /readyz,
// gRPC health) and reflection stay open: they say nothing about the data.
// /metrics names every topic, so it needs the cluster admin right.
//
// A caller is, in this order:
//
//  1. a bearer token, "Authorization: Bearer rwd_...": it must exist in the
//     replicated state and not be expired; a present but bad token is
//     refused even if a client certificate is verified as well;
//  2. a verified TLS client certificate: its CN (or first SAN) is the
//     principal (auth.CertPrincipal);
//  3. a request another member sent on behalf of a certificate caller:
//     PrincipalHeader, honoured only on the member path from an
//     authenticated member (member.go). A cluster with auth on always
//     authenticates its members (engine.Open refuses it otherwise), so the
//     assertion needs no signature of its own: the member's peer TLS
//     certificate or cluster secret authenticator vouches for it. (It
//     used to carry an HMAC under a key derived from the resume-token key,
//     accepted from any client: whoever read that key off the disk became
//     any principal.)
//
// Requests forwarded between members with a token carry the client's
// Authorization header (the tokens are replicated, so the receiver checks
// it again), so the forwarded request has exactly the caller's rights.

// Headers of authentication.
const (
	// RequestIDHeader carries the request id (the client's, else one the
	// server makes up); every answer carries it back, and the audit log
	// names it.
	RequestIDHeader = "Rewind-Request-Id"
	// PrincipalHeader asserts a certificate caller's principal on a
	// request sent on between members (member.go).
	PrincipalHeader = "Rewind-Principal"
)

// AuthConfig turns authentication and authorization on.
type AuthConfig struct {
	// Audit receives every denial and every admin operation.
	Audit *auth.Audit
	// Now is the clock for token expiry. Default time.Now.
	Now func() time.Time
	// RecheckInterval is how often an open stream's token and rights are
	// checked again (revoked or expired: the stream ends). Default 1 s.
	RecheckInterval time.Duration
	// Failures limits failed authentications by source and aggregates
	// their audit lines (authgate.go); its zero value is the defaults.
	Failures auth.FailureConfig
}

// guard holds the authentication and authorization configuration.
type guard struct {
	cfg          AuthConfig
	state        func() *auth.State
	allCommitted func(group, topic string) bool
	// failures counts failed authentications by source (authgate.go).
	failures *auth.Failures
}

// enableAuth turns authentication and authorization on (Config.Auth).
func (s *Server) enableAuth(cfg AuthConfig) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RecheckInterval <= 0 {
		cfg.RecheckInterval = time.Second
	}
	s.guard = &guard{cfg: cfg, state: s.b.Auth, allCommitted: s.b.AllCommitted, failures: auth.NewFailures(cfg.Failures, cfg.Now)}
}

// caller is what the middleware learned of a request's credentials.
type caller struct {
	id        *auth.Identity
	err       error
	requestID string
}

type callerKey struct{}

func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// authenticate wraps the Connect handlers.
func (g *guard) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &caller{requestID: r.Header.Get(RequestIDHeader)}
		if c.requestID == "" || len(c.requestID) > 64 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			c.requestID = hex.EncodeToString(b[:])
		}
		w.Header().Set(RequestIDHeader, c.requestID)
		if !g.admit(w, r, c) { // authgate.go: refused before the body is read
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// identify authenticates one request.
func (g *guard) identify(r *http.Request) (*auth.Identity, error) {
	st := g.state()
	if !st.Initialized() {
		return nil, connect.NewError(connect.CodeUnavailable, auth.ErrNotInitialized)
	}
	if h := r.Header.Get("Authorization"); h != "" {
		// The scheme is case-insensitive (RFC 9110).
		if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
			return nil, connect.NewError(connect.CodeUnauthenticated, auth.ErrUnauthenticated)
		}
		t, err := st.Authenticate(strings.TrimSpace(h[7:]), g.cfg.Now().UnixNano())
		if err != nil {
			return nil, connect.NewError(connect.CodeUnauthenticated, err)
		}
		return &auth.Identity{Principal: t.Principal, TokenID: t.ID, Authorization: h}, nil
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		if p := auth.CertPrincipal(r.TLS.PeerCertificates[0]); p != "" {
			return &auth.Identity{Principal: p}, nil
		}
	}
	if p := r.Header.Get(PrincipalHeader); p != "" {
		if node, ok := memberOf(r.Context()); ok && node != 0 && auth.ValidatePrincipal(p) == nil {
			return &auth.Identity{Principal: p}, nil
		}
		return nil, connect.NewError(connect.CodeUnauthenticated, errAssertion)
	}
	return nil, connect.NewError(connect.CodeUnauthenticated, errNoCredentials)
}

var (
	errNoCredentials = unauthenticatedError("auth: no credentials (a bearer token or a client certificate)")
	errAssertion     = unauthenticatedError("auth: a principal assertion is honoured only from an authenticated cluster member")
)

type unauthenticatedError string

func (e unauthenticatedError) Error() string { return string(e) }

// CarryCredentials gives an outgoing call to another member (a forwarded
// publish, a membership call sent to the metadata leader) the caller's
// credentials: its Authorization header, or for a certificate caller a
// principal assertion, which the receiver honours because the call comes
// on the member path from an authenticated member.
func CarryCredentials(ctx context.Context, h http.Header) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return
	}
	if id.Authorization != "" {
		h.Set("Authorization", id.Authorization)
		return
	}
	h.Set(PrincipalHeader, id.Principal)
}

// adminOnly guards a plain HTTP endpoint (/metrics) with the cluster admin
// right when auth is on: 401 without valid credentials, 403 without the
// right.
func (s *Server) adminOnly(h http.Handler) http.Handler {
	if s.guard == nil {
		return h
	}
	return s.guard.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := callerOf(r.Context())
		switch {
		case c.err != nil:
			s.guard.cfg.Audit.Log(auth.Event{Operation: r.URL.Path, Outcome: "unauthenticated", RequestID: c.requestID, Detail: c.err.Error()})
			http.Error(w, "unauthenticated: a bearer token or client certificate is required", http.StatusUnauthorized)
		case !s.guard.state().Allowed(c.id.Principal, auth.Admin, auth.ClusterResource):
			s.guard.cfg.Audit.Log(auth.Event{Principal: c.id.Principal, Operation: string(auth.Admin), Resource: "cluster", Outcome: "denied", RequestID: c.requestID, Procedure: r.URL.Path})
			http.Error(w, "permission denied: admin on cluster", http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	}))
}
