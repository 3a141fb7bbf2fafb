package client

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// recordTraceHeader asks the server to store a publish's trace context in
// its records (the server's api.RecordTraceHeader).
const recordTraceHeader = "Rewind-Record-Trace"

// WithRecordTraceContext asks the server to store each publish's W3C trace
// context in its records, as a "traceparent" header (and "tracestate"),
// so that the spans of their delivery, live or replayed, link to the
// publish (docs/operations.md, "Tracing"). The trace context is the one
// the request carries: add an OpenTelemetry interceptor, for example
//
//	ic, _ := otelconnect.NewInterceptor()
//	c := client.New(addr, client.WithConnectOptions(connect.WithInterceptors(ic)), client.WithRecordTraceContext())
//
// A server that traces stores its publish span's context instead. Records
// that already have a traceparent header keep it. The client itself
// depends on no tracing library.
func WithRecordTraceContext() Option {
	return WithConnectOptions(connect.WithInterceptors(recordTraceInterceptor{}))
}

type recordTraceInterceptor struct{}

func (recordTraceInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().Procedure == rewindv1connect.PublishServicePublishProcedure {
			req.Header().Set(recordTraceHeader, "1")
		}
		return next(ctx, req)
	}
}

func (recordTraceInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (recordTraceInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
