package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"strings"
)

// Identity is the authenticated caller of one request.
type Identity struct {
	Principal string
	// TokenID is the id of the bearer token used; empty for a client
	// certificate.
	TokenID string
	// Authorization is the request's Authorization header as received, so
	// a member forwarding the request to another member can carry it (the
	// tokens are replicated, so the other member checks it again). Never
	// logged.
	Authorization string
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity WithIdentity stored in ctx.
func FromContext(ctx context.Context) (*Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(*Identity)
	return id, ok
}

// CertPrincipal is the principal a verified client certificate speaks
// for: its subject's common name, or when that is empty its first DNS
// name, e-mail address or URI (in that order); "" when it has none.
func CertPrincipal(c *x509.Certificate) string {
	switch {
	case c.Subject.CommonName != "":
		return c.Subject.CommonName
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	case len(c.EmailAddresses) > 0:
		return c.EmailAddresses[0]
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	}
	return ""
}

// resumeMACLen is the bytes of HMAC-SHA256 kept in a signed resume token.
const resumeMACLen = 16

// SignResume appends an HMAC of token and principal under key:
// "<token>.<mac>". Resume tokens are base64url, which has no ".", so the
// signature splits off unambiguously. The principal is bound in, so a
// token handed to one principal is unsigned for every other.
func SignResume(key []byte, principal, token string) string {
	if token == "" {
		return ""
	}
	return token + "." + base64.RawURLEncoding.EncodeToString(resumeMAC(key, principal, token))
}

// VerifyResume splits a possibly signed resume token: the token itself,
// and whether it carried a valid signature under key for principal.
func VerifyResume(key []byte, principal, s string) (token string, signed bool) {
	token, sig, ok := strings.Cut(s, ".")
	if !ok {
		return s, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(key) == 0 {
		return token, false
	}
	return token, hmac.Equal(got, resumeMAC(key, principal, token))
}

func resumeMAC(key []byte, principal, token string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("rewind resume token v1\x00"))
	m.Write([]byte(principal))
	m.Write([]byte{0})
	m.Write([]byte(token))
	return m.Sum(nil)[:resumeMACLen]
}
