package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/api"
	"github.com/rewind-io/rewind/engine/internal/route"
	"github.com/rewind-io/rewind/internal/peerauth"
	"github.com/rewind-io/rewind/internal/tlsconf"
	"github.com/rewind-io/rewind/raftlog/transport"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// security is a node's transport security (docs/security.md): the TLS
// configuration of its port, and how it authenticates its peers and is
// authenticated by them (peer mutual TLS, a cluster secret, both or
// neither). Set up by Open on its goroutine; read-only once Open returns.
type security struct {
	self uint64
	// cluster is the cluster id, known after a join.
	cluster uint64
	// server is the port's TLS configuration; nil: plain HTTP/1.1 and h2c.
	server *tls.Config
	// peer is the member's certificate and the cluster CA; nil: peers
	// dial without TLS.
	peer *tlsconf.Peer
	// secret is the cluster secret; nil: none.
	secret []byte

	// clients are the peer HTTP clients made, closed with the node.
	clients []*http.Client
}

// close closes the idle connections of every peer client.
func (s *security) close() {
	for _, c := range s.clients {
		c.CloseIdleConnections()
	}
}

// newSecurity checks the security fields of cfg and loads their files.
func newSecurity(cfg Config) (*security, error) {
	s := &security{self: cfg.NodeID, cluster: cfg.Cluster.ID}
	var errs []error
	cluster := len(cfg.Cluster.InitialMembers) > 0 || len(cfg.Join.Through) > 0
	peerSet := cfg.Security.PeerTLSCertFile != "" || cfg.Security.PeerTLSKeyFile != "" || cfg.Security.PeerTLSCAFile != ""
	peerAll := cfg.Security.PeerTLSCertFile != "" && cfg.Security.PeerTLSKeyFile != "" && cfg.Security.PeerTLSCAFile != ""
	if (cfg.Security.TLSCertFile == "") != (cfg.Security.TLSKeyFile == "") {
		errs = append(errs, errors.New("engine: TLS needs both a certificate and a key file (--tls-cert, --tls-key)"))
	}
	if cfg.Security.TLSClientCAFile != "" && cfg.Security.TLSCertFile == "" {
		errs = append(errs, errors.New("engine: verifying client certificates (--tls-client-ca) needs TLS (--tls-cert, --tls-key)"))
	}
	if peerSet && !peerAll {
		errs = append(errs, errors.New("engine: peer TLS needs all of --peer-tls-cert, --peer-tls-key and --peer-tls-ca"))
	}
	if peerSet && cfg.Security.TLSCertFile == "" {
		errs = append(errs, errors.New("engine: peer TLS needs TLS on the port (--tls-cert, --tls-key): members and clients share one port (the node's certificate may serve both)"))
	}
	if cluster && cfg.Security.TLSCertFile != "" && !peerSet {
		errs = append(errs, errors.New("engine: a cluster member with TLS on its port needs peer TLS too (--peer-tls-cert, --peer-tls-key, --peer-tls-ca): its peers dial that port"))
	}
	if cfg.Auth.Enabled && cluster && !peerSet && cfg.Security.ClusterSecret == nil {
		// Members read each other's partitions (the peer read service) and
		// take each other's raft messages; unauthenticated, those would
		// serve every record to anyone, whatever the ACLs say.
		errs = append(errs, errors.New("engine: authentication (--auth) in a cluster needs its members to authenticate each other too (--cluster-secret-file, or --peer-tls-cert, --peer-tls-key and --peer-tls-ca): "+
			"otherwise anyone who reaches a member reads every record through the members' own services, with no token"))
	}
	if cfg.Security.ClusterSecret != nil && len(cfg.Security.ClusterSecret) < peerauth.MinSecretBytes {
		errs = append(errs, fmt.Errorf("engine: the cluster secret has %d bytes, at least %d are needed (for example: openssl rand -hex 32)", len(cfg.Security.ClusterSecret), peerauth.MinSecretBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(cfg.Security.ClusterSecret) > 0 {
		s.secret = append([]byte(nil), cfg.Security.ClusterSecret...)
	}
	if cfg.Security.TLSCertFile == "" {
		return s, nil
	}
	pair, err := tlsconf.LoadKeyPair(cfg.Security.TLSCertFile, cfg.Security.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("engine: --tls-cert: %w", err)
	}
	srv := tlsconf.Server{Pair: pair}
	if cfg.Security.TLSClientCAFile != "" {
		if srv.ClientCAs, err = tlsconf.LoadPool(cfg.Security.TLSClientCAFile); err != nil {
			return nil, fmt.Errorf("engine: --tls-client-ca: %w", err)
		}
	}
	if peerAll {
		if s.peer, err = tlsconf.LoadPeer(cfg.Security.PeerTLSCertFile, cfg.Security.PeerTLSKeyFile, cfg.Security.PeerTLSCAFile, cfg.NodeID); err != nil {
			return nil, fmt.Errorf("engine: --peer-tls-cert: %w", err)
		}
		srv.Peer = s.peer
	}
	s.server = tlsconf.ServerConfig(srv)
	return s, nil
}

// authenticates reports whether peers must authenticate.
func (s *security) authenticates() bool { return s.peer != nil || s.secret != nil }

// scheme is the URL scheme members call each other with.
func (s *security) scheme() string {
	if s.peer != nil {
		return "https"
	}
	return "http"
}

// peerHTTP is peerClient with its scheme.
func (s *security) peerHTTP(dial func(ctx context.Context, network, addr string) (net.Conn, error)) route.HTTP {
	return route.HTTP{Client: s.client(dial, false), Scheme: s.scheme()}
}

// client is the HTTP/2 client members call each other with: h2c, or
// mutual TLS naming the member each request is for (its context's
// peerauth.WithTarget mark; unmarked: any member, as when joining), and
// with the cluster secret each request signed. stream selects the raft
// transport's settings (a stalled write fails the stream).
func (s *security) client(dial func(ctx context.Context, network, addr string) (net.Conn, error), stream bool) *http.Client {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 15 * time.Second}).DialContext
	}
	p := new(http.Protocols)
	h2 := &http.HTTP2Config{
		MaxReceiveBufferPerConnection: 64 << 20, MaxReceiveBufferPerStream: 16 << 20,
		SendPingTimeout: transport.PingInterval, PingTimeout: transport.PingTimeout,
	}
	if stream {
		h2 = &http.HTTP2Config{SendPingTimeout: transport.PingInterval, PingTimeout: transport.PingTimeout, WriteByteTimeout: 10 * time.Second}
	}
	// A peer that stops answering without closing its connection (a
	// frozen process, a dropped network) is noticed by the pings and the
	// dial timeout, not only by the calls' own deadlines.
	tr := &http.Transport{Protocols: p, MaxIdleConnsPerHost: 4, DialContext: dial, HTTP2: h2}
	if s.peer == nil {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP2(true)
		tr.ForceAttemptHTTP2 = true
		peer := s.peer
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			target, _ := peerauth.TargetOf(ctx)
			c := tls.Client(raw, peer.Dial(target))
			if err := c.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, fmt.Errorf("peer TLS with %s: %w", addr, err)
			}
			return c, nil
		}
	}
	var rt http.RoundTripper = tr
	if s.secret != nil {
		rt = &peerauth.Transport{Base: tr, Secret: s.secret, Self: s.self, Cluster: func() uint64 { return s.cluster }}
	}
	c := &http.Client{Transport: rt}
	s.clients = append(s.clients, c)
	return c
}

