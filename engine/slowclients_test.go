package engine_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/httpedge"
	"github.com/rewind-io/rewind/sdk/client"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// stalledBody is a request body that sends head and then nothing more
// until the test ends: a server that waited for the whole body would never
// answer.
type stalledBody struct {
	io.Reader
	pw *io.PipeWriter
}

func newStalledBody(t *testing.T, head []byte) *stalledBody {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	return &stalledBody{io.MultiReader(bytes.NewReader(head), pr), pw}
}

func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}}
}

func http1Client() *http.Client {
	return &http.Client{Transport: &http.Transport{}}
}

// stalledPost posts a body that stalls after head and returns the answer's
// status and its body with the gRPC status appended. ctx's deadline only
// stops a test that would otherwise hang (the defect): the assertion is the
// answer, never the time it took.
func stalledPost(t *testing.T, c *http.Client, url, contentType string, length int64, header http.Header, head []byte) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := newStalledBody(t, head)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	req.ContentLength = length
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("no answer while the body stalls (the server waits for the body): %v", err)
	}
	// The answer's headers came while the body stalled. The HTTP/2 client
	// ends the answer's stream only once its request is done: end it.
	body.pw.Close()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b) + " grpc-status=" + resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status")
}

// TestAuthBeforeBody (issue 24, finding 5): with auth on, a request
// without valid credentials that declares a 60 MB body and sends a few
// bytes of it is refused with Unauthenticated, in its protocol, while the
// body stalls: the server decides on the headers and reads nothing. Before,
// the Connect handler read the body first and the answer never came.
func TestAuthBeforeBody(t *testing.T) {
	a := startAuthNode(t, nil)
	publish := a.url + rewindv1connect.PublishServicePublishProcedure
	bad := http.Header{"Authorization": {"Bearer rwd_0123456789ab_" + strings.Repeat("A", 43)}}
	for _, c := range []struct {
		name        string
		client      *http.Client
		contentType string
		length      int64
		header      http.Header
		want        string
	}{
		{"connect, no credentials", http1Client(), "application/proto", 60_000_000, nil, `"code":"unauthenticated"`},
		{"connect, bad token", http1Client(), "application/proto", 60_000_000, bad, `"code":"unauthenticated"`},
		{"connect chunked over h2c", h2cClient(), "application/proto", -1, nil, `"code":"unauthenticated"`},
		{"grpc", h2cClient(), "application/grpc", -1, bad, "grpc-status=16"},
		{"grpc-web", http1Client(), "application/grpc-web+proto", 60_000_000, nil, "grpc-status=16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := stalledPost(t, c.client, publish, c.contentType, c.length, c.header, []byte("\x00\x03\x93\x87\x00\x0a\x01t"))
			if !strings.Contains(body, c.want) {
				t.Fatalf("HTTP %d %s, want %s", status, body, c.want)
			}
		})
	}
	if n := strings.Count(a.audit.String(), `"outcome":"unauthenticated"`); n == 0 {
		t.Fatalf("the refusals are not audited:\n%s", a.audit.String())
	}
	// The probes stay open without credentials.
	for _, path := range []string{"/livez", "/readyz", "/healthz"} {
		resp, err := http.Get(a.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, resp.StatusCode)
		}
	}
}

// readUntilClosed reads c until the server closes it (EOF or a reset) and
// returns what it read. The deadline only stops a test that would hang.
func readUntilClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the server kept the connection open (read %d bytes)", len(got))
			}
			return got
		}
	}
}

