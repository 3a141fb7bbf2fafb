package engine_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rewind-io/rewind/engine"
)

// BenchmarkPublishOneTraced is BenchmarkPublishOne on a node that traces
// every call (always-on sampling, batched into an exporter that discards):
// the cost of tracing on, beside BenchmarkPublishOne's tracing off.
func BenchmarkPublishOneTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	benchPublishOne(b, engine.Config{Telemetry: engine.TelemetryConfig{Tracer: tp}})
}
