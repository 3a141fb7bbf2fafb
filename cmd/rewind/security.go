package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
)

// securityFlags are serve's transport security flags (docs/security.md).
type securityFlags struct {
	cert, key, clientCA       string
	peerCert, peerKey, peerCA string
	secretFile                string
	insecure                  bool
}

func (s *securityFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.cert, "tls-cert", "", "serve TLS only, with this certificate (PEM; reloaded when the file changes)")
	f.StringVar(&s.key, "tls-key", "", "the private key of --tls-cert (PEM)")
	f.StringVar(&s.clientCA, "tls-client-ca", "", "require every client to present a certificate signed by a CA in this file (PEM); its CN, or first SAN, names the client")
	f.StringVar(&s.peerCert, "peer-tls-cert", "", "this member's certificate for mutual TLS with its peers (PEM); it must carry the DNS SAN node-<its --node-id>")
	f.StringVar(&s.peerKey, "peer-tls-key", "", "the private key of --peer-tls-cert (PEM)")
	f.StringVar(&s.peerCA, "peer-tls-ca", "", "the cluster CA (PEM): peers must present a certificate it signed")
	f.StringVar(&s.secretFile, "cluster-secret-file", "", "file holding the cluster secret (at least 16 bytes; the same on every member): peers authenticate every request with it")
	f.BoolVar(&s.insecure, "insecure", false, "allow a non-loopback --listen without client authentication, and a cluster on non-loopback addresses without peer authentication")
}

// clientAuth reports whether clients must authenticate.
func (s *securityFlags) clientAuth() bool { return s.clientCA != "" }

// peerAuth reports whether members must authenticate to each other.
func (s *securityFlags) peerAuth() bool { return s.peerCert != "" || s.secretFile != "" }

// secret reads --cluster-secret-file (nil when unset), without its
// surrounding white space, and warns when others may read the file.
func (s *securityFlags) secret(log hclog.Logger) ([]byte, error) {
	if s.secretFile == "" {
		return nil, nil
	}
	if fi, err := os.Stat(s.secretFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the cluster secret file is readable by other users: chmod 600 it", "path", s.secretFile, "mode", fi.Mode().Perm().String())
	}
	b, err := os.ReadFile(s.secretFile)
	if err != nil {
		return nil, fmt.Errorf("--cluster-secret-file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("--cluster-secret-file %s is empty (make one with: openssl rand -hex 32 > %s)", s.secretFile, s.secretFile)
	}
	return b, nil
}

// exposure is what refuseExposed weighs: where the node listens, how
// clients and members authenticate, and whether the operator accepted
// the risk.
type exposure struct {
	listen string
	// clientCerts: clients must present certificates (--tls-client-ca).
	clientCerts bool
	// tokens: --auth (bearer tokens); tls: the port speaks TLS.
	tokens, tls bool
	// cluster is every member's address (and --join's); peerAuth: members
	// authenticate each other (peer TLS or the cluster secret).
	cluster  []string
	peerAuth bool
	insecure bool
}

// refuseExposed is serve's safe default (docs/security.md, "Safe
// defaults"): a node listens on a non-loopback address only when its
// clients authenticate in a way the network cannot steal, client
// certificates or tokens over TLS (--auth without TLS would send every
// bearer token in clear), and the members of a cluster on non-loopback
// addresses authenticate each other; insecure lifts both.
func refuseExposed(e exposure) error {
	if e.insecure {
		return nil
	}
	if !isLoopback(e.listen) {
		switch {
		case e.clientCerts, e.tokens && e.tls:
		case e.tokens:
			return fmt.Errorf("refusing to listen on %s with --auth but without TLS: every bearer token would cross the network in clear, for anyone on the path to reuse. "+
				"Serve TLS (--tls-cert, --tls-key; docs/security.md), listen on loopback (127.0.0.1), or pass --insecure to accept the risk", e.listen)
		default:
			return fmt.Errorf("refusing to listen on %s without client authentication: anyone who reaches it could publish, replay every topic and reset groups. "+
				"Turn on --auth with TLS (--tls-cert, --tls-key), or require client certificates (--tls-client-ca; docs/security.md), listen on loopback (127.0.0.1), or pass --insecure to accept the risk", e.listen)
		}
	}
	if e.peerAuth {
		return nil
	}
	var exposed []string
	for _, a := range e.cluster {
		if !isLoopback(a) {
			exposed = append(exposed, a)
		}
	}
	if len(exposed) > 0 {
		return fmt.Errorf("refusing to run a cluster on %s without peer authentication: anyone who reaches a member could join the raft conversation and speak as a member. "+
			"Give every member --cluster-secret-file or peer TLS (--peer-tls-cert, --peer-tls-key, --peer-tls-ca; docs/security.md), or pass --insecure to accept the risk", strings.Join(exposed, ", "))
	}
	return nil
}

// orEnv is v, or when it is empty the environment variable env: secrets
// are read so rather than given as a flag's default, which help and
// usage print.
func orEnv(v, env string) string {
	if v != "" {
		return v
	}
	return os.Getenv(env)
}

// isLoopback reports whether host:port names only a loopback address:
// localhost or a loopback IP. An empty host (every interface) and other
// names are not.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
