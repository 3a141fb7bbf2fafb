package engine_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/testcerts"
	"github.com/rewind-io/rewind/internal/tlsconf"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// tlsNode starts a node serving TLS with a certificate for 127.0.0.1
// signed by a new CA; clientCA, if set, is required of clients.
func tlsNode(t *testing.T, clientCA *testcerts.CA) (ca *testcerts.CA, url string, files testcerts.Files) {
	t.Helper()
	dir := t.TempDir()
	ca = testcerts.NewCA(t, "rewind test CA")
	files = ca.Issue(t, "rewind-server", "127.0.0.1", "localhost").Write(t, dir, "server")
	cfg := engine.Config{Security: engine.SecurityConfig{TLSCertFile: files.Cert, TLSKeyFile: files.Key}}
	if clientCA != nil {
		cfg.Security.TLSClientCAFile = clientCA.Write(t, dir, "clients")
	}
	url = enginetest.StartNode(t, cfg).URL
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("node URL %s: not TLS", url)
	}
	return ca, url, files
}

// roundTrip creates a topic, publishes and replays it through c.
func roundTrip(t *testing.T, c *client.Client, topic string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, topic); err != nil {
		return err
	}
	if _, err := c.Publish(ctx, topic, client.Message{Value: []byte("over tls")}); err != nil {
		return err
	}
	sub, err := c.Subscribe(ctx, topic, client.From(client.Earliest()), client.Until(client.End()))
	if err != nil {
		return err
	}
	defer sub.Close()
	var got []string
	for sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok {
			for _, rec := range r.Records {
				got = append(got, string(rec.Value))
			}
		}
	}
	if err := sub.Err(); err != nil {
		return err
	}
	if len(got) != 1 || got[0] != "over tls" {
		t.Fatalf("replayed %q, want [over tls]", got)
	}
	return nil
}

// TestTLSServesEveryProtocol: over TLS the node negotiates HTTP/2 by ALPN
// and serves Connect, gRPC and gRPC-web, and HTTP/1.1 too.
func TestTLSServesEveryProtocol(t *testing.T) {
	ca, url, _ := tlsNode(t, nil)
	cfg := &tls.Config{RootCAs: ca.Pool()}
	for i, p := range []client.Protocol{client.Connect, client.GRPC, client.GRPCWeb} {
		if err := roundTrip(t, client.New(url, client.WithTLS(cfg), client.WithProtocol(p)), "t"+string(rune('a'+i))); err != nil {
			t.Fatalf("protocol %d: %v", p, err)
		}
	}
	// A scheme-less address means https with WithTLS.
	if err := roundTrip(t, client.New(strings.TrimPrefix(url, "https://"), client.WithTLS(cfg)), "plain-address"); err != nil {
		t.Fatalf("scheme-less address: %v", err)
	}
	// ALPN: h2 offered first is chosen; HTTP/1.1 alone still works.
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Errorf("ALPN chose %q, want h2", p)
	}
	conn.Close()
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg.Clone()}}
	tc := rewindv1connect.NewTopicServiceClient(h1, url)
	resp, err := tc.ListTopics(context.Background(), &rewindv1.ListTopicsRequest{})
	if err != nil {
		t.Fatalf("Connect over HTTP/1.1 and TLS: %v", err)
	}
	if n := len(resp.GetTopics()); n != 4 {
		t.Errorf("listed %d topics, want 4", n)
	}
}