// TestIdleConnectionsAreClosed (issue 24, finding 5): an HTTP/1 keep-alive
// connection after its request, and an HTTP/2 connection without
// streams, are closed by the server once idle for IdleTimeout. Before,
// they stayed open for as long as the client liked.
func TestIdleConnectionsAreClosed(t *testing.T) {
	addr := enginetest.StartNode(t, engine.Config{}, enginetest.WithHTTP(engine.HTTPConfig{IdleTimeout: 100 * time.Millisecond})).Addr
	t.Run("http1 keep-alive", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if got := readUntilClosed(t, c); !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
			t.Fatalf("answer %q, want 200 then the connection closed", got)
		}
	})
	t.Run("http2 without streams", func(t *testing.T) {
		// A real HTTP/2 client, which answers the server's pings (so the
		// liveness check does not close the connection): only the idle
		// timeout can.
		closed := make(chan error, 1)
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		hc := &http.Client{Transport: &http.Transport{Protocols: p, DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			c, err := net.Dial(network, a)
			if err != nil {
				return nil, err
			}
			return &watchedConn{Conn: c, closed: closed}, nil
		}}}
		resp, err := hc.Get("http://" + addr + "/livez")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		select {
		case err := <-closed:
			t.Logf("closed by the server: %v", err)
		case <-time.After(time.Minute): // only a hang guard
			t.Fatal("the server kept the idle HTTP/2 connection open")
		}
	})
}

// watchedConn reports the first read error: the server closed the
// connection (the client never closes it in the test).
type watchedConn struct {
	net.Conn
	closed chan error
	once   sync.Once
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { c.closed <- err })
	}
	return n, err
}

// TestConnectionCaps (issue 24, finding 5): connections over the
// per-source cap, and over the global cap from any source, are closed as
// they are accepted and counted; a slot freed is taken again.
func TestConnectionCaps(t *testing.T) {
	addr := enginetest.StartNode(t, engine.Config{}, enginetest.WithHTTP(engine.HTTPConfig{MaxConns: 3, MaxConnsPerSource: 2})).Addr
	before := httpedge.Totals()
	dial := func(t *testing.T, from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// served reports whether c gets an answer to a request (false: the
	// server closed it).
	served := func(t *testing.T, c net.Conn) bool {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			return false
		}
		b := make([]byte, 12)
		_, err := io.ReadFull(c, b)
		return err == nil && string(b) == "HTTP/1.1 200"
	}
	a1, a2 := dial(t, "127.0.0.1"), dial(t, "127.0.0.1")
	for i, c := range []net.Conn{a1, a2} {
		if !served(t, c) {
			t.Fatalf("connection %d within the caps was not served", i+1)
		}
	}
	if served(t, dial(t, "127.0.0.1")) {
		t.Fatal("a third connection from one source was served (per-source cap 2)")
	}
	b1 := dial(t, "127.0.0.2")
	if !served(t, b1) {
		t.Fatal("another source's connection was refused under the global cap")
	}
	if served(t, dial(t, "127.0.0.3")) {
		t.Fatal("a fourth connection was served (global cap 3)")
	}
	after := httpedge.Totals()
	if after.ConnsRefusedPerSource-before.ConnsRefusedPerSource != 1 || after.ConnsRefusedTotal-before.ConnsRefusedTotal != 1 {
		t.Fatalf("refusals counted %+v -> %+v, want one of each", before, after)
	}
	// A slot freed is taken again (once the server has seen the close).
	a1.Close()
	deadline := time.Now().Add(time.Minute)
	for !served(t, dial(t, "127.0.0.3")) {
		if time.Now().After(deadline) {
			t.Fatal("a freed slot was never taken again")
		}
	}
}

