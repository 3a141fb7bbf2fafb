package api

import (
	"context"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/stream"
	"github.com/rewind-io/rewind/internal/telemetry"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Tracing (docs/operations.md, "Tracing"). With telemetry.Config's zero
// value nothing here runs: no interceptor, no span, and the helpers return
// at their first line. Otherwise:
//
//   - every RPC gets a server span (otelconnect), a trace of its own linked
//     to the caller's span, or its child with TrustRemote;
//   - a publish gets a "rewind.publish.commit" span around the broker's
//     append: routing to the partition leader, the raft proposal, the
//     commit on a majority and the apply;
//   - a Subscribe gets a "rewind.stream" span for the stream's life, and a
//     "rewind.deliver" span for each record it sends that carries trace
//     context in its headers, linked to the record's publish span (its
//     child with TrustRemote: the record's context came from a client).
//
// A publish whose request carries RecordTraceHeader stores the publish's
// trace context in each record, as the W3C header "traceparent" (and
// "tracestate"): the publish's server span when tracing is on, else the
// caller's traceparent, so that a consumer can link to it even when the
// node itself does not trace. A record that already has a traceparent
// header keeps it.

// RecordTraceHeader asks a publish to store its trace context in its
// records' headers: "1" or "true". Any other value is refused with
// InvalidArgument. sdk/client's WithRecordTraceContext sets it.
const RecordTraceHeader = "Rewind-Record-Trace"

// The record headers that carry a record's trace context (W3C trace
// context, https://www.w3.org/TR/trace-context/).
const (
	TraceParentKey = "traceparent"
	TraceStateKey  = "tracestate"
)

// maxStampedTraceState is the longest tracestate stored in records; a
// longer one (the propagator accepts about 16 KiB) is left out, so a
// caller cannot make every record of a publish that much larger than
// what it sent.
const maxStampedTraceState = 256

const instrumentation = "github.com/rewind-io/rewind/engine"

// observability is a Server's tracing and per-RPC metrics.
type observability struct {
	cfg telemetry.Config
	// tracer makes the node's own spans, spans is the RPCs' span
	// interceptor (otelconnect); both are nil when tracing is off.
	tracer trace.Tracer
	spans  connect.Interceptor
	// rpc times and counts every RPC, tracing on or off.
	rpc *rpcMetrics
}

func newObservability(cfg telemetry.Config, log hclog.Logger) observability {
	o := observability{cfg: cfg.WithDefaults(), rpc: newRPCMetrics()}
	if !cfg.Enabled() {
		return o
	}
	opts := []otelconnect.Option{
		otelconnect.WithTracerProvider(o.cfg.Tracer),
		otelconnect.WithPropagator(o.cfg.Propagator),
		otelconnect.WithoutMetrics(), // rpcMetrics, in Prometheus
	}
	if o.cfg.TrustRemote {
		opts = append(opts, otelconnect.WithTrustRemote())
	}
	ic, err := otelconnect.NewInterceptor(opts...)
	if err != nil {
		// Only its meter's instruments can fail (the global meter's).
		log.Error("tracing is off: the RPC span interceptor failed", "error", err)
		return o
	}
	o.tracer, o.spans = cfg.Tracer.Tracer(instrumentation), ic
	return o
}

// interceptors are the observability interceptors of every handler,
// outermost first: the RPC's span, then its duration and code (so a call
// that authorization refuses is timed and counted too).
func (o observability) interceptors() []connect.Interceptor {
	if o.spans == nil {
		return []connect.Interceptor{o.rpc}
	}
	return []connect.Interceptor{o.spans, o.rpc}
}

// noEnd is the end of a span that was not started.
func noEnd(error) {}

// startCommit starts the span of a publish's append (routing, raft
// commit, apply); end ends it with the append's error.
func (o observability) startCommit(ctx context.Context, topic string, records int) (context.Context, func(error)) {
	if o.tracer == nil {
		return ctx, noEnd
	}
	ctx, span := o.tracer.Start(ctx, "rewind.publish.commit", trace.WithAttributes(
		attribute.String("messaging.system", "rewind"),
		attribute.String("messaging.destination.name", topic),
		attribute.Int("messaging.batch.message_count", records),
	))
	return ctx, func(err error) { endSpan(span, err); span.End() }
}

// endSpan sets span's status from err.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(otelcodes.Error, connect.CodeOf(err).String())
	}
}

// stampTrace stores the publish's trace context in the headers of recs,
// when the request asks for it (RecordTraceHeader), and returns the bytes
// it added (which the caller charges to the publisher's quota). Without a
// trace context (tracing off and no traceparent from the caller) it does
// nothing. A tracestate over maxStampedTraceState is not stored.
func (o observability) stampTrace(ctx context.Context, recs []broker.PublishRecord) (added int, err error) {
	ci, ok := connect.CallInfoForHandlerContext(ctx)
	if !ok {
		return 0, nil
	}
	switch v := ci.RequestHeader().Get(RecordTraceHeader); strings.ToLower(v) {
	case "":
		return 0, nil
	case "1", "true":
	default:
		return 0, invalidf("header %s: %q: want 1 or true", RecordTraceHeader, v)
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		// Tracing is off here: carry the caller's own context.
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(ci.RequestHeader()))
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	parent := carrier[TraceParentKey]
	if parent == "" {
		return 0, nil
	}
	stamp := []record.Header{{Key: []byte(TraceParentKey), Value: []byte(parent)}}
	size := len(TraceParentKey) + len(parent)
	if st := carrier[TraceStateKey]; st != "" && len(st) <= maxStampedTraceState {
		stamp = append(stamp, record.Header{Key: []byte(TraceStateKey), Value: []byte(st)})
		size += len(TraceStateKey) + len(st)
	}
	for i := range recs {
		r := &recs[i]
		if len(r.Headers)+len(stamp) > broker.MaxHeaders || hasHeader(r.Headers, TraceParentKey) {
			continue
		}
		// r.Headers has no spare capacity (Publish clips it): append
		// copies, never writing into another record's headers.
		r.Headers = append(r.Headers, stamp...)
		added += size
	}
	return added, nil
}

