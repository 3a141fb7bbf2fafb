// Package peerauth authenticates the requests members of a Rewind cluster
// send each other with a shared cluster secret, with or without TLS.
//
// Every peer request carries the header Header: an authenticator
//
//	v1 <from> <to> <unix seconds> <hex HMAC-SHA256>
//
// where the HMAC, keyed with the secret, covers a domain label, the
// cluster id and the three numbers. The secret itself never travels. A
// receiver (Verifier) accepts it when the MAC is right (compared in
// constant time), <to> is itself and the time is within Window of its own
// clock; <from> is then the authenticated sender. A joining node knows
// neither the cluster id nor the id of the member it asks, and signs with
// both 0: a receiver accepts that only where it is told to (the join
// call).
//
// Without TLS this proves knowledge of the secret; it neither encrypts nor
// protects the body, and someone who can watch the network may replay a
// captured authenticator to the same receiver within Window. Peer mutual
// TLS closes both (docs/security.md).
//
// The sending side marks a request's context with the member it is for
// (WithTarget); Transport signs from that mark.
package peerauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header carries the authenticator.
const Header = "Rewind-Peer-Auth"

// Window is how far an authenticator's time may be from the receiver's
// clock, either way: members' clocks must agree within it.
const Window = 5 * time.Minute

// MinSecretBytes is the shortest secret accepted.
const MinSecretBytes = 16

// Errors of Parse and Verify.
var (
	ErrMalformed = errors.New("peerauth: malformed authenticator")
	ErrBadMAC    = errors.New("peerauth: wrong authenticator (another cluster secret?)")
	ErrExpired   = errors.New("peerauth: authenticator outside the time window (clocks apart, or replayed)")
	ErrWrongNode = errors.New("peerauth: authenticator for another node")
	ErrMissing   = errors.New("peerauth: no authenticator")
)

// Token is a parsed authenticator.
type Token struct {
	From, To uint64
	Unix     int64
	MAC      [sha256.Size]byte
}

// String renders t as the header value.
func (t Token) String() string {
	return fmt.Sprintf("v1 %d %d %d %s", t.From, t.To, t.Unix, hex.EncodeToString(t.MAC[:]))
}

// Parse parses a header value strictly: five space-separated fields,
// decimal numbers without signs or leading zeros, 64 lowercase hex digits.
func Parse(s string) (Token, error) {
	var t Token
	f := strings.Split(s, " ")
	if len(f) != 5 || f[0] != "v1" {
		return t, ErrMalformed
	}
	var err error
	if t.From, err = parseUint(f[1]); err != nil {
		return t, err
	}
	if t.To, err = parseUint(f[2]); err != nil {
		return t, err
	}
	u, err := parseUint(f[3])
	if err != nil || u > 1<<62 {
		return t, ErrMalformed
	}
	t.Unix = int64(u)
	if len(f[4]) != 2*sha256.Size || strings.ToLower(f[4]) != f[4] {
		return t, ErrMalformed
	}
	if _, err := hex.Decode(t.MAC[:], []byte(f[4])); err != nil {
		return t, ErrMalformed
	}
	return t, nil
}

func parseUint(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || strconv.FormatUint(v, 10) != s {
		return 0, ErrMalformed
	}
	return v, nil
}

// mac computes the authenticator's MAC.
func mac(secret []byte, cluster, from, to uint64, unix int64) [sha256.Size]byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("rewind peer v1\x00"))
	var b [32]byte
	binary.BigEndian.PutUint64(b[0:], cluster)
	binary.BigEndian.PutUint64(b[8:], from)
	binary.BigEndian.PutUint64(b[16:], to)
	binary.BigEndian.PutUint64(b[24:], uint64(unix))
	h.Write(b[:])
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Sign returns the authenticator of a request from member from to member
// to of cluster, at time now.
func Sign(secret []byte, cluster, from, to uint64, now time.Time) Token {
	u := now.Unix()
	return Token{From: from, To: to, Unix: u, MAC: mac(secret, cluster, from, to, u)}
}

// Verifier checks authenticators received by one member.
type Verifier struct {
	Secret  []byte
	Cluster uint64
	Self    uint64
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Verify checks header value v and returns the authenticated sender. With
// join set it also accepts the authenticator of a joining node (cluster
// and receiver 0).
func (vf *Verifier) Verify(v string, join bool) (from uint64, err error) {
	if v == "" {
		return 0, ErrMissing
	}
	t, err := Parse(v)
	if err != nil {
		return 0, err
	}
	cluster := vf.Cluster
	switch {
	case t.To == vf.Self:
	case t.To == 0 && join:
		cluster = 0
	default:
		return 0, fmt.Errorf("%w: to node %d, this is node %d", ErrWrongNode, t.To, vf.Self)
	}
	want := mac(vf.Secret, cluster, t.From, t.To, t.Unix)
	if !hmac.Equal(want[:], t.MAC[:]) {
		return 0, ErrBadMAC
	}
	now := time.Now
	if vf.Now != nil {
		now = vf.Now
	}
	if d := time.Duration(now().Unix()-t.Unix) * time.Second; d > Window || d < -Window {
		return 0, fmt.Errorf("%w: %s apart", ErrExpired, d)
	}
	if t.From == 0 {
		return 0, ErrMalformed
	}
	return t.From, nil
}

type targetKey struct{}

// WithTarget marks ctx as the context of a request for member node (0:
// a member whose id is unknown, when joining).
func WithTarget(ctx context.Context, node uint64) context.Context {
	return context.WithValue(ctx, targetKey{}, node)
}

// TargetOf returns the member ctx was marked for by WithTarget.
func TargetOf(ctx context.Context) (uint64, bool) {
	n, ok := ctx.Value(targetKey{}).(uint64)
	return n, ok
}

type peerKey struct{}

// WithPeer marks a served request's context as sent by authenticated
// member node.
func WithPeer(ctx context.Context, node uint64) context.Context {
	return context.WithValue(ctx, peerKey{}, node)
}

// PeerOf returns the authenticated member that sent the request ctx
// serves (WithPeer).
func PeerOf(ctx context.Context) (uint64, bool) {
	n, ok := ctx.Value(peerKey{}).(uint64)
	return n, ok
}

// Transport signs every request it carries with an authenticator for the
// member its context is marked for (WithTarget; unmarked requests are
// signed as a join: cluster and receiver 0).
type Transport struct {
	Base    http.RoundTripper
	Secret  []byte
	Cluster func() uint64
	Self    uint64
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	to, _ := TargetOf(r.Context())
	var cluster uint64
	if to != 0 {
		cluster = t.Cluster()
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	r = r.Clone(r.Context())
	r.Header.Set(Header, Sign(t.Secret, cluster, t.Self, to, now()).String())
	return t.Base.RoundTrip(r)
}

// CloseIdleConnections closes the base transport's idle connections.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
