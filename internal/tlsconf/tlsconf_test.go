package tlsconf_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"testing"

	"github.com/rewind-io/rewind/internal/testcerts"
	"github.com/rewind-io/rewind/internal/tlsconf"
)

func TestPrincipalFromCert(t *testing.T) {
	u, _ := url.Parse("spiffe://example.org/svc")
	for _, tc := range []struct {
		name string
		cert *x509.Certificate
		want string
	}{
		{"nil", nil, ""},
		{"cn wins", &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, DNSNames: []string{"a.example"}}, "alice"},
		{"first dns san", &x509.Certificate{DNSNames: []string{"svc.example", "other"}}, "svc.example"},
		{"email", &x509.Certificate{EmailAddresses: []string{"bob@example.org"}}, "bob@example.org"},
		{"uri", &x509.Certificate{URIs: []*url.URL{u}}, "spiffe://example.org/svc"},
		{"ip", &x509.Certificate{IPAddresses: []net.IP{net.IPv4(10, 0, 0, 1)}}, "10.0.0.1"},
		{"nothing", &x509.Certificate{}, ""},
	} {
		if got := tlsconf.PrincipalFromCert(tc.cert); got != tc.want {
			t.Errorf("%s: PrincipalFromCert = %q, want %q", tc.name, got, tc.want)
		}
	}
	// And from a real certificate, as a server sees it.
	ca := testcerts.NewCA(t, "ca")
	if got := tlsconf.PrincipalFromCert(ca.Issue(t, "", "reader.example", "127.0.0.1").Cert); got != "reader.example" {
		t.Errorf("real certificate without CN: %q, want reader.example", got)
	}
}

func TestNodeIDFromCert(t *testing.T) {
	for _, tc := range []struct {
		sans []string
		want uint64 // 0: an error
	}{
		{[]string{"node-3"}, 3},
		{[]string{"db.example", "node-12", "127.0.0.1"}, 12},
		{nil, 0},
		{[]string{"node-0"}, 0},
		{[]string{"node-03"}, 0},
		{[]string{"node-x"}, 0},
		{[]string{"node-"}, 0},
		{[]string{"node-1", "node-2"}, 0},
		{[]string{"node-18446744073709551616"}, 0},
	} {
		got, err := tlsconf.NodeIDFromCert(&x509.Certificate{DNSNames: tc.sans})
		if got != tc.want || (err == nil) != (tc.want != 0) {
			t.Errorf("SANs %q: got %d, %v; want %d", tc.sans, got, err, tc.want)
		}
	}
}

func TestLoadPeerChecksTheNodeID(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "cluster")
	caFile := ca.Write(t, dir, "ca")
	f := ca.Issue(t, "n2", "node-2").Write(t, dir, "n2")
	if _, err := tlsconf.LoadPeer(f.Cert, f.Key, caFile, 2); err != nil {
		t.Fatalf("node 2's own certificate: %v", err)
	}
	if _, err := tlsconf.LoadPeer(f.Cert, f.Key, caFile, 3); err == nil {
		t.Fatal("node 3 started with node 2's certificate")
	}
}

