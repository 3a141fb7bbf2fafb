// Package tlsconf builds the TLS configurations of a Rewind node and its
// clients from PEM files: the client-facing server certificate (reloaded
// when its files change), optional client-certificate verification, and
// mutual TLS between the members of a cluster on the same port.
//
// # One port, two kinds of callers
//
// A node serves clients and its peers on one listener. A peer dials with
// the TLS server name PeerName(target) ("node-<id>"); ServerConfig's
// GetConfigForClient answers a hello whose server name starts with
// PeerNamePrefix with the peer configuration: the node's peer certificate,
// and a client certificate required and verified against the cluster CA
// that carries exactly one DNS SAN node-<id>. Every other hello gets the
// client configuration. Which configuration served a connection can be
// read back from the request (http.Request.TLS.ServerName); PeerOf does
// that and returns the verified node id.
package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// NextProtos are the ALPN protocols a node offers: HTTP/2 first (gRPC
// needs it), then HTTP/1.1 (Connect and gRPC-web over fetch).
var NextProtos = []string{"h2", "http/1.1"}

// KeyPair is a certificate and key loaded from files and loaded again when
// either file changes (size or modification time), checked on every
// handshake: replacing the files rotates the certificate without a
// restart. A pair that fails to load (a half-written rotation) keeps the
// previous one until the files are whole again. Safe for concurrent use.
type KeyPair struct {
	certFile, keyFile string
	mu                struct {
		sync.Mutex
		cert   *tls.Certificate
		stamps [2]stamp
		// lastErr is the last failed reload's error (nil after a good one).
		lastErr error
	}
}

// stamp identifies one version of a file cheaply.
type stamp struct {
	size    int64
	modTime time.Time
}

func stampOf(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{size: fi.Size(), modTime: fi.ModTime()}, nil
}

// LoadKeyPair loads certFile and keyFile (PEM).
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	k := &KeyPair{certFile: certFile, keyFile: keyFile}
	if _, err := k.Certificate(); err != nil {
		return nil, err
	}
	return k, nil
}

// Certificate returns the current certificate, reloading the files first
// if they changed since the last load. It fails only if no pair was ever
// loaded.
func (k *KeyPair) Certificate() (*tls.Certificate, error) {
	cs, cerr := stampOf(k.certFile)
	ks, kerr := stampOf(k.keyFile)
	k.mu.Lock()
	defer k.mu.Unlock()
	if cerr == nil && kerr == nil && k.mu.cert != nil && k.mu.stamps == [2]stamp{cs, ks} {
		return k.mu.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err == nil && (cerr != nil || kerr != nil) {
		err = errors.Join(cerr, kerr)
	}
	if err != nil {
		k.mu.lastErr = fmt.Errorf("tlsconf: load %s and %s: %w", k.certFile, k.keyFile, err)
		if k.mu.cert == nil {
			return nil, k.mu.lastErr
		}
		return k.mu.cert, nil // keep serving the last good pair
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	k.mu.cert, k.mu.stamps, k.mu.lastErr = &cert, [2]stamp{cs, ks}, nil
	return k.mu.cert, nil
}

// Err is the error of the last reload if it failed (the previous pair is
// still served), else nil.
func (k *KeyPair) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.mu.lastErr
}

// Leaf returns the current certificate, parsed.
func (k *KeyPair) Leaf() (*x509.Certificate, error) {
	c, err := k.Certificate()
	if err != nil {
		return nil, err
	}
	if c.Leaf == nil {
		return nil, errors.New("tlsconf: certificate file holds no certificate")
	}
	return c.Leaf, nil
}

// LoadPool reads the PEM certificates of file into a new pool.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tlsconf: %s holds no PEM certificate", file)
	}
	return p, nil
}

// PrincipalFromCert names the holder of a verified client certificate: its
// subject's common name, or its first subject alternative name (DNS name,
// then e-mail address, URI, IP address) when the common name is empty; ""
// when it has neither.
func PrincipalFromCert(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	switch {
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	case len(c.EmailAddresses) > 0:
		return c.EmailAddresses[0]
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case len(c.IPAddresses) > 0:
		return c.IPAddresses[0].String()
	}
	return ""
}

// PeerNamePrefix starts the TLS server name members dial each other with,
// and the DNS SAN that names a member in its peer certificate.
const PeerNamePrefix = "node-"

// PeerName is the name of member id: "node-<id>".
func PeerName(id uint64) string { return PeerNamePrefix + strconv.FormatUint(id, 10) }

// joinName is the server name of a node joining a cluster: it does not
// know the id of the member it asks, so it accepts any member's
// certificate (verified against the cluster CA).
const joinName = PeerNamePrefix + "join"

// NodeIDFromCert returns the member id a peer certificate names: its one
// DNS SAN node-<id> (a positive decimal id). A certificate with none, or
// with several, names no member.
func NodeIDFromCert(c *x509.Certificate) (uint64, error) {
	var id uint64
	for _, n := range c.DNSNames {
		s, ok := strings.CutPrefix(n, PeerNamePrefix)
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v == 0 || strconv.FormatUint(v, 10) != s {
			return 0, fmt.Errorf("tlsconf: certificate %q: SAN %q is not node-<positive id>", c.Subject.CommonName, n)
		}
		if id != 0 {
			return 0, fmt.Errorf("tlsconf: certificate %q names two members (node-%d and %s)", c.Subject.CommonName, id, n)
		}
		id = v
	}
	if id == 0 {
		return 0, fmt.Errorf("tlsconf: certificate %q has no DNS SAN node-<id> naming a member", c.Subject.CommonName)
	}
	return id, nil
}

