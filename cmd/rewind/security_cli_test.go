package main

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/testcerts"
)

func TestRefuseExposed(t *testing.T) {
	certs := exposure{clientCerts: true, tls: true}
	for _, tc := range []struct {
		name string
		e    exposure
		want string // "" allowed
	}{
		{"default", exposure{listen: "127.0.0.1:7070"}, ""},
		{"localhost", exposure{listen: "localhost:7070"}, ""},
		{"ipv6 loopback", exposure{listen: "[::1]:7070"}, ""},
		{"every interface", exposure{listen: ":7070"}, "refusing to listen on :7070"},
		{"0.0.0.0", exposure{listen: "0.0.0.0:7070"}, "refusing to listen"},
		{"a host name", exposure{listen: "rewind.example:7070"}, "refusing to listen"},
		{"exposed with client certificates", exposure{listen: "0.0.0.0:7070", clientCerts: true, tls: true}, ""},
		{"exposed with tokens over TLS", exposure{listen: "0.0.0.0:7070", tokens: true, tls: true}, ""},
		// The pentest's finding: --auth lifted the refusal without TLS.
		{"exposed with tokens in clear", exposure{listen: "0.0.0.0:7070", tokens: true}, "with --auth but without TLS"},
		{"loopback with tokens in clear", exposure{listen: "127.0.0.1:7070", tokens: true}, ""},
		{"exposed, insecure", exposure{listen: "0.0.0.0:7070", insecure: true}, ""},
		{"exposed with tokens in clear, insecure", exposure{listen: "0.0.0.0:7070", tokens: true, insecure: true}, ""},
		{"loopback cluster", exposure{listen: "127.0.0.1:7071", cluster: []string{"127.0.0.1:7071", "127.0.0.1:7072"}}, ""},
		{"exposed cluster", exposure{listen: "10.0.0.1:7071", clientCerts: certs.clientCerts, tls: true, cluster: []string{"10.0.0.1:7071", "10.0.0.2:7071"}}, "refusing to run a cluster on 10.0.0.1:7071, 10.0.0.2:7071"},
		{"exposed cluster with peer auth", exposure{listen: "10.0.0.1:7071", clientCerts: true, tls: true, cluster: []string{"10.0.0.1:7071", "10.0.0.2:7071"}, peerAuth: true}, ""},
		{"exposed cluster, insecure", exposure{listen: "10.0.0.1:7071", cluster: []string{"10.0.0.1:7071"}, insecure: true}, ""},
	} {
		err := refuseExposed(tc.e)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--insecure")):
			t.Errorf("%s: %v, want an error containing %q and naming --insecure", tc.name, err, tc.want)
		}
	}
}

