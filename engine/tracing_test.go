package engine_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestTracePublishToDelivery follows one record through a real node on
// loopback with the real Go client, both traced into the OpenTelemetry
// SDK's in-memory exporter: the client's publish span, the node's server
// span, the raft commit under it, the traceparent stored in the record,
// and the delivery spans of a live stream and of a replay, which link to
// (or, when the node trusts its callers' trace context, are children of)
// the publish. Without trust, the node's spans start a trace of their own
// that links to the client's.
func TestTracePublishToDelivery(t *testing.T) {
	for _, trust := range []bool{true, false} {
		name := map[bool]string{true: "trust-client", false: "own-trace"}[trust]
		t.Run(name, func(t *testing.T) { tracePublishToDelivery(t, trust) })
	}
}

func tracePublishToDelivery(t *testing.T, trust bool) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	node := enginetest.StartNode(t, engine.Config{Telemetry: engine.TelemetryConfig{Tracer: tp, TrustRemote: trust}})
	ic, err := otelconnect.NewInterceptor(otelconnect.WithTracerProvider(tp), otelconnect.WithPropagator(propagation.TraceContext{}), otelconnect.WithoutMetrics())
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(node.URL, client.WithConnectOptions(connect.WithInterceptors(ic)), client.WithRecordTraceContext())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "orders", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	live, err := c.Subscribe(ctx, "orders", client.From(client.Latest()))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close() // Subscribe returned after the stream's Started event

	res, err := c.Publish(ctx, "orders", client.Message{Value: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].MessageID
	var got client.Record
	waitEvent(t, live, func(ev client.Event) bool {
		if r, ok := ev.(*client.Records); ok && len(r.Records) > 0 {
			got = r.Records[0]
			return true
		}
		return false
	})
	replay, err := c.Subscribe(ctx, "orders", client.From(client.Earliest()), client.Until(client.End()))
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	replayed := 0
	for replay.Next() {
		if r, ok := replay.Event().(*client.Records); ok {
			replayed += len(r.Records)
		}
	}
	if err := replay.Err(); err != nil || replayed != 1 {
		t.Fatalf("replay: %d records, %v", replayed, err)
	}

	// Spans are exported when they end: a delivery's just after its
	// event is handed to the transport, a stream's when it ends (the live
	// one once its client closes it).
	live.Close()
	var spans tracetest.SpanStubs
	deadline := time.Now().Add(time.Minute)
	for {
		spans = exp.GetSpans()
		if len(named(spans, "rewind.deliver")) == 2 && len(named(spans, "rewind.stream")) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not two delivery and two stream spans in time: %v", names(spans))
		}
		time.Sleep(10 * time.Millisecond) // poll: the exporter has no notification
	}

	const procedure = "rewind.v1.PublishService/Publish"
	clientSpan := only(t, spans, procedure, trace.SpanKindClient)
	serverSpan := only(t, spans, procedure, trace.SpanKindServer)
	commit := only(t, spans, "rewind.publish.commit", trace.SpanKindInternal)
	if trust {
		if serverSpan.Parent.SpanID() != clientSpan.SpanContext.SpanID() || serverSpan.SpanContext.TraceID() != clientSpan.SpanContext.TraceID() {
			t.Errorf("trusted: the server span is not the client span's child")
		}
	} else {
		if serverSpan.SpanContext.TraceID() == clientSpan.SpanContext.TraceID() {
			t.Errorf("untrusted: the server span joined the client's trace")
		}
		if !linksTo(serverSpan, clientSpan.SpanContext) {
			t.Errorf("untrusted: the server span does not link to the client's span")
		}
	}
	if commit.Parent.SpanID() != serverSpan.SpanContext.SpanID() || commit.SpanContext.TraceID() != serverSpan.SpanContext.TraceID() {
		t.Errorf("the commit span is not the publish's child")
	}

	// The record carries the publish span's context.
	want := "00-" + serverSpan.SpanContext.TraceID().String() + "-" + serverSpan.SpanContext.SpanID().String() + "-01"
	if v := header(got, "traceparent"); v != want {
		t.Errorf("the record's traceparent is %q, want the publish span's %q", v, want)
	}

	streams := named(spans, "rewind.stream")
	for _, d := range named(spans, "rewind.deliver") {
		if d.SpanKind != trace.SpanKindConsumer {
			t.Errorf("delivery span kind %v", d.SpanKind)
		}
		if attr(d, "messaging.message.id") != id {
			t.Errorf("delivery span of message %q, want %q", attr(d, "messaging.message.id"), id)
		}
		if trust {
			// publish → commit, publish → delivery: one trace.
			if d.Parent.SpanID() != serverSpan.SpanContext.SpanID() || d.SpanContext.TraceID() != clientSpan.SpanContext.TraceID() {
				t.Errorf("trusted: the delivery span is not the publish's child in the client's trace")
			}
			if !slices.ContainsFunc(streams, func(s tracetest.SpanStub) bool { return linksTo(d, s.SpanContext) }) {
				t.Errorf("trusted: the delivery span links to no stream span")
			}
		} else {
			if !linksTo(d, serverSpan.SpanContext) {
				t.Errorf("untrusted: the delivery span does not link to the publish span")
			}
			if !slices.ContainsFunc(streams, func(s tracetest.SpanStub) bool {
				return s.SpanContext.SpanID() == d.Parent.SpanID() && s.SpanContext.TraceID() == d.SpanContext.TraceID()
			}) {
				t.Errorf("untrusted: the delivery span is not a stream span's child")
			}
		}
	}
	var replayStream *tracetest.SpanStub
	for i, s := range streams {
		if attr(s, "rewind.stream.start") == "earliest" {
			replayStream = &streams[i]
		}
	}
	if replayStream == nil {
		t.Fatalf("no span of the replay stream: %v", names(spans))
	}
	if attr(*replayStream, "messaging.destination.name") != "orders" || attr(*replayStream, "rewind.stream.records") != "1" {
		t.Errorf("replay stream span attributes %v", replayStream.Attributes)
	}
}

