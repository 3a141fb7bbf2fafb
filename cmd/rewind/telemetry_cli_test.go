//go:build unix

package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestServeTelemetry runs the real binary with tracing on through the
// standard variables (the console exporter, which writes spans to
// standard output) and --metrics-listen: the metrics address serves
// /metrics and nothing else; a publish leaves its spans, under the
// service name given, in the output flushed at shutdown. A variable serve
// cannot honour stops it before it opens anything, naming the variable.
func TestServeTelemetry(t *testing.T) {
	addrs := enginetest.FreeAddrs(t, 2)
	s := &server{url: "http://" + addrs[0]}
	metrics := "http://" + addrs[1]
	pc := enginetest.ProcessConfig{Addr: addrs[0], Dir: t.TempDir(), Args: []string{"--metrics-listen", addrs[1]}, LogLevel: "info"}
	pc.Ready = func(context.Context, *enginetest.Process) error {
		if r := runCLI(t, nil, nil, "--server", s.url, "topic", "list"); r.code != 0 {
			return io.ErrUnexpectedEOF // not yet
		}
		return nil
	}
	pc.Bin = enginetest.Binary(t)
	pc.Env = cliEnv("OTEL_TRACES_EXPORTER=console", "OTEL_SERVICE_NAME=rewind-cli-test")
	s.Process = enginetest.StartProcess(t, pc)

	s.ok(t, nil, "topic", "create", "orders")
	s.ok(t, nil, "publish", "orders", "hello")

	resp, err := http.Get(metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `rewind_rpc_duration_seconds_count{code="ok",procedure="/rewind.v1.PublishService/Publish"} 1`) {
		t.Errorf("--metrics-listen /metrics: %d, without the publish's RPC series:\n%.2000s", resp.StatusCode, body)
	}
	resp, err = http.Post(metrics+"/rewind.v1.TopicService/CreateTopic", "application/json", strings.NewReader(`{"name":"other"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("CreateTopic on the metrics address: %d, want 404", resp.StatusCode)
	}

	s.Stop(t) // flushes the batched spans
	log := s.Log()
	for _, want := range []string{`"Name":"rewind.publish.commit"`, `"Name":"rewind.v1.PublishService/Publish"`, `rewind-cli-test`, "serving metrics"} {
		if !strings.Contains(log, want) {
			t.Errorf("the server's output lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("server output:\n%.4000s", log)
	}

	r := runCLI(t, nil, cliEnv("OTEL_TRACES_EXPORTER=zipkin"), "serve", "--listen", enginetest.FreeAddr(t), "--data", t.TempDir())
	if r.code == 0 || !strings.Contains(r.stderr, "OTEL_TRACES_EXPORTER") {
		t.Errorf("serve with OTEL_TRACES_EXPORTER=zipkin: exit %d, stderr %q; want a failure naming the variable", r.code, r.stderr)
	}
}
