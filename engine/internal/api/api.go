// Package api is the Connect edge of a node: the handlers of the public
// services, the conversion between protobuf messages and the broker's Go
// types, and the one table that maps errors to Connect codes (errors.go).
// Every handler serves Connect, gRPC and gRPC-web alike, behind the same
// interceptors: the RPC's span when tracing is on (otel.go), its duration
// and code (rpcmetrics.go), then authorization when auth is on.
package api

import (
	"net/http"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/quota"
	"github.com/rewind-io/rewind/engine/internal/route"
	"github.com/rewind-io/rewind/internal/telemetry"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// MaxRequestBytes bounds a request message (a publish of many records).
// A larger request is refused with InvalidArgument before its body is read
// (limitBody).
const MaxRequestBytes = 64 << 20

// MaxResponseBytes bounds a response message.
const MaxResponseBytes = 64 << 20

// Server implements the public services over a broker.
type Server struct {
	b         *broker.Broker
	log       hclog.Logger
	peerStats func() map[uint64]PeerStat
	// peers carries membership calls to the metadata leader and status
	// calls to the members (nil alone).
	peers *route.Peers
	// maxRequest is MaxRequestBytes; tests lower it.
	maxRequest int64
	// publishDurations times client publishes to their acknowledgement;
	// publishFailures counts those that failed, by Connect code.
	publishDurations durations
	publishFailures  [connect.CodeUnauthenticated + 1]atomic.Uint64
	// guard is set when authentication is on (Config.Auth; authn.go).
	guard *guard
	// quotas charges principals (quota.go), made on first use.
	quotaOnce sync.Once
	quotas    *quota.Limiter
	// obs traces and times the RPCs (otel.go, rpcmetrics.go).
	obs observability
}

// Config configures a Server; the zero value serves a node alone.
type Config struct {
	Logger hclog.Logger
	// Peers are the clients of the other members (membership calls go to
	// the metadata leader). Nil: a node alone.
	Peers *route.Peers
	// PeerStats, if set, gives the cluster status the raft transport's
	// view of the peers.
	PeerStats func() map[uint64]PeerStat
	// Auth, if set, turns authentication and authorization on for every
	// public service: each call needs a bearer token or a verified client
	// certificate, and the rights the ACLs give it (authn.go).
	Auth *AuthConfig
	// Telemetry turns tracing on (otel.go); its zero value leaves it off.
	Telemetry telemetry.Config
}

// New returns the handlers for b.
func New(b *broker.Broker, cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Server{b: b, log: log, maxRequest: MaxRequestBytes, peers: cfg.Peers, peerStats: cfg.PeerStats}
	s.obs = newObservability(cfg.Telemetry, log)
	if cfg.Auth != nil {
		s.enableAuth(*cfg.Auth)
	}
	return s
}

// Handler returns an http.Handler serving every service, plus gRPC health,
// reflection, /metrics (Prometheus text format, metrics.go) and the
// /healthz, /livez and /readyz probes (health.go).
func (s *Server) Handler() http.Handler {
	opts := []connect.HandlerOption{
		// limitBody bounds what is read off the wire; this bounds what a
		// compressed message may inflate to.
		connect.WithReadMaxBytes(int(s.maxRequest)),
		connect.WithSendMaxBytes(MaxResponseBytes),
	}
	opts = append(opts, jsonCodecs()...)
	opts = append(opts, connect.WithInterceptors(s.obs.interceptors()...))
	mux := http.NewServeMux()
	handle := func(path string, h http.Handler) { mux.Handle(path, limitBody(h, s.maxRequest)) }
	if s.guard != nil {
		opts = append(opts, connect.WithInterceptors(interceptor{g: s.guard, pluginNames: s.b.PluginNames}))
		handle = func(path string, h http.Handler) {
			mux.Handle(path, s.guard.authenticate(limitBody(h, s.maxRequest)))
		}
	}
	handle(rewindv1connect.NewTopicServiceHandler(s, opts...))
	handle(rewindv1connect.NewPublishServiceHandler(s, opts...))
	handle(rewindv1connect.NewSubscribeServiceHandler(s, opts...))
	handle(rewindv1connect.NewGroupServiceHandler(s, opts...))
	handle(rewindv1connect.NewPluginServiceHandler(s, opts...))
	handle(rewindv1connect.NewClusterServiceHandler(s, opts...))
	handle(rewindv1connect.NewAuthServiceHandler(s, opts...))
	handle(rewindv1connect.NewEventStoreServiceHandler(s, opts...))
	services := []string{
		rewindv1connect.AuthServiceName,
		rewindv1connect.ClusterServiceName,
		rewindv1connect.TopicServiceName,
		rewindv1connect.PublishServiceName,
		rewindv1connect.SubscribeServiceName,
		rewindv1connect.GroupServiceName,
		rewindv1connect.PluginServiceName,
		rewindv1connect.EventStoreServiceName,
	}
	mux.Handle("GET /metrics", s.adminOnly(s.metricsHandler()))
	mux.HandleFunc("GET /healthz", s.livez)
	mux.HandleFunc("GET /livez", s.livez)
	mux.HandleFunc("GET /readyz", s.readyz)
	hc := &healthChecker{b: s.b, services: map[string]bool{}}
	for _, svc := range services {
		hc.services[svc] = true
	}
	mux.Handle(grpchealth.NewHandler(hc))
	reflector := grpcreflect.NewStaticReflector(services...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	return mux
}

var (
	_ rewindv1connect.TopicServiceHandler      = (*Server)(nil)
	_ rewindv1connect.PublishServiceHandler    = (*Server)(nil)
	_ rewindv1connect.SubscribeServiceHandler  = (*Server)(nil)
	_ rewindv1connect.GroupServiceHandler      = (*Server)(nil)
	_ rewindv1connect.PluginServiceHandler     = (*Server)(nil)
	_ rewindv1connect.EventStoreServiceHandler = (*Server)(nil)
)