// TestTLSRefusesPlaintextAndStrangers: a plaintext client, and a client
// that does not trust the server's CA, fail with an error that says so.
func TestTLSRefusesPlaintextAndStrangers(t *testing.T) {
	_, url, _ := tlsNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain := client.New("http://"+strings.TrimPrefix(url, "https://"), client.WithPublishRetry(0, 0, 10*time.Second))
	_, err := plain.ListTopics(ctx)
	if err == nil {
		t.Fatal("a plaintext client was served by a TLS port")
	}
	// Go's client reports the port's GOAWAY, or (when its read loop saw the
	// GOAWAY before the request was sent) that the connection could not be
	// established; which one is a race inside the client.
	if !(strings.Contains(err.Error(), "GOAWAY") && strings.Contains(err.Error(), "PROTOCOL_ERROR")) &&
		!strings.Contains(err.Error(), "could not be established") {
		t.Errorf("a plaintext client's error %q is neither the TLS port's GOAWAY nor a refused connection", err)
	}
	// What the port sends is deterministic: to a plaintext HTTP/2 preface,
	// a GOAWAY whose debug text says to use TLS, then the end of the
	// connection.
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	answer, _ := io.ReadAll(conn)
	if !bytes.Contains(answer, []byte(tlsconf.PlaintextHint)) {
		t.Errorf("the TLS port answered a plaintext preface with %q, want a GOAWAY saying %q", answer, tlsconf.PlaintextHint)
	}
	other := testcerts.NewCA(t, "another CA")
	_, err = client.New(url, client.WithTLS(&tls.Config{RootCAs: other.Pool()}), client.WithPublishRetry(0, 0, 10*time.Second)).ListTopics(ctx)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("a client trusting another CA: %v, want x509.UnknownAuthorityError", err)
	}
}

// TestTLSClientCertificates: with a client CA, only clients with a
// certificate it signed are served; the certificate names the principal.
func TestTLSClientCertificates(t *testing.T) {
	clients := testcerts.NewCA(t, "client CA")
	ca, url, _ := tlsNode(t, clients)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	good := clients.Issue(t, "alice")
	cfg := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{good.TLS(t)}}
	if err := roundTrip(t, client.New(url, client.WithTLS(cfg)), "t"); err != nil {
		t.Fatalf("a client with a good certificate: %v", err)
	}
	if got := tlsconf.PrincipalFromCert(good.Cert); got != "alice" {
		t.Errorf("principal %q, want alice", got)
	}
	stranger := testcerts.NewCA(t, "stranger CA").Issue(t, "mallory")
	strangerPair := stranger.TLS(t)
	for name, cert := range map[string]*tls.Certificate{"no certificate": {}, "another CA's certificate": &strangerPair} {
		// GetClientCertificate sends the certificate even though the
		// server asks for its own CA's.
		cfg := &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"},
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }}
		c := client.New(url, client.WithTLS(cfg), client.WithPublishRetry(0, 0, 10*time.Second))
		_, err := c.ListTopics(ctx)
		if err == nil {
			t.Fatalf("a client with %s was served", name)
		}
		// What the server said: with TLS 1.3 it checks the certificate
		// after the client's handshake ends, so the client's request may
		// fail as a broken connection; a read shows the server's alert.
		conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), cfg)
		if err == nil {
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		want := map[string]string{"no certificate": "certificate required", "another CA's certificate": "unknown certificate authority"}[name]
		if err == nil || !strings.Contains(err.Error(), "remote error: tls: "+want) {
			t.Errorf("a client with %s: %v, want the server's TLS alert %q", name, err, want)
		} else {
			t.Logf("a client with %s: %v", name, err)
		}
	}
}

// TestTLSCertificateReload: rewriting the certificate files makes new
// connections see the new certificate, without a restart.
func TestTLSCertificateReload(t *testing.T) {
	ca, url, files := tlsNode(t, nil)
	addr := strings.TrimPrefix(url, "https://")
	leaf := func() *x509.Certificate {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	if cn := leaf().Subject.CommonName; cn != "rewind-server" {
		t.Fatalf("first certificate %q", cn)
	}
	next := ca.Issue(t, "rewind-server-rotated", "127.0.0.1")
	testcerts.WriteFile(t, files.Key, next.KeyPEM)
	testcerts.WriteFile(t, files.Cert, next.CertPEM)
	deadline := time.Now().Add(20 * time.Second)
	for !tlsconf.Equal(leaf(), next.Cert) {
		if time.Now().After(deadline) {
			t.Fatal("new connections never saw the rotated certificate")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// And the API works with it.
	if err := roundTrip(t, client.New(url, client.WithTLS(&tls.Config{RootCAs: ca.Pool()})), "after"); err != nil {
		t.Fatal(err)
	}
}
