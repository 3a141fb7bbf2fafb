package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/telemetry"
)

// telemetryFlags are serve's observability flags: a scrape-only address,
// and how far a node trusts its callers' trace context. Tracing itself is
// configured by the standard OTEL_* variables (telemetry.FromEnv).
type telemetryFlags struct {
	metricsListen string
	trustClient   bool

	// Set by start.
	ln      net.Listener
	http    engine.HTTPConfig
	flushTo func(context.Context) error
}

func (t *telemetryFlags) register(f *pflag.FlagSet) {
	f.StringVar(&t.metricsListen, "metrics-listen", "", "also serve GET /metrics on this address, without authentication, and nothing else there: a scraper needs no token, and whoever reaches the address can do nothing but scrape (keep it on a network only scrapers reach); default: /metrics only on --listen, behind the cluster admin right with --auth")
	f.BoolVar(&t.trustClient, "trace-trust-client", false, "with tracing on (OTEL_* variables, docs/operations.md \"Tracing\"): make the trace context a request carries the parent of the node's spans, so they join the caller's trace and follow its sampling decision; default: the node's spans start a trace of their own, linked to the caller's")
}

// start turns tracing on from the OTEL_* variables (into cfg.Telemetry)
// and binds --metrics-listen, so that a bad variable or a busy address
// fails before the data directory is opened. The returned function stops
// both, flushing the spans still batched (up to 5 s).
func (t *telemetryFlags) start(ctx context.Context, log hclog.Logger, cfg *engine.Config, hc engine.HTTPConfig) (func(), error) {
	tc, flush, err := telemetry.FromEnv(ctx)
	if err != nil {
		return nil, err
	}
	if tc.Enabled() {
		tl := log.Named("tracing")
		// The SDK reports export failures (a collector down) here.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { tl.Warn("export failed", "error", err) }))
		tc.TrustRemote = t.trustClient
		log.Info("tracing on", "trust-client", t.trustClient)
	}
	cfg.Telemetry = tc
	t.flushTo = flush
	if t.metricsListen != "" {
		ln, err := net.Listen("tcp", t.metricsListen)
		if err != nil {
			flush(ctx)
			return nil, fmt.Errorf("--metrics-listen: %w", err)
		}
		host, _, _ := net.SplitHostPort(t.metricsListen)
		if host != "" {
			hc.AllowedHosts = append(hc.AllowedHosts, host)
		}
		t.ln, t.http = ln, hc
	}
	return t.stop, nil
}

func (t *telemetryFlags) stop() {
	if t.ln != nil {
		t.ln.Close() // a no-op once Node.Serve's metrics server closed it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if t.flushTo != nil {
		t.flushTo(ctx)
	}
}

// metricsServe has sc serve /metrics on --metrics-listen (if given):
// engine.Node.Serve stops it with the API, before the store closes.
func (t *telemetryFlags) metricsServe(sc *engine.ServeConfig) {
	if t.ln != nil {
		sc.MetricsListener, sc.MetricsHTTP = t.ln, t.http
	}
}