// TestSlowBodies (issue 24, finding 5): a body that stalls is cut off at
// BodyReadTimeout (DeadlineExceeded) instead of pinning its buffer; a
// server stream (Subscribe) outlives many such timeouts, since its
// request body was read to its end; bodies in flight share a budget, and
// the request that would pass it is refused with ResourceExhausted.
func TestSlowBodies(t *testing.T) {
	const timeout = 100 * time.Millisecond
	addr := enginetest.StartNode(t, engine.Config{}, enginetest.WithHTTP(engine.HTTPConfig{BodyReadTimeout: timeout, MaxBodyBytesInFlight: 1 << 20})).Addr
	url := "http://" + addr
	publish := url + rewindv1connect.PublishServicePublishProcedure
	ctx := context.Background()
	c := client.New(url)
	if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}

	t.Run("deadline", func(t *testing.T) {
		for name, hc := range map[string]*http.Client{"http1": http1Client(), "h2c": h2cClient()} {
			status, body := stalledPost(t, hc, publish, "application/proto", 60_000_000, nil, []byte("\x0a\x01t"))
			if !strings.Contains(body, `"deadline_exceeded"`) || !strings.Contains(body, "--body-read-timeout") {
				t.Errorf("%s: HTTP %d %s, want deadline_exceeded naming --body-read-timeout", name, status, body)
			}
		}
	})

	t.Run("streams outlive the deadline", func(t *testing.T) {
		for name, opt := range map[string]client.Option{"connect http1": client.WithHTTPClient(http1Client()), "grpc h2c": client.WithProtocol(client.GRPC)} {
			sc := client.New(url, opt)
			sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			sub, err := sc.Subscribe(sctx, "t", client.From(client.Latest()), client.ReconnectWithin(0))
			if err != nil {
				t.Fatal(err)
			}
			// Keep the stream busy for 20 body timeouts: records go on
			// arriving on the same stream.
			start, got := time.Now(), 0
			for time.Since(start) < 20*timeout {
				if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("x")}); err != nil {
					t.Fatal(err)
				}
				for got == 0 && sub.Next() {
					if r, ok := sub.Event().(*client.Records); ok {
						got += len(r.Records)
					}
				}
				if got == 0 {
					t.Fatalf("%s: the stream ended after %v: %v", name, time.Since(start), sub.Err())
				}
				got = 0
			}
			sub.Close()
			cancel()
		}
	})

	t.Run("budget", func(t *testing.T) {
		// A node of its own, whose body deadline never cuts the stalled
		// body short: with the 100 ms one above, a busy machine could let
		// the deadline free the budget before the second body arrived.
		addr := enginetest.StartNode(t, engine.Config{}, enginetest.WithHTTP(engine.HTTPConfig{BodyReadTimeout: time.Hour, MaxBodyBytesInFlight: 1 << 20})).Addr
		publish := "http://" + addr + rewindv1connect.PublishServicePublishProcedure
		// One stalled body holds 600 KiB of the 1 MiB budget...
		first := newStalledBody(t, make([]byte, 600<<10))
		go func() {
			req, _ := http.NewRequest(http.MethodPost, publish, first)
			req.Header.Set("Content-Type", "application/proto")
			if resp, err := http1Client().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		deadline := time.Now().Add(time.Minute)
		for httpedge.Totals().BodyBytesInFlight < 600<<10 {
			if time.Now().After(deadline) {
				t.Fatal("the first body was never read")
			}
			runtime.Gosched()
		}
		// ...so a second one is refused once it passes the rest.
		status, body := stalledPost(t, http1Client(), publish, "application/proto", -1, nil, make([]byte, 600<<10))
		if !strings.Contains(body, `"resource_exhausted"`) || !strings.Contains(body, "--max-body-bytes-in-flight") {
			t.Fatalf("HTTP %d %s, want resource_exhausted naming --max-body-bytes-in-flight", status, body)
		}
		first.pw.Close()
	})
}

