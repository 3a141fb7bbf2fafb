package api

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/internal/telemetry"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// BenchmarkObservabilityOff is what a unary call pays for observability
// with tracing off: the RPC metrics interceptor (a clock read, a labelled
// histogram and, for a failure, a counter), and the tracing helpers of a
// publish and a stream, which return at once.
func BenchmarkObservabilityOff(b *testing.B) {
	o := newObservability(telemetry.Config{}, hclog.NewNullLogger())
	if o.spans != nil || o.tracer != nil {
		b.Fatal("tracing is on with the zero Config")
	}
	call := o.rpc.WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) { return nil, nil })
	req := connect.NewRequest(&emptypb.Empty{})
	sreq := &rewindv1.SubscribeRequest{Topic: "t"}
	recs := make([]broker.PublishRecord, 1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		call(ctx, req)
		if _, err := o.stampTrace(ctx, recs); err != nil {
			b.Fatal(err)
		}
		_, end := o.startCommit(ctx, "t", 1)
		end(nil)
		_, endStream := o.startStream(ctx, sreq, nil)
		endStream(nil)
	}
}