// TestKeyPairReloads: replacing the files changes the certificate of the
// next handshake; a half-written rotation keeps the old one.
func TestKeyPairReloads(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	first := ca.Issue(t, "first", "127.0.0.1")
	f := first.Write(t, dir, "srv")
	kp, err := tlsconf.LoadKeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func() *x509.Certificate {
		t.Helper()
		c, err := kp.Leaf()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if !tlsconf.Equal(leaf(), first.Cert) {
		t.Fatal("not the first certificate")
	}
	second := ca.Issue(t, "second-with-a-longer-name", "127.0.0.1")
	second.Write(t, dir, "srv")
	if !tlsconf.Equal(leaf(), second.Cert) {
		t.Fatal("the rewritten files were not reloaded")
	}
	// Half a rotation: a new certificate beside the old key.
	third := ca.Issue(t, "third", "127.0.0.1")
	testcerts.WriteFile(t, f.Cert, third.CertPEM)
	if !tlsconf.Equal(leaf(), second.Cert) {
		t.Fatal("a mismatched pair replaced the good one")
	}
	if kp.Err() == nil {
		t.Fatal("the failed reload is not reported")
	}
	testcerts.WriteFile(t, f.Key, third.KeyPEM)
	if !tlsconf.Equal(leaf(), third.Cert) {
		t.Fatal("the completed rotation was not loaded")
	}
	if kp.Err() != nil {
		t.Fatalf("error after a good reload: %v", kp.Err())
	}
}

// TestServerConfigSplitsClientsAndPeers: one listener answers clients
// with the client certificate, members (server name node-<id>) with mutual
// TLS against the cluster CA.
func TestServerConfigSplitsClientsAndPeers(t *testing.T) {
	dir := t.TempDir()
	clientCA, clusterCA, otherCA := testcerts.NewCA(t, "clients"), testcerts.NewCA(t, "cluster"), testcerts.NewCA(t, "other")
	sf := clientCA.Issue(t, "server", "127.0.0.1").Write(t, dir, "srv")
	pair, err := tlsconf.LoadKeyPair(sf.Cert, sf.Key)
	if err != nil {
		t.Fatal(err)
	}
	nf := clusterCA.Issue(t, "n1", "node-1").Write(t, dir, "n1")
	peer1, err := tlsconf.LoadPeer(nf.Cert, nf.Key, clusterCA.Write(t, dir, "cluster"), 1)
	if err != nil {
		t.Fatal(err)
	}
	srv := tlsconf.ServerConfig(tlsconf.Server{Pair: pair, Peer: peer1})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		peer uint64
		ok   bool
	}
	results := make(chan result, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if tc.Handshake() != nil {
				c.Close()
				results <- result{}
				continue
			}
			cs := tc.ConnectionState()
			id, ok := tlsconf.PeerOf(&cs)
			results <- result{id, ok}
			_, _ = c.Write([]byte{1}) // the client knows it was accepted
			c.Close()
		}
	}()
	dial := func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// With TLS 1.3 the server checks the client's certificate after
		// the client's handshake ends: read the server's byte.
		_, err = c.Read(make([]byte, 1))
		return err
	}
	// A client.
	if err := dial(&tls.Config{RootCAs: clientCA.Pool()}); err != nil {
		t.Fatalf("client: %v", err)
	}
	if r := <-results; r.ok {
		t.Fatalf("a client connection passed as member %d", r.peer)
	}
	// Member 2 dialling member 1.
	n2 := clusterCA.Issue(t, "n2", "node-2").Write(t, dir, "n2")
	peer2, err := tlsconf.LoadPeer(n2.Cert, n2.Key, clusterCA.Write(t, dir, "cluster"), 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(peer2.Dial(1)); err != nil {
		t.Fatalf("member 2: %v", err)
	}
	if r := <-results; !r.ok || r.peer != 2 {
		t.Fatalf("member 2's connection: %+v", r)
	}
	// A joining member (target unknown) accepts any member.
	if err := dial(peer2.Dial(0)); err != nil {
		t.Fatalf("joining: %v", err)
	}
	if r := <-results; !r.ok || r.peer != 2 {
		t.Fatalf("the joining member's connection: %+v", r)
	}
	// Member 2 dialling "node 3" at node 1's address: node 1's
	// certificate does not name node 3.
	if err := dial(peer2.Dial(3)); err == nil {
		t.Fatal("member 2 accepted node 1's certificate as node 3's")
	}
	<-results
	// A member dial without a certificate, and with another CA's.
	noCert := peer2.Dial(1)
	noCert.GetClientCertificate = nil
	if err := dial(noCert); err == nil {
		t.Fatal("a member without a certificate was accepted")
	}
	<-results
	other := otherCA.Issue(t, "n2", "node-2").TLS(t)
	wrongCA := peer2.Dial(1)
	wrongCA.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &other, nil }
	if err := dial(wrongCA); err == nil {
		t.Fatal("a member with another CA's certificate was accepted")
	}
	<-results
}

// anyCache offers the one session it holds for every server name, as an
// attacker's client may.
type anyCache struct{ s *tls.ClientSessionState }

func (c *anyCache) Get(string) (*tls.ClientSessionState, bool) { return c.s, c.s != nil }
func (c *anyCache) Put(_ string, s *tls.ClientSessionState) {
	if s != nil {
		c.s = s
	}
}

// TestClientSessionNeverResumesAsAMember: a session opened as a client
// (with a certificate of the client CA that carries a node SAN) cannot be
// resumed under the member configuration.
func TestClientSessionNeverResumesAsAMember(t *testing.T) {
	dir := t.TempDir()
	clientCA, clusterCA := testcerts.NewCA(t, "clients"), testcerts.NewCA(t, "cluster")
	sf := clientCA.Issue(t, "server", "127.0.0.1").Write(t, dir, "srv")
	pair, err := tlsconf.LoadKeyPair(sf.Cert, sf.Key)
	if err != nil {
		t.Fatal(err)
	}
	nf := clusterCA.Issue(t, "n1", "node-1").Write(t, dir, "n1")
	peer1, err := tlsconf.LoadPeer(nf.Cert, nf.Key, clusterCA.Write(t, dir, "cluster"), 1)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsconf.ServerConfig(tlsconf.Server{Pair: pair, ClientCAs: clientCA.Pool(), Peer: peer1}))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		member  uint64
		ok      bool
		resumed bool
	}
	results := make(chan result, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if tc.Handshake() != nil {
				c.Close()
				results <- result{}
				continue
			}
			cs := tc.ConnectionState()
			id, ok := tlsconf.PeerOf(&cs)
			_, _ = c.Write([]byte{1})
			results <- result{id, ok, cs.DidResume}
			_, _ = c.Read(make([]byte, 1)) // until the client closes
			c.Close()
		}
	}()
	// A client certificate of the client CA naming "node-2".
	forged := clientCA.Issue(t, "mallory", "node-2").TLS(t)
	cache := &anyCache{}
	dial := func(serverName string) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{
			InsecureSkipVerify: true, ServerName: serverName, ClientSessionCache: cache,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forged, nil },
		})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Read(make([]byte, 1)) // also takes in the session ticket
		return err
	}
	if err := dial(""); err != nil {
		t.Fatalf("as a client: %v", err)
	}
	if r := <-results; r.ok {
		t.Fatal("a client connection passed as a member")
	}
	// Control: the session resumes as a client's.
	if err := dial(""); err != nil {
		t.Fatalf("as a client again: %v", err)
	}
	if r := <-results; !r.resumed {
		t.Fatal("the client's session did not resume: the test proves nothing")
	}
	err = dial("node-1")
	r := <-results
	if err == nil && r.ok {
		t.Fatalf("a client's session was resumed (%v) as member %d's", r.resumed, r.member)
	}
	t.Logf("as a member: %v (resumed %v)", err, r.resumed)
}
