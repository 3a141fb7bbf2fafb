// Package quota keeps one tenant from starving the others: per principal
// rates of published bytes, replayed bytes and filter fuel, a cap on
// concurrent streams, and caps on the topics a principal created and their
// partitions (CheckTopics: those are checked by the metadata group, where
// topic creations are serialized, not by a Limiter).
//
// Rates are token buckets that may go into debt: a request is admitted
// while the bucket is not empty and takes what it uses, even beyond what is
// left, so a request larger than the burst still passes, and the debt is
// what the next one waits for. The burst is one second of the rate.
// Publishes over their rate are refused with the wait (the caller retries
// then: ResourceExhausted with retry information); replays and filter fuel
// are paced instead: the stream waits, it never fails. Live reads (a start
// at the end, a group member resuming) are not charged, so that a replay
// storm cannot slow the live tail.
package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Limits are one principal's quotas; zero means unlimited.
type Limits struct {
	PublishBytesPerSec uint64 `json:"publish_bytes_per_sec,omitempty"`
	ReplayBytesPerSec  uint64 `json:"replay_bytes_per_sec,omitempty"`
	Streams            uint32 `json:"streams,omitempty"`
	FilterFuelPerSec   uint64 `json:"filter_fuel_per_sec,omitempty"`
	// Topics caps the topics the principal created that still exist;
	// Partitions caps their partitions, all together (CheckTopics).
	Topics     uint32 `json:"topics,omitempty"`
	Partitions uint32 `json:"partitions,omitempty"`
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// String shows the limits the way `rewind quota` takes them.
func (l Limits) String() string {
	show := func(v uint64) string {
		if v == 0 {
			return "unlimited"
		}
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("publish-bytes-per-sec=%s replay-bytes-per-sec=%s streams=%s filter-fuel-per-sec=%s topics=%s partitions=%s",
		show(l.PublishBytesPerSec), show(l.ReplayBytesPerSec), show(uint64(l.Streams)), show(l.FilterFuelPerSec),
		show(uint64(l.Topics)), show(uint64(l.Partitions)))
}

// Kind names what a bucket limits, for errors and metrics.
type Kind string

// The kinds.
const (
	Publish Kind = "publish_bytes"
	Replay  Kind = "replay_bytes"
	Fuel    Kind = "filter_fuel"
	Streams Kind = "streams"
	// Topics and Partitions: what the principal created and still exists.
	Topics     Kind = "topics"
	Partitions Kind = "partitions"
)

// ErrExceeded is wrapped by the errors of requests refused over quota.
var ErrExceeded = errors.New("quota exceeded")

// Exceeded is a refusal: the principal, what it exceeded, and when to try
// again (zero for streams: when one of them ends; for topics and
// partitions: when the principal deletes some).
type Exceeded struct {
	Principal  string
	Kind       Kind
	RetryAfter time.Duration
	// For Topics and Partitions: the limit, what the principal holds, and
	// what the refused request asked for.
	Limit, Used, Asked uint64
}

func (e *Exceeded) Error() string {
	switch e.Kind {
	case Topics:
		return fmt.Sprintf("quota exceeded: principal %q may have %d topics and has %d; delete one or raise its topics quota",
			e.Principal, e.Limit, e.Used)
	case Partitions:
		return fmt.Sprintf("quota exceeded: principal %q may have %d partitions in all and has %d; a topic of %d would make %d",
			e.Principal, e.Limit, e.Used, e.Asked, e.Used+e.Asked)
	}
	if e.RetryAfter > 0 {
		return fmt.Sprintf("quota exceeded: principal %q over its %s rate; retry after %s", e.Principal, e.Kind, e.RetryAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("quota exceeded: principal %q has its maximum of concurrent %s open", e.Principal, e.Kind)
}

func (e *Exceeded) Unwrap() error { return ErrExceeded }

// Owned is what a principal created that still exists: topics and their
// partitions.
type Owned struct {
	Topics, Partitions uint64
}

// CheckTopics admits the creation by principal of a topic of partitions,
// when it already owns owned; or refuses it with an *Exceeded naming the
// limit it would pass. The caller must serialize creations (the metadata
// group's apply does), or two could pass together.
func CheckTopics(principal string, l Limits, owned Owned, partitions uint32) error {
	if l.Topics > 0 && owned.Topics+1 > uint64(l.Topics) {
		return &Exceeded{Principal: principal, Kind: Topics, Limit: uint64(l.Topics), Used: owned.Topics, Asked: 1}
	}
	if l.Partitions > 0 && owned.Partitions+uint64(partitions) > uint64(l.Partitions) {
		return &Exceeded{Principal: principal, Kind: Partitions, Limit: uint64(l.Partitions), Used: owned.Partitions, Asked: uint64(partitions)}
	}
	return nil
}

// Usage is what a principal has been charged and refused, for metrics.
type Usage struct {
	Principal                 string
	PublishBytes, ReplayBytes uint64
	Fuel                      uint64
	Streams                   int
	Refused                   uint64 // publishes and streams refused
	PacedNanos                uint64 // time replays and filters waited
}

// Limiter enforces Limits per principal. Its limits come from a function
// (the replicated authorization state), read on every call, so a change
// applies at once.
type Limiter struct {
	limits func(principal string) Limits
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error

	mu      sync.Mutex
	tenants map[string]*tenant
}

type tenant struct {
	publish, replay, fuel bucket
	streams               int
	usage                 Usage
}

// bucket is a token bucket allowed into debt; level is in units (bytes or
// fuel), at most one second of the rate.
type bucket struct {
	level float64
	at    time.Time
	init  bool
}

// refill brings b to now at rate per second; it returns the level.
func (b *bucket) refill(now time.Time, rate uint64) float64 {
	burst := float64(rate)
	if !b.init {
		b.level, b.at, b.init = burst, now, true
		return b.level
	}
	if d := now.Sub(b.at); d > 0 {
		b.level = min(burst, b.level+d.Seconds()*float64(rate))
		b.at = now
	}
	return b.level
}

// wait is how long until a bucket at level (negative) is back at zero.
func wait(level float64, rate uint64) time.Duration {
	if level >= 0 {
		return 0
	}
	return time.Duration(-level / float64(rate) * float64(time.Second))
}

// New returns a limiter reading each principal's limits from limits.
func New(limits func(principal string) Limits) *Limiter {
	return &Limiter{limits: limits, now: time.Now, sleep: sleepCtx, tenants: map[string]*tenant{}}
}

// WithClock replaces the clock and the sleep the limiter uses (tests).
func (l *Limiter) WithClock(now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) *Limiter {
	l.now, l.sleep = now, sleep
	return l
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (l *Limiter) tenant(principal string) *tenant {
	t := l.tenants[principal]
	if t == nil {
		t = &tenant{usage: Usage{Principal: principal}}
		l.tenants[principal] = t
	}
	return t
}

// Publish admits a publish of n bytes by principal, or refuses it with an
// *Exceeded saying how long to wait.
func (l *Limiter) Publish(principal string, n int) error {
	rate := l.limits(principal).PublishBytesPerSec
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tenant(principal)
	if rate == 0 {
		t.usage.PublishBytes += uint64(n)
		return nil
	}
	level := t.publish.refill(l.now(), rate)
	if level <= 0 {
		t.usage.Refused++
		return &Exceeded{Principal: principal, Kind: Publish, RetryAfter: max(wait(level, rate), time.Millisecond)}
	}
	t.publish.level -= float64(n)
	t.usage.PublishBytes += uint64(n)
	return nil
}

// Replay charges n bytes a replay of principal sent and waits while the
// principal is over its rate (or until ctx ends).
func (l *Limiter) Replay(ctx context.Context, principal string, n int) error {
	return l.pace(ctx, principal, Replay, uint64(n))
}

// Fuel charges filter fuel a filtered replay of principal burned, and
// waits while the principal is over its rate.
func (l *Limiter) Fuel(ctx context.Context, principal string, fuel uint64) error {
	return l.pace(ctx, principal, Fuel, fuel)
}

func (l *Limiter) pace(ctx context.Context, principal string, k Kind, n uint64) error {
	lim := l.limits(principal)
	rate := lim.ReplayBytesPerSec
	if k == Fuel {
		rate = lim.FilterFuelPerSec
	}
	l.mu.Lock()
	t := l.tenant(principal)
	b := &t.replay
	if k == Fuel {
		b = &t.fuel
		t.usage.Fuel += n
	} else {
		t.usage.ReplayBytes += n
	}
	if rate == 0 {
		l.mu.Unlock()
		return nil
	}
	b.refill(l.now(), rate)
	b.level -= float64(n)
	d := wait(b.level, rate)
	if d > 0 {
		t.usage.PacedNanos += uint64(d)
	}
	l.mu.Unlock()
	if d == 0 {
		return nil
	}
	return l.sleep(ctx, d)
}

// OpenStream counts a stream of principal against its cap; the returned
// function ends it (call it once).
func (l *Limiter) OpenStream(principal string) (release func(), err error) {
	limit := l.limits(principal).Streams
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tenant(principal)
	if limit > 0 && t.streams >= int(limit) {
		t.usage.Refused++
		return nil, &Exceeded{Principal: principal, Kind: Streams}
	}
	t.streams++
	t.usage.Streams = t.streams
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			t.streams--
			t.usage.Streams = t.streams
			l.mu.Unlock()
		})
	}, nil
}

// Usage returns every principal's usage so far, for metrics.
func (l *Limiter) Usage() []Usage {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Usage, 0, len(l.tenants))
	for _, t := range l.tenants {
		out = append(out, t.usage)
	}
	return out
}
