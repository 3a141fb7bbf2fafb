package telemetry

import (
	"context"
	"errors"
	"testing"
)

// otelVars are every variable FromEnv or the SDK reads here; each case
// starts with all of them unset.
var otelVars = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_PROPAGATORS", "OTEL_SERVICE_NAME"}

// TestFromEnv: with no variable set tracing is off; an exporter named, or
// an OTLP endpoint alone, turns it on; OTEL_SDK_DISABLED and "none" keep
// it off; the sampler variable is honoured; values FromEnv cannot honour
// are errors wrapping ErrConfig. No exporter here connects anywhere:
// OTLP exporters dial lazily, and the spans of these cases are never
// exported.
func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		on      bool
		sampled bool
		err     bool
	}{
		{name: "nothing set"},
		{name: "console", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, on: true, sampled: true},
		{name: "endpoint alone", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true, sampled: true},
		{name: "traces endpoint, grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, sampled: true},
		{name: "none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "sampler off", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "always_off"}, on: true},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
		{name: "unknown protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
		{name: "unknown propagator", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_PROPAGATORS": "b3"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range otelVars {
				t.Setenv(v, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, shutdown, err := FromEnv(context.Background())
			if tc.err {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("FromEnv: %v, want an ErrConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer shutdown(context.Background())
			if cfg.Enabled() != tc.on {
				t.Fatalf("tracing on = %v, want %v", cfg.Enabled(), tc.on)
			}
			if !tc.on {
				return
			}
			if cfg.Propagator == nil {
				t.Error("no propagator")
			}
			_, span := cfg.Tracer.Tracer("test").Start(context.Background(), "probe")
			if got := span.SpanContext().IsSampled(); got != tc.sampled {
				t.Errorf("a root span sampled = %v, want %v", got, tc.sampled)
			}
			// Not ended: nothing is exported.
		})
	}
}