func hasHeader(hs []record.Header, key string) bool {
	for _, h := range hs {
		if string(h.Key) == key {
			return true
		}
	}
	return false
}

// startStream starts the span of a Subscribe stream and returns the sink
// to send through, which starts a delivery span for each record with
// trace context; end ends the stream's span with the stream's error.
func (o observability) startStream(ctx context.Context, req *rewindv1.SubscribeRequest, sink stream.Sink) (stream.Sink, func(error)) {
	if o.tracer == nil {
		return sink, noEnd
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "rewind"),
		attribute.String("messaging.destination.name", req.GetTopic()),
		attribute.String("rewind.stream.start", startName(req.GetStart())),
		attribute.Bool("rewind.stream.follow", req.GetStop() == nil),
		attribute.Bool("rewind.stream.filtered", req.GetFilter() != nil),
	}
	if g := req.GetGroup(); g != "" {
		attrs = append(attrs, attribute.String("messaging.consumer.group.name", g))
	}
	_, span := o.tracer.Start(ctx, "rewind.stream", trace.WithAttributes(attrs...))
	ts := &tracingSink{out: sink, tracer: o.tracer, trust: o.cfg.TrustRemote, stream: span, topic: req.GetTopic()}
	return ts, func(err error) {
		span.SetAttributes(attribute.Int64("rewind.stream.records", ts.records))
		if connect.CodeOf(err) != connect.CodeCanceled {
			endSpan(span, err)
		}
		span.End()
	}
}

// startName names a start position for the stream span.
func startName(p *rewindv1.StartPosition) string {
	switch p.GetPosition().(type) {
	case nil, *rewindv1.StartPosition_Earliest:
		return "earliest"
	case *rewindv1.StartPosition_Latest:
		return "latest"
	case *rewindv1.StartPosition_Offset:
		return "offset"
	case *rewindv1.StartPosition_Time:
		return "time"
	case *rewindv1.StartPosition_MessageId:
		return "message_id"
	case *rewindv1.StartPosition_RecordsBack:
		return "records_back"
	case *rewindv1.StartPosition_TimeBack:
		return "time_back"
	case *rewindv1.StartPosition_ResumeToken:
		return "resume_token"
	case *rewindv1.StartPosition_KeyVersion:
		return "key_version"
	}
	return "other"
}

// tracingSink starts a "rewind.deliver" span for each record it sends
// that carries a valid traceparent header, and ends it once the event is
// handed to the transport. It is driven by the stream's one goroutine.
type tracingSink struct {
	out     stream.Sink
	tracer  trace.Tracer
	trust   bool
	stream  trace.Span
	topic   string
	records int64
	spans   []trace.Span // reused between events
}

// Send implements stream.Sink.
func (t *tracingSink) Send(resp *rewindv1.SubscribeResponse) error {
	recs := resp.GetRecords().GetRecords()
	t.records += int64(len(recs))
	t.spans = t.spans[:0]
	for _, r := range recs {
		if sc := traceOf(r); sc.IsValid() {
			t.spans = append(t.spans, t.deliver(sc, r))
		}
	}
	err := t.out.Send(resp)
	for _, s := range t.spans {
		endSpan(s, err)
		s.End()
	}
	clear(t.spans)
	return err
}

// deliver starts the delivery span of r, published in the trace of sc.
func (t *tracingSink) deliver(sc trace.SpanContext, r *rewindv1.Record) trace.Span {
	streamLink := trace.Link{SpanContext: t.stream.SpanContext()}
	publishLink := trace.Link{SpanContext: sc}
	ctx := trace.ContextWithSpan(context.Background(), t.stream)
	links := []trace.Link{publishLink}
	if t.trust {
		// The record's context is the parent: the delivery joins the
		// publisher's trace, and links to the stream.
		ctx = trace.ContextWithRemoteSpanContext(context.Background(), sc)
		links = []trace.Link{streamLink}
	}
	_, span := t.tracer.Start(ctx, "rewind.deliver", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("messaging.system", "rewind"),
			attribute.String("messaging.operation.type", "receive"),
			attribute.String("messaging.destination.name", t.topic),
			attribute.String("messaging.destination.partition.id", strconv.FormatUint(uint64(r.GetPartition()), 10)),
			attribute.String("messaging.message.id", r.GetMessageId()),
			attribute.Int64("rewind.offset", int64(r.GetOffset())),
		))
	return span
}

// traceOf reads the trace context of a record's headers; invalid if it has
// none or it does not parse.
func traceOf(r *rewindv1.Record) trace.SpanContext {
	var parent, state string
	for _, h := range r.GetHeaders() {
		switch h.GetKey() {
		case TraceParentKey:
			parent = string(h.GetValue())
		case TraceStateKey:
			state = string(h.GetValue())
		}
	}
	if parent == "" {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{TraceParentKey: parent}
	if state != "" {
		c[TraceStateKey] = state
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c))
}
