package engine_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/httpedge"
	"github.com/rewind-io/rewind/internal/testcerts"
	"github.com/rewind-io/rewind/sdk/client"
	"github.com/rewind-io/rewind/sdk/client/fastpath"
)

// fastCalls is the process's count of calls served over fast-path streams.
func fastCalls() uint64 { return httpedge.Totals().FastpathCalls }

// exercise makes the calls of an event-sourced service through c: a
// topic, a publish, an append with an expected version, a conflict, a key
// read; it fails t if any answer is wrong.
func exercise(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "fp", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "fp", client.Message{Key: []byte("k"), Value: []byte("v0")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "fp", []byte("k"), []client.Message{{Value: []byte("v1")}}, client.ExpectVersion(0)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Append(ctx, "fp", []byte("k"), []client.Message{{Value: []byte("late")}}, client.ExpectVersion(0))
	var ce *client.ConditionError
	if !errors.As(err, &ce) || connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("an append expecting a stale version: %v; want a ConditionError (FailedPrecondition)", err)
	}
	r, err := c.ReadKey(ctx, "fp", []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Records) != 2 || string(r.Records[0].Value) != "v0" || string(r.Records[1].Value) != "v1" || r.Records[1].KeyVersion != 1 {
		t.Fatalf("the key's history: %+v", r.Records)
	}
	if _, _, err := c.DescribeTopic(ctx, "nope"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("describing a missing topic: %v; want NotFound", err)
	}
}

// TestFastPathCarriesUnaryCalls: the Go client's unary calls go over the
// fast path by default, with the same answers and errors as over HTTP/2
// (WithFastPath(false), which sends none that way).
func TestFastPathCarriesUnaryCalls(t *testing.T) {
	before := fastCalls()
	exercise(t, client.New(enginetest.StartNode(t, engine.Config{}).URL))
	if n := fastCalls() - before; n < 5 {
		t.Fatalf("%d calls went over the fast path; want the 5 after the first", n)
	}
	before = fastCalls()
	exercise(t, client.New(enginetest.StartNode(t, engine.Config{}).URL, client.WithFastPath(false)))
	if n := fastCalls() - before; n != 0 {
		t.Fatalf("%d calls went over the fast path with WithFastPath(false)", n)
	}
}

// TestFastPathOverTLS: the fast path works over TLS (HTTP/1.1 by ALPN).
func TestFastPathOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "fastpath CA")
	f := ca.Issue(t, "node", "127.0.0.1").Write(t, dir, "server")
	n := enginetest.StartNode(t, engine.Config{Security: engine.SecurityConfig{TLSCertFile: f.Cert, TLSKeyFile: f.Key}})
	before := fastCalls()
	exercise(t, client.New(n.URL, client.WithTLS(&tls.Config{RootCAs: ca.Pool()})))
	if n := fastCalls() - before; n < 5 {
		t.Fatalf("%d calls went over the fast path; want 5", n)
	}
}

// openStream asks addr for a fast-path stream with the given Authorization
// ("" for none) and returns the status of the answer.
func openStream(t *testing.T, addr, authz string) int {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n", fastpath.Path, addr, fastpath.ContentType)
	if authz != "" {
		fmt.Fprintf(nc, "Authorization: %s\r\n", authz)
	}
	fmt.Fprint(nc, "\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

// TestFastPathUnderAuth: with --auth, a stream opens only with valid
// credentials (an unauthenticated client pins no body memory: it cannot
// send a frame), and each call on it is authorized by its own token.
func TestFastPathUnderAuth(t *testing.T) {
	a := startAuthNode(t, nil)
	addr := strings.TrimPrefix(a.url, "http://")
	for _, authz := range []string{"", "Bearer not-a-token", "Basic eDp5"} {
		if s := openStream(t, addr, authz); s != http.StatusUnauthorized {
			t.Fatalf("a stream opened with %q: %d; want 401", authz, s)
		}
	}
	if s := openStream(t, addr, "Bearer "+a.root); s != http.StatusOK {
		t.Fatalf("a stream opened with the bootstrap token: %d; want 200", s)
	}
	before := fastCalls()
	exercise(t, a.client(a.root))
	if n := fastCalls() - before; n < 5 {
		t.Fatalf("%d calls went over the fast path; want 5", n)
	}
	// A user who may only read: publishes on the stream are refused by
	// their own token's rights.
	reader := a.user(t, "reader", "allow read,describe topic:fp")
	c := a.client(reader)
	ctx := context.Background()
	if _, _, err := c.DescribeTopic(ctx, "fp"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "fp", client.Message{Value: []byte("x")}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("a reader's publish: %v; want PermissionDenied", err)
	}
}