func waitEvent(t *testing.T, s *client.Subscription, done func(client.Event) bool) {
	t.Helper()
	for s.Next() {
		if done(s.Event()) {
			return
		}
	}
	t.Fatalf("stream ended: %v", s.Err())
}

func named(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func only(t *testing.T, spans tracetest.SpanStubs, name string, kind trace.SpanKind) tracetest.SpanStub {
	t.Helper()
	var out []tracetest.SpanStub
	for _, s := range named(spans, name) {
		if s.SpanKind == kind {
			out = append(out, s)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d spans %s of kind %v, want 1: %v", len(out), name, kind, names(spans))
	}
	return out[0]
}

func linksTo(s tracetest.SpanStub, sc trace.SpanContext) bool {
	// Not SpanContext.Equal: a link to a context read off the wire is
	// marked remote.
	return slices.ContainsFunc(s.Links, func(l sdktrace.Link) bool {
		return l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID()
	})
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

func header(r client.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestRecordTraceWithTracingOff: a node that does not trace still stores
// the caller's trace context in the records of a publish that asks for it
// (the traceparent of the client's span), leaves alone a record that has a
// traceparent of its own and a publish that does not ask, and refuses a
// request header it cannot read with InvalidArgument.
func TestRecordTraceWithTracingOff(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	node := enginetest.StartNode(t, engine.Config{})
	ic, err := otelconnect.NewInterceptor(otelconnect.WithTracerProvider(tp), otelconnect.WithPropagator(propagation.TraceContext{}), otelconnect.WithoutMetrics())
	if err != nil {
		t.Fatal(err)
	}
	traced := client.New(node.URL, client.WithConnectOptions(connect.WithInterceptors(ic)), client.WithRecordTraceContext())
	plain := client.New(node.URL, client.WithConnectOptions(connect.WithInterceptors(ic)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := traced.CreateTopic(ctx, "orders", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	const own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if _, err := traced.Publish(ctx, "orders", client.Message{Value: []byte("a")},
		client.Message{Value: []byte("b"), Headers: []client.Header{{Key: "traceparent", Value: []byte(own)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Publish(ctx, "orders", client.Message{Value: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	pubs := named(exp.GetSpans(), "rewind.v1.PublishService/Publish")
	if len(pubs) != 2 {
		t.Fatalf("%d client publish spans, want 2", len(pubs))
	}
	sc := pubs[0].SpanContext
	want := map[string]string{
		"a": "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01", // the client's span
		"b": own,                                                                // its own
		"c": "",                                                                 // not asked
	}
	sub, err := plain.Subscribe(ctx, "orders", client.From(client.Earliest()), client.Until(client.End()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	n := 0
	for sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok {
			for _, rec := range r.Records {
				n++
				if got := header(rec, "traceparent"); got != want[string(rec.Value)] {
					t.Errorf("record %s: traceparent %q, want %q", rec.Value, got, want[string(rec.Value)])
				}
			}
		}
	}
	if sub.Err() != nil || n != 3 {
		t.Fatalf("read %d records, %v", n, sub.Err())
	}

	// The Connect protocol's JSON form, with the header a client may not
	// get right.
	req, _ := http.NewRequest(http.MethodPost, node.URL+"/rewind.v1.PublishService/Publish", strings.NewReader(`{"topic":"orders","records":[{"value":"ZA=="}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Rewind-Record-Trace", "yes please")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"invalid_argument"`) || !strings.Contains(string(body), "Rewind-Record-Trace") {
		t.Errorf("a publish with Rewind-Record-Trace: yes please: %d %s, want InvalidArgument naming the header", resp.StatusCode, body)
	}

	// A caller's tracestate is stored when short; a long one (the
	// propagator takes about 16 KiB, which every record of a publish
	// would carry) is not, while its traceparent still is.
	short := "k=v"
	var entries []string
	for i := range 5 { // a valid tracestate of 5 entries, 524 bytes
		entries = append(entries, fmt.Sprintf("k%d=%s", i, strings.Repeat("v", 100)))
	}
	long := strings.Join(entries, ",")
	for i, st := range []string{short, long} {
		body := fmt.Sprintf(`{"topic":"orders","records":[{"value":%q}]}`, base64.StdEncoding.EncodeToString([]byte{'e' + byte(i)}))
		req, _ := http.NewRequest(http.MethodPost, node.URL+"/rewind.v1.PublishService/Publish", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Rewind-Record-Trace", "1")
		req.Header.Set("traceparent", own)
		req.Header.Set("tracestate", st)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("publish with a tracestate of %d bytes: %d", len(st), resp.StatusCode)
		}
	}
	sub, err = plain.Subscribe(ctx, "orders", client.From(client.Offset(3)), client.Until(client.End()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	wantState := map[string]string{"e": short, "f": ""}
	n = 0
	for sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok {
			for _, rec := range r.Records {
				n++
				if got := header(rec, "traceparent"); got != own {
					t.Errorf("record %s: traceparent %q, want %q", rec.Value, got, own)
				}
				if got := header(rec, "tracestate"); got != wantState[string(rec.Value)] {
					t.Errorf("record %s: tracestate of %d bytes, want %d", rec.Value, len(got), len(wantState[string(rec.Value)]))
				}
			}
		}
	}
	if sub.Err() != nil || n != 2 {
		t.Fatalf("read %d records after offset 3, %v", n, sub.Err())
	}
}
