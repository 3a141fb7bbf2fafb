// Package telemetry is how a node is traced: the tracer its Connect
// handlers and its own spans use, and the propagator that reads W3C trace
// context from requests and writes it into records.
//
// A node takes a Config (engine.Config.Telemetry). Its zero value turns
// tracing off: no interceptor is installed, no span is started, and the
// request path pays nothing for it (docs/benchmarks.md, "Tracing off").
// `rewind serve` builds the Config from the standard OpenTelemetry
// environment variables with FromEnv; an embedding program may instead
// give any trace.TracerProvider (the tests give the SDK's with an
// in-memory exporter).
//
// The caller's duties:
//
//  1. Build the Config before engine.Open and pass it in engine.Config;
//     the node copies it.
//  2. Call the shutdown function FromEnv returned after the node closed,
//     so that the spans still batched are exported.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config says how a node traces. The zero value turns tracing off.
type Config struct {
	// Tracer makes the node's spans: one per RPC (connectrpc.com/otelconnect),
	// one for the raft commit of each publish, one per Subscribe stream and
	// one per delivered record that carries trace context. Nil: tracing is
	// off.
	Tracer trace.TracerProvider
	// Propagator reads trace context from requests and writes it into
	// records' headers. Default: W3C tracecontext and baggage.
	Propagator propagation.TextMapPropagator
	// TrustRemote makes the trace context a request carries the parent of
	// its server span, so the node's spans join the caller's trace.
	// Default false: the server span starts a trace of its own and links
	// to the caller's span, so a client cannot choose the node's traces or
	// force them to be sampled.
	TrustRemote bool
}

// Enabled reports whether c traces.
func (c Config) Enabled() bool { return c.Tracer != nil }

// WithDefaults returns c with the default propagator filled in.
func (c Config) WithDefaults() Config {
	if c.Propagator == nil {
		c.Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return c
}

// ServiceName is the service.name of a node's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const ServiceName = "rewind"

// Exporters are the OTEL_TRACES_EXPORTER values FromEnv accepts.
var Exporters = []string{"otlp", "console", "none"}

// Protocols are the OTEL_EXPORTER_OTLP_PROTOCOL (and
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) values FromEnv accepts.
var Protocols = []string{"http/protobuf", "grpc"}

// ErrConfig is returned by FromEnv for a variable it cannot honour.
var ErrConfig = errors.New("telemetry")

// FromEnv builds a Config from the standard OpenTelemetry environment
// variables, and the function that flushes and stops its exporter.
//
// Tracing is on when OTEL_TRACES_EXPORTER names an exporter other than
// none, or when it is unset and OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (then the exporter is otlp).
// With none of them set, or OTEL_SDK_DISABLED=true, the Config is the zero
// value: tracing off. The exporters are otlp (OTEL_EXPORTER_OTLP_PROTOCOL
// http/protobuf, the default, or grpc; endpoint, headers, timeout, TLS and
// compression from the OTEL_EXPORTER_OTLP_* variables) and console (spans
// as JSON on standard output). OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG choose the sampler (default parentbased_always_on),
// OTEL_BSP_* tune the batching, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES describe the node (service.name default
// "rewind"), and OTEL_PROPAGATORS may be tracecontext, baggage, both, or
// none. Any other value is an error wrapping ErrConfig.
func FromEnv(ctx context.Context) (Config, func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return Config{}, off, nil
	}
	prop, err := propagatorFromEnv(os.Getenv("OTEL_PROPAGATORS"))
	if err != nil {
		return Config{}, off, err
	}
	names := splitList(os.Getenv("OTEL_TRACES_EXPORTER"))
	if len(names) == 0 && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		names = []string{"otlp"}
	}
	var exporters []sdktrace.SpanExporter
	for _, name := range names {
		exp, err := exporterFromEnv(ctx, name)
		if err != nil {
			return Config{}, off, err
		}
		if exp != nil {
			exporters = append(exporters, exp)
		}
	}
	if len(exporters) == 0 {
		return Config{}, off, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME: they win
	)
	if err != nil {
		return Config{}, off, fmt.Errorf("%w: resource: %v", ErrConfig, err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, exp := range exporters {
		opts = append(opts, sdktrace.WithBatcher(exp)) // OTEL_BSP_*
	}
	// The sampler is the SDK's reading of OTEL_TRACES_SAMPLER(_ARG).
	tp := sdktrace.NewTracerProvider(opts...)
	return Config{Tracer: tp, Propagator: prop}, tp.Shutdown, nil
}

// exporterFromEnv makes the exporter OTEL_TRACES_EXPORTER names; nil for
// none.
func exporterFromEnv(ctx context.Context, name string) (sdktrace.SpanExporter, error) {
	switch name {
	case "none":
		return nil, nil
	case "console":
		return stdouttrace.New()
	case "otlp":
		proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if proto == "" {
			proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		switch proto {
		case "", "http/protobuf":
			return otlptracehttp.New(ctx)
		case "grpc":
			return otlptracegrpc.New(ctx)
		}
		return nil, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL %q: want one of %s", ErrConfig, proto, strings.Join(Protocols, ", "))
	}
	return nil, fmt.Errorf("%w: OTEL_TRACES_EXPORTER %q: want one of %s", ErrConfig, name, strings.Join(Exporters, ", "))
}

// propagatorFromEnv reads OTEL_PROPAGATORS.
func propagatorFromEnv(v string) (propagation.TextMapPropagator, error) {
	names := splitList(v)
	if len(names) == 0 {
		return Config{}.WithDefaults().Propagator, nil
	}
	var ps []propagation.TextMapPropagator
	for _, n := range names {
		switch n {
		case "tracecontext":
			ps = append(ps, propagation.TraceContext{})
		case "baggage":
			ps = append(ps, propagation.Baggage{})
		case "none":
		default:
			return nil, fmt.Errorf("%w: OTEL_PROPAGATORS %q: want tracecontext, baggage or none", ErrConfig, n)
		}
	}
	return propagation.NewCompositeTextMapPropagator(ps...), nil
}

// splitList splits a comma-separated variable, trimmed and lowercased,
// without empty or repeated entries.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
