package engine

import (
	"time"

	"github.com/rewind-io/rewind/engine/internal/auth"
)

// AuthFailureConfig limits failed authentications (a missing, bad, expired
// or revoked token) by source: an IPv4 address or an IPv6 /64, read from
// the connection (headers such as X-Forwarded-For are not believed). A
// source gets Burst failures at once and Rate a second after that; past
// them, its calls are refused with ResourceExhausted and a Retry-After
// header, without their credentials being checked, until its allowance
// refills. The audit log gets at most one line per source and
// AuditInterval, with the count of failures it left out ("suppressed").
// Calls between members, and by default loopback callers, are not
// counted. Zero fields take their defaults.
type AuthFailureConfig struct {
	// Rate is the failures a second a source may sustain. Default 5;
	// negative: no limit (the audit lines are still aggregated).
	Rate float64
	// Burst is the failures a source may have at once. Default 20.
	Burst int
	// AuditInterval is the least time between two audit lines of one
	// source. Default 10 s.
	AuditInterval time.Duration
	// MaxSources bounds the sources tracked (about 100 bytes each).
	// Default 10,000; when it is full, sources at rest are dropped, and if
	// none is, new sources share one allowance.
	MaxSources int
	// Loopback limits loopback sources too. By default they are exempt:
	// every caller on a developer's machine, and every member of a
	// cluster run on one host, is loopback. Set it when a proxy on the
	// same host forwards outside clients (they would all be one source:
	// better, put the limit in the proxy).
	Loopback bool
}

func (c AuthFailureConfig) auth(now func() time.Time) auth.FailureConfig {
	return auth.FailureConfig{Rate: c.Rate, Burst: c.Burst, AuditInterval: c.AuditInterval, MaxSources: c.MaxSources, Now: now, Loopback: c.Loopback}
}