// TestHostCheck (issue 24, finding 7e): a request whose Host is a name the
// node was not given (a DNS-rebinding page's evil.example) is refused with
// PermissionDenied naming --allowed-hosts; IP literals, loopback names and
// the allowed names pass.
func TestHostCheck(t *testing.T) {
	addr := enginetest.StartNode(t, engine.Config{}, enginetest.WithHTTP(engine.HTTPConfig{AllowedHosts: []string{"rewind.internal", "*.example.org"}})).Addr
	_, port, _ := net.SplitHostPort(addr)
	list := rewindv1connect.TopicServiceListTopicsProcedure
	for _, c := range []struct {
		host string
		want int
	}{
		{"evil.example:" + port, http.StatusForbidden},
		{"evil.example", http.StatusForbidden},
		{"localhost.evil.example:" + port, http.StatusForbidden},
		{"127.0.0.1.nip.io:" + port, http.StatusForbidden},
		{"example.org:" + port, http.StatusForbidden},
		{"localhost:" + port, http.StatusOK},
		{"LOCALHOST.:" + port, http.StatusOK},
		{"app.localhost:" + port, http.StatusOK},
		{"127.0.0.1:" + port, http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
		{"10.1.2.3", http.StatusOK},
		{"rewind.internal:" + port, http.StatusOK},
		{"a.example.org:" + port, http.StatusOK},
	} {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+list, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = c.host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Host %s: HTTP %d %s, want %d", c.host, resp.StatusCode, b, c.want)
		}
		if c.want == http.StatusForbidden && (!strings.Contains(string(b), `"permission_denied"`) || !strings.Contains(string(b), "--allowed-hosts")) {
			t.Errorf("Host %s: %s, want permission_denied naming --allowed-hosts", c.host, b)
		}
	}
	// "*" turns the check off.
	open := enginetest.StartNode(t, engine.Config{}, enginetest.WithHTTP(engine.HTTPConfig{AllowedHosts: []string{"*"}})).Addr
	req, _ := http.NewRequest(http.MethodGet, "http://"+open+"/livez", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with *: HTTP %d, want 200", resp.StatusCode)
	}
}

// TestBadTokensRateLimited (issue 24, finding 7d): past its allowance of
// failures, a source is refused with ResourceExhausted and Retry-After
// without its token being checked, and the audit log has one line for
// the lot, counting those it left out; another source is not affected.
func TestBadTokensRateLimited(t *testing.T) {
	const burst, tries = 5, 40
	a := startAuthNode(t, func(c *engine.Config) {
		// A refill of one failure every 1,000 s: nothing refills during
		// the test, however slow the machine.
		c.Auth.Failures = engine.AuthFailureConfig{Rate: 0.001, Burst: burst, AuditInterval: time.Hour, Loopback: true}
	})
	list := a.url + rewindv1connect.TopicServiceListTopicsProcedure
	call := func(from, token string) (int, string, http.Header) {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}}
		req, _ := http.NewRequest(http.MethodPost, list, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), resp.Header
	}
	bad := "rwd_0123456789ab_" + strings.Repeat("A", 43)
	lines := func() int { return strings.Count(a.audit.String(), `"source":"127.0.0.1"`) }
	before := lines()
	unauthenticated, limited := 0, 0
	for i := range tries {
		status, body, h := call("127.0.0.1", bad)
		switch {
		case status == http.StatusUnauthorized && strings.Contains(body, `"unauthenticated"`):
			unauthenticated++
		case status == http.StatusTooManyRequests && strings.Contains(body, `"resource_exhausted"`) && h.Get("Retry-After") != "":
			limited++
		default:
			t.Fatalf("try %d: HTTP %d %s (Retry-After %q)", i, status, body, h.Get("Retry-After"))
		}
	}
	if unauthenticated > burst || limited < tries-burst {
		t.Fatalf("%d unauthenticated, %d limited of %d tries, want at most %d and at least %d", unauthenticated, limited, tries, burst, tries-burst)
	}
	if n := lines() - before; n != 1 {
		t.Fatalf("%d audit lines for %d failures of one source, want 1:\n%s", n, tries, a.audit.String())
	}
	// Even a valid token is refused unchecked from the limited source; from
	// another source it works.
	if status, body, _ := call("127.0.0.1", a.root); status != http.StatusTooManyRequests {
		t.Fatalf("valid token from the limited source: HTTP %d %s, want 429", status, body)
	}
	if status, body, _ := call("127.0.0.2", a.root); status != http.StatusOK {
		t.Fatalf("valid token from another source: HTTP %d %s, want 200", status, body)
	}
}
