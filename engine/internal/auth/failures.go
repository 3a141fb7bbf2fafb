package auth

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// Failed authentications per source (issue 24, finding 7d: about 9,000 bad
// tokens a second became 2.5 MB/s of audit log). Each source (an IPv4
// address or an IPv6 /64) has a token bucket of failures: Burst at once,
// Rate a second after that. A source whose bucket is empty is refused
// without its credentials being checked until the bucket has a token
// again, and its audit lines are aggregated: at most one a source per
// AuditInterval, carrying the count of the failures left out since the
// last one. The table of sources is bounded (MaxSources), so a flood of
// addresses costs memory once, not per address.

// FailureConfig limits failed authentications (a missing, bad, expired
// or revoked token) by source: an IPv4 address or an IPv6 /64, read from
// the connection (headers such as X-Forwarded-For are not believed). A
// source gets Burst failures at once and Rate a second after that; past
// them, its calls are refused with ResourceExhausted and a Retry-After
// header, without their credentials being checked, until its allowance
// refills. The audit log gets at most one line per source and
// AuditInterval, with the count of failures it left out ("suppressed").
// Calls between members, and by default loopback callers, are not
// counted. Zero fields take their defaults. Package engine re-exports it
// as engine.AuthFailureConfig.
type FailureConfig struct {
	// Rate is the failures a second a source may sustain. Default 5;
	// negative: no limit (the audit lines are still aggregated).
	Rate float64
	// Burst is the failures a source may have at once. Default 20.
	Burst int
	// AuditInterval is the least time between two audit lines of one
	// source. Default 10 s.
	AuditInterval time.Duration
	// MaxSources bounds the sources tracked (about 100 bytes each).
	// Default 10,000; when it is full, sources at rest (bucket full,
	// nothing left to audit) are dropped, and if none is, new sources
	// share one allowance, so a flood from many addresses is limited as
	// one source.
	MaxSources int
	// Loopback limits loopback sources too. By default they are exempt
	// (neither limited nor aggregated): every caller on a developer's
	// machine, and every member of a cluster run on one host, is
	// loopback. Set it when a proxy on the same host forwards outside
	// clients (they would all be one source: better, put the limit in the
	// proxy).
	Loopback bool
}

// Failures tracks failed authentications by source. Safe for concurrent
// use.
type Failures struct {
	cfg FailureConfig
	now func() time.Time
	mu  struct {
		sync.Mutex
		sources   map[string]*failSource
		lastSweep time.Time // Pending's last scan
		lastDrop  time.Time // dropRestingLocked's last scan
	}
}

type failSource struct {
	tokens  float64   // failures left; refills at Rate
	at      time.Time // when tokens was computed
	audited time.Time // the last audit line
	left    int       // failures not audited since
}

// overflowSource is the shared entry of the sources the full table could
// not take.
const overflowSource = "(other sources)"

// NewFailures returns an empty table under cfg, reading the time from now
// (nil: time.Now).
func NewFailures(cfg FailureConfig, now func() time.Time) *Failures {
	if cfg.Rate == 0 {
		cfg.Rate = 5
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 20
	}
	if cfg.AuditInterval <= 0 {
		cfg.AuditInterval = 10 * time.Second
	}
	if cfg.MaxSources <= 0 {
		cfg.MaxSources = 10_000
	}
	if now == nil {
		now = time.Now
	}
	f := &Failures{cfg: cfg, now: now}
	f.mu.sources = map[string]*failSource{}
	return f
}

// Exempt reports whether the failures of a source at addr are not
// counted (see FailureConfig.Loopback).
func (f *Failures) Exempt(addr netip.Addr) bool {
	return !f.cfg.Loopback && addr.Unmap().IsLoopback()
}

// Limited reports whether src has used its failures, and if so when it
// may try again: its requests are then refused unchecked.
func (f *Failures) Limited(src string) (retryAfter time.Duration, limited bool) {
	if f.cfg.Rate < 0 {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	s, ok := f.mu.sources[src]
	if !ok {
		if s, ok = f.mu.sources[overflowSource]; !ok || len(f.mu.sources) < f.cfg.MaxSources {
			return 0, false
		}
	}
	f.refillLocked(s, now)
	if s.tokens >= 1 {
		return 0, false
	}
	return time.Duration(math.Ceil((1 - s.tokens) / f.cfg.Rate * float64(time.Second))), true
}

// Fail records a failure of src (a failed authentication, or a request
// refused because src is limited) and says whether to audit it.
func (f *Failures) Fail(src string) (write bool, left int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	s := f.sourceLocked(src, now)
	f.refillLocked(s, now)
	s.tokens = max(s.tokens-1, 0)
	if !s.audited.IsZero() && now.Sub(s.audited) < f.cfg.AuditInterval {
		s.left++
		return false, 0
	}
	left, s.left, s.audited = s.left, 0, now
	return true, left
}

// Pending returns and clears the counts of sources whose failures were
// left out of the audit log and whose interval has passed: the caller
// writes one line for each, so that the last failures of an attack that
// stopped are counted too. Call it now and then (Failures owns no
// goroutine); it scans the table at most once an interval.
func (f *Failures) Pending() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if now.Sub(f.mu.lastSweep) < f.cfg.AuditInterval {
		return nil
	}
	f.mu.lastSweep = now
	var out map[string]int
	for src, s := range f.mu.sources {
		if s.left > 0 && now.Sub(s.audited) >= f.cfg.AuditInterval {
			if out == nil {
				out = map[string]int{}
			}
			out[src], s.left, s.audited = s.left, 0, now
		}
	}
	return out
}

// Sources is the number of sources tracked.
func (f *Failures) Sources() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.mu.sources)
}

// sourceLocked returns src's entry, making one (or, the table full, the
// shared overflow entry).
func (f *Failures) sourceLocked(src string, now time.Time) *failSource {
	if s, ok := f.mu.sources[src]; ok {
		return s
	}
	if len(f.mu.sources) >= f.cfg.MaxSources && now.Sub(f.mu.lastDrop) >= time.Second {
		// At most a scan a second: a flood of new addresses must not
		// make every failure scan the table.
		f.mu.lastDrop = now
		f.dropRestingLocked(now)
	}
	if len(f.mu.sources) >= f.cfg.MaxSources {
		src = overflowSource
		if s, ok := f.mu.sources[src]; ok {
			return s
		}
	}
	s := &failSource{tokens: float64(f.cfg.Burst), at: now}
	f.mu.sources[src] = s
	return s
}

// dropRestingLocked drops the sources at rest: bucket full again, nothing
// left to audit.
func (f *Failures) dropRestingLocked(now time.Time) {
	for src, s := range f.mu.sources {
		f.refillLocked(s, now)
		if s.tokens >= float64(f.cfg.Burst) && s.left == 0 {
			delete(f.mu.sources, src)
		}
	}
}

func (f *Failures) refillLocked(s *failSource, now time.Time) {
	if f.cfg.Rate < 0 {
		s.tokens = float64(f.cfg.Burst)
	} else if d := now.Sub(s.at); d > 0 {
		s.tokens = min(s.tokens+d.Seconds()*f.cfg.Rate, float64(f.cfg.Burst))
	}
	s.at = now
}
