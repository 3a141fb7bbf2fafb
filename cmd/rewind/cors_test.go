package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestCORSLetsBrowsersReadRewindsHints: a page on an allowed origin can
// read the headers Rewind's clients follow (the leader to go to, the
// coordinator, whether a refused request was stored), or a browser client
// could only guess at the next node, and may send trace context; another origin gets no CORS headers.
func TestCORSLetsBrowsersReadRewindsHints(t *testing.T) {
	addr := enginetest.FreeAddr(t)
	s := startServer(t, t.TempDir(), addr, "--allow-origin", "https://app.example")
	for _, origin := range []string{"https://app.example", "https://other.example"} {
		req, err := http.NewRequest(http.MethodOptions, s.url+"/rewind.v1.TopicService/ListTopics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		expose := resp.Header.Get("Access-Control-Expose-Headers")
		if origin == "https://other.example" {
			if resp.Header.Get("Access-Control-Allow-Origin") != "" || expose != "" {
				t.Errorf("an origin not allowed got CORS headers: %v", resp.Header)
			}
			continue
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("allowed origin: Access-Control-Allow-Origin %q", resp.Header.Get("Access-Control-Allow-Origin"))
		}
		for _, h := range []string{"Rewind-Leader", "Rewind-Leader-Address", "Rewind-Coordinator", "Rewind-Not-Stored", "Grpc-Status"} {
			if !strings.Contains(expose, h) {
				t.Errorf("Access-Control-Expose-Headers %q lacks %s", expose, h)
			}
		}
		// A browser may send trace context, and ask for it to be kept in
		// the records it publishes.
		allow := resp.Header.Get("Access-Control-Allow-Headers")
		for _, h := range []string{"Authorization", "Traceparent", "Tracestate", "Rewind-Record-Trace"} {
			if !strings.Contains(allow, h) {
				t.Errorf("Access-Control-Allow-Headers %q lacks %s", allow, h)
			}
		}
	}
}
