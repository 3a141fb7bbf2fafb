package api

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/auth"
)

// TestPrincipalAssertion: a principal assertion names the caller only on
// a request the member path marked as an authenticated member's; from a
// client, or from an unauthenticated member path, it is refused, whatever
// it carries beside it.
func TestPrincipalAssertion(t *testing.T) {
	st := &auth.State{ResumeKey: auth.NewResumeKey()}
	g := &guard{cfg: AuthConfig{Now: time.Now}, state: func() *auth.State { return st }}
	for _, c := range []struct {
		name      string
		ctx       context.Context
		principal string
		want      string // "" refused
	}{
		{"from an authenticated member", WithMember(context.Background(), 2), "svc", "svc"},
		{"from a client", context.Background(), "root", ""},
		{"from an unauthenticated member path", WithMember(context.Background(), 0), "root", ""},
		{"an invalid principal", WithMember(context.Background(), 2), "a b\x00", ""},
	} {
		r := httptest.NewRequestWithContext(c.ctx, "POST", "/rewind.v1.AuthService/ListUsers", nil)
		r.Header.Set(PrincipalHeader, c.principal)
		r.Header.Set("Rewind-Principal-Sig", "4102444800.anything")
		id, err := g.identify(r)
		switch {
		case c.want == "" && (err == nil || connect.CodeOf(err) != connect.CodeUnauthenticated):
			t.Errorf("%s: %v, %v; want Unauthenticated", c.name, id, err)
		case c.want != "" && (err != nil || id.Principal != c.want):
			t.Errorf("%s: %v, %v; want principal %q", c.name, id, err, c.want)
		}
	}
}
