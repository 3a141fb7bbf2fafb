package auth

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Event is one audit log line.
type Event struct {
	Time      time.Time `json:"time"`
	Principal string    `json:"principal"`
	// Operation is the right checked ("replay") or, for admin calls, the
	// RPC ("CreateUser").
	Operation string `json:"operation"`
	Resource  string `json:"resource"`
	// Outcome: "allowed", "denied", "unauthenticated", or for an admin call
	// "ok" or "error".
	Outcome   string `json:"outcome"`
	RequestID string `json:"request_id"`
	// Procedure is the RPC's full name.
	Procedure string `json:"procedure,omitempty"`
	// Detail adds context (the error code, the rule that decided). Never a
	// token.
	Detail string `json:"detail,omitempty"`
	// Source is the caller's address (an IPv4 address or an IPv6 /64) on
	// a failed authentication.
	Source string `json:"source,omitempty"`
	// Suppressed counts the failed authentications of Source left out of
	// the log since its previous line (auth.Failures): the line stands for
	// them too.
	Suppressed int `json:"suppressed,omitempty"`
}

// Audit writes events as JSON lines. It is safe for concurrent use.
type Audit struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// NewAudit writes to w; now defaults to time.Now.
func NewAudit(w io.Writer, now func() time.Time) *Audit {
	if now == nil {
		now = time.Now
	}
	return &Audit{w: w, now: now}
}

// Log writes e, stamping its time when unset. A write error is dropped:
// the audit sink must not fail the request (it is reported by the sink's
// owner).
func (a *Audit) Log(e Event) {
	if a == nil || a.w == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = a.now().UTC()
	}
	line, err := json.Marshal(e)
	if err != nil {
		return
	}
	line = append(line, '\n')
	a.mu.Lock()
	_, _ = a.w.Write(line)
	a.mu.Unlock()
}
