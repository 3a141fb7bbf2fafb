package api

import (
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine/internal/auth"
)

// TestForwardSig: a member's principal assertion holds for its principal
// until it expires, under the cluster's key only.
func TestForwardSig(t *testing.T) {
	st := &auth.State{ResumeKey: auth.NewResumeKey()}
	other := &auth.State{ResumeKey: auth.NewResumeKey()}
	now := time.Unix(1_000_000, 0)
	sig := forwardSig(st, "svc", now.Add(forwardValidity).Unix())
	for _, c := range []struct {
		name      string
		st        *auth.State
		principal string
		sig       string
		at        time.Time
		want      bool
	}{
		{"valid", st, "svc", sig, now, true},
		{"another principal", st, "root", sig, now, false},
		{"another cluster", other, "svc", sig, now, false},
		{"expired", st, "svc", sig, now.Add(2 * forwardValidity), false},
		{"too far ahead", st, "svc", forwardSig(st, "svc", now.Add(time.Hour).Unix()), now, false},
		{"garbage", st, "svc", "x", now, false},
		{"empty", st, "svc", "", now, false},
	} {
		if got := checkForwardSig(c.st, c.principal, c.sig, c.at); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