// TestHelpShowsNoSecret: the pentest found the bearer token printed as
// the default of --token in every command's help and usage, and the join
// token in serve --help, when REWIND_TOKEN was set.
func TestHelpShowsNoSecret(t *testing.T) {
	const secret = "rwd_pentest-secret-in-the-environment"
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"replay", "--help"}, {"topic", "list", "--bogus-flag"}} {
		r := runCLI(t, nil, cliEnv("REWIND_TOKEN="+secret), args...)
		if out := r.stdout + r.stderr; strings.Contains(out, secret) || !strings.Contains(out, "REWIND_TOKEN") && args[0] != "topic" {
			t.Errorf("rewind %s printed the token, or no longer names REWIND_TOKEN:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestServeRefusesAnExposedListen: without client authentication, serve
// on a non-loopback address (or a cluster on non-loopback members
// without peer authentication) exits 1, says why, and creates nothing.
func TestServeRefusesAnExposedListen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	port := enginetest.FreeAddr(t)[strings.LastIndex(enginetest.FreeAddr(t), ":"):]
	r := runCLI(t, nil, nil, "serve", "--listen", "0.0.0.0"+port, "--data", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "refusing to listen on 0.0.0.0"+port+" without client authentication") || !strings.Contains(r.stderr, "--insecure") {
		t.Errorf("serve on 0.0.0.0: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, nil, "serve", "--listen", enginetest.FreeAddr(t), "--data", dir,
		"--initial-cluster", "1=10.0.0.1:7071,2=10.0.0.2:7071,3=10.0.0.3:7071")
	if r.code != 1 || !strings.Contains(r.stderr, "refusing to run a cluster on") || !strings.Contains(r.stderr, "--cluster-secret-file") {
		t.Errorf("serve in a cluster on 10.0.0.x: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused serve created its data directory (%v)", err)
	}
}

// TestCLIOverTLS: a server with TLS that requires client certificates;
// the CLI publishes and replays with --tls-ca/--tls-cert/--tls-key (and
// the same from the environment); without its certificate, or in
// plaintext, it is refused with an error that says why.
func TestCLIOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "server CA")
	clients := testcerts.NewCA(t, "client CA")
	srv := ca.Issue(t, "rewind", "127.0.0.1").Write(t, dir, "server")
	cli := clients.Issue(t, "alice").Write(t, dir, "alice")
	caFile, clientCA := ca.Write(t, dir, "ca"), clients.Write(t, dir, "clients")
	listen := enginetest.FreeAddr(t)
	flags := []string{"--tls-ca", caFile, "--tls-cert", cli.Cert, "--tls-key", cli.Key}
	pair := clients.Issue(t, "prober").TLS(t)
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}}}}
	s := startServerWith(t, &server{url: "https://" + listen, clientFlags: flags}, enginetest.ProcessConfig{
		Addr: listen, Dir: filepath.Join(dir, "data"), TLS: true, Probe: probe,
		Args: []string{"--tls-cert", srv.Cert, "--tls-key", srv.Key, "--tls-client-ca", clientCA},
	})
	s.ok(t, nil, "topic", "create", "orders")
	s.ok(t, nil, "publish", "orders", "hello over tls")
	if out := s.ok(t, nil, "replay", "orders", "--from", "earliest"); !strings.Contains(out, "hello over tls") {
		t.Fatalf("replay over TLS: %q", out)
	}
	// The environment, and a scheme-less --server (https because TLS
	// flags are given).
	env := cliEnv("REWIND_TLS_CA="+caFile, "REWIND_TLS_CERT="+cli.Cert, "REWIND_TLS_KEY="+cli.Key)
	if r := runCLI(t, nil, env, "--server", listen, "replay", "orders", "--from", "earliest"); r.code != 0 || !strings.Contains(r.stdout, "hello over tls") {
		t.Fatalf("replay with REWIND_TLS_*: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// A missing file is named before anything is tried.
	if r := runCLI(t, nil, nil, "--server", listen, "--tls-ca", filepath.Join(dir, "missing.crt"), "topic", "list"); r.code != 1 || !strings.Contains(r.stderr, "--tls-ca") || !strings.Contains(r.stderr, "missing.crt") {
		t.Errorf("a missing --tls-ca file: exit %d, stderr %q", r.code, r.stderr)
	}
	// Refusals.
	// (The server's alert may reach the client as a broken connection:
	// the hint names client certificates either way.)
	if r := runCLI(t, nil, nil, "--server", "https://"+listen, "--tls-ca", caFile, "topic", "list"); r.code != 1 || !strings.Contains(r.stderr, "certificate") {
		t.Errorf("without a client certificate: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, nil, nil, "--server", "http://"+listen, "topic", "list"); r.code != 1 || !strings.Contains(r.stderr, "the server speaks TLS") {
		t.Errorf("in plaintext: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, nil, nil, "--server", "https://"+listen, "--tls-cert", cli.Cert, "--tls-key", cli.Key, "topic", "list"); r.code != 1 || !strings.Contains(r.stderr, "certificate signed by unknown authority") {
		t.Errorf("not trusting the server's CA: exit %d, stderr %q", r.code, r.stderr)
	}
}