// authenticate returns the member that sent r: the node its verified peer
// certificate names (with peer TLS) and the sender of a valid cluster
// secret authenticator (with a secret), which must agree. join accepts a
// joining node's authenticator.
func (s *security) authenticate(r *http.Request, join bool) (uint64, error) {
	var id uint64
	if s.peer != nil {
		pid, ok := tlsconf.PeerOf(r.TLS)
		if !ok {
			return 0, errors.New("not a member's connection: members dial with peer TLS and a certificate from the cluster CA")
		}
		id = pid
	}
	if s.secret != nil {
		vf := peerauth.Verifier{Secret: s.secret, Cluster: s.cluster, Self: s.self}
		from, err := vf.Verify(r.Header.Get(peerauth.Header), join)
		if err != nil {
			return 0, fmt.Errorf("cluster secret: %w", err)
		}
		if id != 0 && from != id {
			return 0, fmt.Errorf("the authenticator is node %d's, the certificate node %d's", from, id)
		}
		id = from
	}
	return id, nil
}

// guard serves a cluster member's port: it decides, in one place, which
// requests speak for a member (api/member.go). Peer-only requests are the
// raft transport, the peer read service and the member path (peerPaths),
// the join call, and any request with a peer authenticator. With member
// authentication (peer TLS or a cluster secret), a peer-only request must
// authenticate as a current member (isMember; a joining node, only on the
// join call), and a hop mark must name that member; without it, every
// caller is taken for a member, as by the raft transport beside it
// (`rewind serve` refuses that on non-loopback addresses). Requests on the
// peer paths are marked api.WithMember; members' authenticated requests
// also peerauth.WithPeer. Public paths refuse member assertions
// (api.RefuseMemberHeaders, in Handler).
func (s *security) guard(h http.Handler, m members, peerPaths ...string) http.Handler {
	ew := connect.NewErrorWriter()
	refuse := func(w http.ResponseWriter, r *http.Request, code connect.Code, err error) {
		_ = ew.Write(w, r, connect.NewError(code, fmt.Errorf("%s is for cluster members only: %w", r.URL.Path, err)))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		join := r.URL.Path == rewindv1connect.ClusterServiceAddNodeProcedure
		peerPath := false
		for _, p := range peerPaths {
			peerPath = peerPath || strings.HasPrefix(r.URL.Path, p)
		}
		hop, hopSet, hopOK := api.AssertedMember(r.Header)
		if peerPath && !hopOK {
			refuse(w, r, connect.CodeInvalidArgument, fmt.Errorf("malformed %s or %s header", api.ForwardedHeader, api.RelayedHeader))
			return
		}
		if !s.authenticates() {
			if peerPath {
				r = r.WithContext(api.WithMember(r.Context(), 0))
			}
			h.ServeHTTP(w, r)
			return
		}
		peerOnly := peerPath || join || r.Header.Get(peerauth.Header) != ""
		id, err := s.authenticate(r, join)
		if err != nil {
			if peerOnly {
				refuse(w, r, connect.CodeUnauthenticated, err)
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		isMember := m.current
		if strings.HasPrefix(r.URL.Path, m.raftPath) {
			isMember = m.raft // a removed member's last raft messages still count
		}
		if !join && !isMember(id) {
			refuse(w, r, connect.CodePermissionDenied, fmt.Errorf("node %d is not a member of the cluster (removed, or never added)", id))
			return
		}
		if hopSet && hop != id {
			refuse(w, r, connect.CodePermissionDenied, fmt.Errorf("node %d sent a request marked as node %d's", id, hop))
			return
		}
		ctx := peerauth.WithPeer(r.Context(), id)
		if peerPath {
			ctx = api.WithMember(ctx, id)
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// members tells the guard who is a member: current is the member
// services' test (a removed member is out at once); raft, for the raft
// transport's path (raftPath), admits a removed member until raft's own
// configuration has dropped it.
type members struct {
	current, raft func(uint64) bool
	raftPath      string
}

// authorize is the raft transport's check of every inbound frame: its
// sender must be the member the stream authenticated as.
func (s *security) authorize(ctx context.Context, from uint64) error {
	id, ok := peerauth.PeerOf(ctx)
	if !ok {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("raft stream from an unauthenticated peer"))
	}
	if id != from {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("node %d sent raft messages as node %d", id, from))
	}
	return nil
}

// probeTLS dials a member at addr as a joining node and waits for its
// first bytes: with TLS 1.3 a server checks the client's certificate after
// the client's handshake ends, so a refusal arrives as an alert on the
// first read, where a request could instead fail as a broken pipe. It
// returns the handshake's or the alert's error (nil: accepted, or no
// answer in time: let the request tell).
func (s *security) probeTLS(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) error {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 3 * time.Second}).DialContext
	}
	raw, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil // not a TLS matter: the request will say
	}
	defer raw.Close()
	c := tls.Client(raw, s.peer.Dial(0))
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("peer TLS with %s: %w", addr, err)
	}
	if _, err := c.Read(make([]byte, 1)); err != nil && strings.Contains(err.Error(), "remote error: tls: ") {
		return fmt.Errorf("peer TLS with %s: %w", addr, err)
	}
	return nil
}
