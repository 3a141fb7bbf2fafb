package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// FuzzMemberHeaders: whatever a client puts in the member assertion
// headers (and beside them), the public paths never let the request
// through with one present, and the parsing of a hop mark neither panics
// nor accepts anything but a member id written in canonical decimal.
func FuzzMemberHeaders(f *testing.F) {
	f.Add("", "", "", "Bearer rwd_x")
	f.Add("1", "", "", "")
	f.Add("", "2", "", "")
	f.Add("", "", "root", "")
	f.Add("01", "0", "root\x00", "bearer ")
	f.Add("18446744073709551616", "-1", "a b", "")
	f.Fuzz(func(t *testing.T, forwarded, relayed, principal, authz string) {
		h := http.Header{}
		for k, v := range map[string]string{ForwardedHeader: forwarded, RelayedHeader: relayed, PrincipalHeader: principal, "Authorization": authz} {
			if v != "" {
				h.Set(k, v)
			}
		}
		node, present, ok := AssertedMember(h)
		if present != (forwarded != "" || relayed != "") {
			t.Fatalf("AssertedMember(%q, %q): present %v", forwarded, relayed, present)
		}
		if present && ok {
			v := relayed
			if v == "" {
				v = forwarded
			}
			if node == 0 || strconv.FormatUint(node, 10) != v {
				t.Fatalf("AssertedMember took %q for node %d", v, node)
			}
		}
		reached := false
		srv := RefuseMemberHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached = true
			if _, ok := memberOf(r.Context()); ok {
				t.Fatal("a public request is marked as a member's")
			}
		}))
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/rewind.v1.PublishService/Publish", strings.NewReader("{}"))
		req.Header = h.Clone()
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		_, asserted := HasMemberHeaders(h)
		if asserted && (reached || w.Code != http.StatusForbidden) {
			t.Fatalf("a request with a member assertion got through (reached %v, status %d)", reached, w.Code)
		}
		if !asserted && !reached {
			t.Fatalf("a request without member assertions was refused: %d %s", w.Code, w.Body)
		}
	})
}

// TestMemberMark: the member path's mark, and the hop marks accepted.
func TestMemberMark(t *testing.T) {
	ctx := context.Background()
	if _, ok := memberOf(ctx); ok {
		t.Fatal("an unmarked context is a member's")
	}
	if n, ok := memberOf(WithMember(ctx, 3)); !ok || n != 3 {
		t.Fatalf("marked for node 3: %d %v", n, ok)
	}
	for _, tc := range []struct {
		v    string
		node uint64
		ok   bool
	}{{"3", 3, true}, {"03", 0, false}, {"0", 0, false}, {"x", 0, false}, {"-1", 0, false}, {"18446744073709551616", 0, false}} {
		h := http.Header{}
		h.Set(ForwardedHeader, tc.v)
		if n, present, ok := AssertedMember(h); !present || ok != tc.ok || n != tc.node {
			t.Errorf("AssertedMember(%q) = %d, %v, %v; want %d, true, %v", tc.v, n, present, ok, tc.node, tc.ok)
		}
	}
}