// Peer is a node's identity among its peers: its certificate (with the SAN
// PeerName(id)) and the cluster CA every member's certificate is signed by.
type Peer struct {
	Pair *KeyPair
	CAs  *x509.CertPool
}

// LoadPeer loads a member's peer certificate and the cluster CA, and
// checks that the certificate names member id.
func LoadPeer(certFile, keyFile, caFile string, id uint64) (*Peer, error) {
	pair, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	leaf, err := pair.Leaf()
	if err != nil {
		return nil, err
	}
	got, err := NodeIDFromCert(leaf)
	if err != nil {
		return nil, fmt.Errorf("peer certificate %s: %w", certFile, err)
	}
	if got != id {
		return nil, fmt.Errorf("tlsconf: peer certificate %s names node %d, but this is node %d (its DNS SAN must be %s)", certFile, got, id, PeerName(id))
	}
	cas, err := LoadPool(caFile)
	if err != nil {
		return nil, err
	}
	return &Peer{Pair: pair, CAs: cas}, nil
}

// verifyMember checks a verified chain's leaf names a member.
func verifyMember(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tlsconf: the peer sent no certificate")
	}
	_, err := NodeIDFromCert(cs.PeerCertificates[0])
	return err
}

// Dial returns the configuration to dial member target with (0: a member
// whose id is unknown, when joining): this member's certificate as the
// client certificate, and the target's verified against the cluster CA
// and its SAN PeerName(target).
func (p *Peer) Dial(target uint64) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		RootCAs:    p.CAs,
		ServerName: PeerName(target),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return p.Pair.Certificate()
		},
		VerifyConnection: verifyMember,
	}
	if target == 0 {
		// Any member will do: verify the chain by hand, without a name.
		cas := p.CAs
		cfg.ServerName = joinName
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tlsconf: the member sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: cas, Intermediates: inter}); err != nil {
				return fmt.Errorf("tlsconf: the member's certificate: %w", err)
			}
			return verifyMember(cs)
		}
	}
	return cfg
}

// Server is what ServerConfig builds a node's TLS configuration from.
type Server struct {
	// Pair is the certificate clients see. Required.
	Pair *KeyPair
	// ClientCAs, if set, makes a client certificate signed by one of them
	// required: a client without one, or with another CA's, fails the
	// handshake.
	ClientCAs *x509.CertPool
	// Peer, if set, serves members dialling with a PeerName server name
	// (mutual TLS against the cluster CA).
	Peer *Peer
}

// ServerConfig returns the node's TLS configuration (see the package
// documentation). A hello naming a member is refused when no peer
// configuration is set, so a member is never mistaken for a client.
func ServerConfig(s Server) *tls.Config {
	client := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: NextProtos,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.Pair.Certificate()
		},
	}
	if s.ClientCAs != nil {
		client.ClientCAs = s.ClientCAs
		client.ClientAuth = tls.RequireAndVerifyClientCert
	}
	var peer *tls.Config
	if s.Peer != nil {
		cas := s.Peer.CAs
		peer = &tls.Config{
			MinVersion: tls.VersionTLS12,
			NextProtos: NextProtos,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return s.Peer.Pair.Certificate()
			},
			ClientCAs:  cas,
			ClientAuth: tls.RequireAndVerifyClientCert,
			// Both configurations share the parent's session ticket keys:
			// no session is resumed as a member's, and every member
			// connection's chain is checked against the cluster CA again
			// (VerifyConnection also runs on resumption), so a session a
			// client certificate of another CA opened can never pass as a
			// member's.
			SessionTicketsDisabled: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("tlsconf: the member sent no certificate")
				}
				inter := x509.NewCertPool()
				for _, c := range cs.PeerCertificates[1:] {
					inter.AddCert(c)
				}
				if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
					Roots: cas, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
				}); err != nil {
					return fmt.Errorf("tlsconf: the member's certificate: %w", err)
				}
				return verifyMember(cs)
			},
		}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: NextProtos,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if !strings.HasPrefix(hello.ServerName, PeerNamePrefix) {
				return client, nil
			}
			if peer == nil {
				return nil, fmt.Errorf("tlsconf: %s dialled as a member (%s), but this node has no peer TLS configured", hello.Conn.RemoteAddr(), hello.ServerName)
			}
			return peer, nil
		},
	}
}

// PeerOf returns the member id of a connection served with the peer
// configuration (its verified client certificate's node-<id> SAN), or
// ok false for a client connection.
func PeerOf(cs *tls.ConnectionState) (id uint64, ok bool) {
	if cs == nil || !strings.HasPrefix(cs.ServerName, PeerNamePrefix) || len(cs.VerifiedChains) == 0 {
		return 0, false
	}
	id, err := NodeIDFromCert(cs.VerifiedChains[0][0])
	return id, err == nil
}

// ClientFiles configures a client's TLS from PEM files; every field is
// optional.
type ClientFiles struct {
	// CA verifies the server's certificate (default: the system roots).
	CA string
	// Cert and Key are the client certificate, for a server started with
	// --tls-client-ca; both or neither.
	Cert, Key string
	// ServerName overrides the name the server's certificate is checked
	// against (default: the host of the address dialled).
	ServerName string
}

// Client returns the client configuration the files describe; the client
// certificate is reloaded when its files change.
func (f ClientFiles) Client() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		p, err := LoadPool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = p
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("tlsconf: a client certificate needs both its certificate and its key file")
	}
	if f.Cert != "" {
		pair, err := LoadKeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return pair.Certificate()
		}
	}
	return cfg, nil
}

// Equal reports whether two certificates are the same bytes.
func Equal(a, b *x509.Certificate) bool { return a != nil && b != nil && bytes.Equal(a.Raw, b.Raw) }
