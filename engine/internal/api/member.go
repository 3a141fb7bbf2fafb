package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/route"
)

// Member assertions are the headers with which one member speaks to
// another on a client's behalf: a publish forwarded (ForwardedHeader) or
// relayed (RelayedHeader) to a partition's leader, and the principal of a
// certificate caller whose call was sent on (PrincipalHeader). A receiver
// that honours them skips checks the sender already made (the topic-wide
// idempotency binding, the publish quota) or takes the caller's identity
// from them, so only a member may send them. Where they are honoured is
// decided here, once (docs/security.md, "Member assertions"):
//
//  1. Members call each other's public services on the member path,
//     MemberPrefix followed by the procedure. Only a cluster serves it
//     (engine.Node.Handler), and only behind the member guard: with peer
//     TLS or a cluster secret, a request on it must authenticate as a
//     current member, and a hop header must name that member.
//  2. On the public paths, any member assertion is refused, with
//     PermissionDenied naming the header (RefuseMemberHeaders): a client
//     never speaks for a member, on a single node or in a cluster.
//  3. A handler honours an assertion only on a request the member path
//     marked (WithMember): hopContext for the hop headers, identify for the
//     principal, which also needs the member authenticated.
//
// On a cluster without member authentication (loopback, or --insecure),
// the member path is as open as the raft transport beside it: whoever
// reaches the port is taken for a member, which is why `rewind serve`
// refuses such a cluster on non-loopback addresses, and a cluster with
// --auth, unless told otherwise.

// MemberPrefix is the path prefix under which a cluster member serves its
// public services to the other members (MemberURL).
const MemberPrefix = route.MemberPrefix

// memberHeaders are the member assertions.
var memberHeaders = []string{ForwardedHeader, RelayedHeader, PrincipalHeader}

// memberMark is what the member path learned of a request's sender.
type memberMark struct {
	// node is the authenticated member, 0 when members do not
	// authenticate.
	node uint64
}

type memberKey struct{}

// WithMember marks ctx as a request that arrived on the member path from
// node (0: the cluster does not authenticate its members). Only the
// member guard calls it, after its checks.
func WithMember(ctx context.Context, node uint64) context.Context {
	return context.WithValue(ctx, memberKey{}, memberMark{node: node})
}

// memberOf reports whether ctx's request arrived on the member path, and
// from which authenticated member (0: unauthenticated).
func memberOf(ctx context.Context) (node uint64, ok bool) {
	m, ok := ctx.Value(memberKey{}).(memberMark)
	return m.node, ok
}

// AssertedMember returns the node a request's hop header names, whether
// one is present, and whether its value is a member id in canonical
// decimal (ok false: malformed). The member guard compares it
// with the authenticated member.
func AssertedMember(h http.Header) (node uint64, present, ok bool) {
	v := h.Get(RelayedHeader)
	if v == "" {
		v = h.Get(ForwardedHeader)
	}
	if v == "" {
		return 0, false, true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != v { // canonical decimal only
		return 0, true, false
	}
	return n, true, true
}

// HasMemberHeaders reports whether h carries any member assertion, and
// which.
func HasMemberHeaders(h http.Header) (string, bool) {
	for _, k := range memberHeaders {
		if _, ok := h[http.CanonicalHeaderKey(k)]; ok {
			return k, true
		}
	}
	return "", false
}

// RefuseMemberHeaders serves the public paths: a request carrying a member
// assertion is refused with PermissionDenied (in the caller's protocol, or
// HTTP 403) before its handler runs, its body unread (refuseUnread).
func RefuseMemberHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := HasMemberHeaders(r.Header)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		refuseUnread(w, r, connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"the %s header is for calls between cluster members; a client may not send it", k)))
	})
}

// MemberHandler serves h, the public services, on the member path: it
// strips MemberPrefix. The caller guards it (engine: only members reach
// it, marked WithMember).
func MemberHandler(h http.Handler) http.Handler {
	return http.StripPrefix(MemberPrefix, h)
}
