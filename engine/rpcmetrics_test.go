package engine_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// TestRPCMetrics calls two RPCs through a real node, one that succeeds and
// one that fails, and reads what /metrics says of them: one timed call of
// each by procedure and code, one error counted for the failing one and
// none for the other, and a clean promlint. The same scrape asked for
// OpenMetrics answers in OpenMetrics, with the same series.
func TestRPCMetrics(t *testing.T) {
	url := enginetest.StartNode(t, engine.Config{}).URL
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics := rewindv1connect.NewTopicServiceClient(http.DefaultClient, url)
	pub := rewindv1connect.NewPublishServiceClient(http.DefaultClient, url)
	if _, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "orders", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err := pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "nope", Records: []*rewindv1.PublishRecord{{Value: []byte("v")}}})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("publish to a missing topic: %v, want NotFound", err)
	}

	const create, publish = "/rewind.v1.TopicService/CreateTopic", "/rewind.v1.PublishService/Publish"
	s := scrapeMetrics(t, url)
	s.lint(t)
	s.expect(t, 1, "rewind_rpc_duration_seconds", "procedure", create, "code", "ok")
	s.expect(t, 1, "rewind_rpc_duration_seconds", "procedure", publish, "code", "not_found")
	s.expect(t, 1, "rewind_rpc_errors_total", "procedure", publish, "code", "not_found")
	if v, ok := s.value("rewind_rpc_errors_total", "procedure", create, "code", "ok"); ok {
		t.Errorf("a successful call counted as an error: %v", v)
	}
	if _, ok := s.value("rewind_rpc_duration_seconds", "procedure", publish, "code", "ok"); ok {
		t.Error("the failed publish was timed as ok")
	}

	t.Run("openmetrics", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;q=0.5")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
			t.Fatalf("Content-Type %q, want OpenMetrics", ct)
		}
		text := string(body)
		if !strings.HasSuffix(text, "# EOF\n") {
			t.Error("the OpenMetrics exposition does not end with # EOF")
		}
		for _, want := range []string{
			"# TYPE rewind_rpc_errors counter\n",
			`rewind_rpc_errors_total{code="not_found",procedure="` + publish + `"} 1.0`,
			"# TYPE rewind_rpc_duration_seconds histogram\n",
			`rewind_rpc_duration_seconds_count{code="ok",procedure="` + create + `"} 1`,
			"# TYPE rewind_published_records counter\n",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("the OpenMetrics exposition lacks %q", want)
			}
		}
	})
}

// TestMetricsHandlerGrantsNothingElse serves a node with auth on as
// `rewind serve --metrics-listen` does: its MetricsHandler on a listener
// of its own. A scraper reads /metrics there without any credential, while
// the API port's /metrics still wants the cluster admin right; and the
// metrics address serves no RPC, with or without a token, so nothing can be
// published or created through it.
func TestMetricsHandlerGrantsNothingElse(t *testing.T) {
	a := startAuthNode(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := engine.HTTPConfig{}.Server(a.node.MetricsHandler()) // HTTP/1.1 and h2c, as serve does
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() { srv.Close(); <-served }()
	msURL := "http://" + ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	s := scrapeMetrics(t, msURL)
	s.lint(t)
	s.must(t, "rewind_ready")
	resp, err := http.Get(a.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API port's /metrics without a token: %d, want 401", resp.StatusCode)
	}

	for _, tok := range []string{"", a.root} {
		opts := []client.Option{client.WithPublishRetry(1, 0, 0)}
		if tok != "" {
			opts = append(opts, client.WithToken(tok))
		}
		c := client.New(msURL, opts...)
		if _, err := c.CreateTopic(ctx, "orders"); connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Errorf("create a topic through the metrics address (token %v): %v, want Unimplemented (not served)", tok != "", err)
		}
		if _, err := c.Publish(ctx, "orders", client.Message{Value: []byte("v")}); connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Errorf("publish through the metrics address (token %v): %v, want Unimplemented (not served)", tok != "", err)
		}
		for _, path := range []string{"/readyz", "/rewind.v1.TopicService/ListTopics", "/console/"} {
			resp, err := http.Post(msURL+path, "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("POST %s on the metrics address: %d, want 404 or 405", path, resp.StatusCode)
			}
		}
	}
	list, err := a.client(a.root).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("topics after the calls through the metrics address: %v", list)
	}
}
