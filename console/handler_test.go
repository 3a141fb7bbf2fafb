package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandler checks what the console's handler answers: the page, its
// script and style sheet with the CSP, the redirects of /console and of /
// (GET and HEAD), 404 for other files, 405 for writes, and that Mount
// leaves every other path (a POST to / included) to the API.
func TestHandler(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "api "+r.URL.Path) })
	h := Mount(api)
	get := func(method, path string) *http.Response {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec.Result()
	}
	for _, tc := range []struct {
		path, typ, contains string
	}{
		{"/console/", "text/html", `<script type="module" src="console.js">`},
		{"/console/console.js", "text/javascript", "Copy resume token"},
		{"/console/console.css", "text/css", "body"},
	} {
		res := get("GET", tc.path)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", tc.path, res.Status)
			continue
		}
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.typ) {
			t.Errorf("GET %s: Content-Type %q, want %s", tc.path, ct, tc.typ)
		}
		if csp := res.Header.Get("Content-Security-Policy"); csp != CSP {
			t.Errorf("GET %s: Content-Security-Policy %q, want %q", tc.path, csp, CSP)
		}
		if len(body) == 0 || !strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s: %d bytes, want them to contain %q", tc.path, len(body), tc.contains)
		}
	}
	for _, d := range []string{"script-src 'self'", "connect-src 'self'", "default-src 'none'"} {
		if !strings.Contains(CSP, d) {
			t.Errorf("the CSP %q lacks %q", CSP, d)
		}
	}
	if strings.Contains(CSP, "unsafe-inline") || strings.Contains(CSP, "unsafe-eval") {
		t.Errorf("the CSP %q allows inline or eval'd code", CSP)
	}

	res := get("GET", "/console")
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console: %s to %q, want a redirect to /console/", res.Status, res.Header.Get("Location"))
	}
	for _, m := range []string{"GET", "HEAD"} {
		if res := get(m, "/"); res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/console/" {
			t.Errorf("%s /: %s to %q, want a redirect to /console/", m, res.Status, res.Header.Get("Location"))
		}
	}
	if res := get("GET", "/console/nothing.js"); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /console/nothing.js: %s, want 404", res.Status)
	}
	if res := get("POST", "/console/"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /console/: %s, want 405", res.Status)
	}
	for _, p := range []string{"/rewind.v1.TopicService/ListTopics", "/consoles", "/"} {
		res := get("POST", p)
		body, _ := io.ReadAll(res.Body)
		if string(body) != "api "+p {
			t.Errorf("POST %s went to %q, want the API", p, body)
		}
	}
}
