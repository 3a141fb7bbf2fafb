package check

import (
	"strings"

	"github.com/rewind-io/rewind/scenarios/history"
)

// clientErrors are the answers a malformed request may get: success (the
// bytes happened to form a harmless request) or a code that says what
// was wrong with the request or the moment.
var clientErrors = map[string]bool{
	"ok": true, "invalid_argument": true, "not_found": true, "already_exists": true, "failed_precondition": true,
	"out_of_range": true, "resource_exhausted": true, "unimplemented": true, "unavailable": true, "aborted": true,
	"deadline_exceeded": true, "canceled": true, "permission_denied": true, "unauthenticated": true,
}

// Gauntlet judges the malformed requests of the gauntlet workload: every
// one got an answer (no node crashed or stopped answering while no fault
// held it down) and every answer is success or a client error — never
// internal, unknown or data_loss, never a bare HTTP error; one that
// cannot succeed (MustFail: a replay through a filter bomb) failed. Stats: probes,
// and probes_CODE for each answer.
func Gauntlet(h *history.History) Verdict {
	b := newVerdict("gauntlet", "every malformed request gets a clear client error from a node that stays up")
	if len(h.Probes) == 0 {
		return b.skip("no malformed requests sent")
	}
	for _, p := range h.Probes {
		b.inc("probes")
		code := p.Code
		if strings.HasPrefix(code, "transport") {
			code = "transport"
		}
		b.inc("probes_" + code)
		switch {
		case !clientErrors[p.Code]:
			b.addf(nil, nil, "node %d answered %s (%s) with %q", p.Node, p.RPC, p.Input, p.Code)
		case p.MustFail && p.Code == "ok":
			b.addf(nil, nil, "%s (%s) succeeded, but it cannot", p.RPC, p.Input)
		}
	}
	return b.done()
}
