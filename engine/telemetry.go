package engine

import (
	"net/http"

	"github.com/rewind-io/rewind/internal/telemetry"
)

// TelemetryConfig turns tracing on (Config.Telemetry): a tracer provider
// and a propagator, or the zero value for none. telemetry.FromEnv builds
// one from the standard OTEL_* variables; its fields are documented on the
// type it names, and docs/operations.md ("Tracing") says what is traced.
type TelemetryConfig = telemetry.Config

// MetricsHandler serves GET /metrics, the node's Prometheus exposition
// (text, OpenMetrics or protobuf by the Accept header), and nothing else,
// without authentication: serve it on an address of its own that only
// the scrapers reach (`rewind serve --metrics-listen`). Handler serves the
// same exposition at /metrics, behind the cluster admin right when auth is
// on.
func (n *Node) MetricsHandler() http.Handler { return n.api.MetricsHandler() }
