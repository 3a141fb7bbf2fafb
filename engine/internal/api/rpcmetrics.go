package api

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// rpcMetrics times every RPC this node serves and counts those that fail,
// by procedure and Connect code: rewind_rpc_duration_seconds and
// rewind_rpc_errors_total (docs/operations.md, "RPCs"). It is a Connect
// interceptor on every public handler, so calls forwarded by other
// members are counted where they are served too, and a call the ACLs
// refuse is counted with its code. A request refused before Connect sees
// it (no valid credential under auth, a body over the limits, an unknown
// path) is not an RPC and is not counted here.
//
// Cardinality: procedure is one of the fixed procedures of the services
// (Connect routes nothing else to a handler), code one of 17 values.
type rpcMetrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

// codeOK is the code label of a call that succeeded.
const codeOK = "ok"

func newRPCMetrics() *rpcMetrics {
	return &rpcMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rewind_rpc_duration_seconds",
			Help: "Time this node took to serve an RPC, by procedure and Connect code (ok on success); a stream (Subscribe) is timed from its request to its end.",
			// publishBuckets: 100 µs to about 26 s.
			Buckets: publishBuckets,
		}, []string{"procedure", "code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rewind_rpc_errors_total",
			Help: "RPCs this node served that failed, by procedure and Connect code (canceled: the client went away).",
		}, []string{"procedure", "code"}),
	}
}

// collectors are the families to register on a registry.
func (m *rpcMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.duration, m.errors}
}

func (m *rpcMetrics) observe(procedure string, d time.Duration, err error) {
	code := codeOK
	if err != nil {
		code = connect.CodeOf(err).String()
		m.errors.WithLabelValues(procedure, code).Inc()
	}
	m.duration.WithLabelValues(procedure, code).Observe(d.Seconds())
}

// WrapUnary implements connect.Interceptor.
func (m *rpcMetrics) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		start := time.Now()
		resp, err := next(ctx, req)
		m.observe(req.Spec().Procedure, time.Since(start), err)
		return resp, err
	}
}

// WrapStreamingClient implements connect.Interceptor: clients are not
// timed.
func (m *rpcMetrics) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (m *rpcMetrics) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		m.observe(conn.Spec().Procedure, time.Since(start), err)
		return err
	}
}

// MetricsHandler serves the node's Prometheus exposition without
// authentication, for a listener of its own that serves nothing else
// (`rewind serve --metrics-listen`): whoever reaches that address may
// scrape, and can do nothing else there. Handler's /metrics is the same
// exposition behind the cluster admin right when auth is on.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metricsHandler())
	return mux
}
