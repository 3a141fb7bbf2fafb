package engine_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// BenchmarkPublishOneTraced is BenchmarkPublishOne on a node that traces
// every call (always-on sampling, batched into an exporter that discards):
// the cost of tracing on, beside BenchmarkPublishOne's tracing off.
func BenchmarkPublishOneTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	c := client.New(enginetest.StartNode(b, engine.Config{Telemetry: engine.TelemetryConfig{Tracer: tp}}).URL)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
		b.Fatal(err)
	}
	msg := client.Message{Value: make([]byte, 100)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Publish(ctx, "t", msg); err != nil {
			b.Fatal(err)
		}
	}
}
