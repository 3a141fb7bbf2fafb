// Package sched decides when catch-up reads may use the processor, so that
// live traffic keeps its latency while history is re-read.
//
// Work on a node is of two classes:
//
//   - Live: publishes being accepted, records delivered to subscribers
//     that have caught up with the tail, and raft writes (which the
//     Governor sees through its Activity counters). Live work never waits
//     for the scheduler; it only tells the scheduler it is running
//     (Scheduler.Live).
//   - Catch-up: a stream (or a leader fetch for a stream on another node)
//     reading history it has not caught up with. Catch-up work is cut into
//     units (one event's worth of records) and every unit waits for a turn
//     (Scheduler.CatchUp).
//
// A catch-up unit gets its turn when all of these hold, and waiters get
// turns in the order they asked:
//
//  1. Fewer than Slots units run (default: one fewer than the processors,
//     so one processor is always left to live work).
//  2. The budget is not spent: catch-up work may use Share of the node's
//     processor time. Every unit is charged what it used when it ends, and
//     the budget refills at Share × Cores processor-seconds per second, up
//     to Burst. The budget applies only while there is live work to
//     protect: when none has run for IdleAfter, units are neither held
//     back nor charged by it.
//  3. No live work is running, or the unit has already been held back for
//     MaxDefer by live work (so a steady stream of publishes slows replays
//     down but never stops them).
//
// A unit yields the processor when it ends (runtime.Gosched), so goroutines
// queued behind it run before the next unit. A Governor (governor.go)
// scales the budget's refill down while live work is delayed, and back up
// when it is not. The rules are in core, which
// owns no goroutine and reads no clock: the tests drive it with explicit
// times and check its decisions.
package sched

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Config configures a Scheduler. The zero value selects every default.
type Config struct {
	// Share is the fraction of the node's processor time (Cores
	// processors) that catch-up work may use, in (0, 1]. Default 0.1.
	Share float64
	// Cores is the number of processors the node runs on. Default
	// runtime.GOMAXPROCS(0).
	Cores int
	// Slots bounds the catch-up units running at once. Default
	// max(1, Cores-1).
	Slots int
	// Burst is the processor time catch-up work may save up while it has
	// nothing to do, and spend at once later. Default 10 ms.
	Burst time.Duration
	// MaxDefer bounds how long running live work holds back a catch-up
	// unit that could otherwise run. Default 2 ms.
	MaxDefer time.Duration
	// IdleAfter is how long after the last live work the budget stops
	// applying: a node with nothing live to protect replays as fast as
	// Slots allow. Default 250 ms.
	IdleAfter time.Duration
}

// Validate reports every problem with c at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Share < 0 || c.Share > 1 {
		errs = append(errs, fmt.Errorf("sched: Share %g outside (0, 1]", c.Share))
	}
	if c.Cores < 0 || c.Slots < 0 || c.Burst < 0 || c.MaxDefer < 0 || c.IdleAfter < 0 {
		errs = append(errs, errors.New("sched: negative Cores, Slots, Burst, MaxDefer or IdleAfter"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Share == 0 {
		c.Share = 0.1
	}
	if c.Cores == 0 {
		c.Cores = runtime.GOMAXPROCS(0)
	}
	if c.Slots == 0 {
		c.Slots = max(1, c.Cores-1)
	}
	if c.Burst == 0 {
		c.Burst = 10 * time.Millisecond
	}
	if c.MaxDefer == 0 {
		c.MaxDefer = 2 * time.Millisecond
	}
	if c.IdleAfter == 0 {
		c.IdleAfter = 250 * time.Millisecond
	}
	return c
}

// Stats counts what the scheduler did since it started.
type Stats struct {
	// Units is the catch-up units granted; CPU the processor time they
	// were charged.
	Units uint64
	CPU   time.Duration
	// Waited is the time catch-up units spent waiting for their turn.
	Waited time.Duration
	// Deferred counts the times running live work held back a unit that
	// could otherwise have run.
	Deferred uint64
	// Factor is the share of the budget the governor allows now (1: all
	// of Share).
	Factor float64
	// Waiting and Running are the catch-up units waiting and running now;
	// Live is the live work running now, and LastLive when live work last
	// began or ended.
	Waiting, Running, Live int
	LastLive               time.Time
}

// Scheduler hands out turns to catch-up work. Safe for concurrent use.
type Scheduler struct {
	now func() time.Time
	mu  struct {
		sync.Mutex
		core  core
		timer *time.Timer // wakes waiters when the budget or a deferral allows
		at    time.Time   // when timer fires (zero: not armed)
	}
}

// New returns a scheduler.
func New(cfg Config, now func() time.Time) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if now == nil {
		now = time.Now
	}
	s := &Scheduler{now: now}
	s.mu.core = newCore(cfg, now())
	return s, nil
}

// Turn is one catch-up unit's permission to run. The caller does the work
// on the goroutine that received the turn, then calls End.
type Turn struct {
	s        *Scheduler
	w        *waiter
	cpu      cpuClock
	ended    bool
	released bool
}

// CatchUp waits for a turn to run one unit of catch-up work, or for ctx to
// end. The unit holds a slot until Release or End, and is charged, at End,
// the processor time its goroutine used.
func (s *Scheduler) CatchUp(ctx context.Context) (*Turn, error) {
	w := &waiter{ready: make(chan struct{})}
	s.mu.Lock()
	s.mu.core.ask(w, s.now())
	s.dispatchLocked()
	s.mu.Unlock()
	select {
	case <-w.ready:
	case <-ctx.Done():
		s.mu.Lock()
		granted := s.mu.core.cancel(w)
		if granted {
			// The turn came as ctx ended: give it back unused.
			s.mu.core.release(w, 0, s.now())
			s.dispatchLocked()
		}
		s.mu.Unlock()
		return nil, ctx.Err()
	}
	t := &Turn{s: s, w: w}
	t.cpu.start()
	return t, nil
}

// Release frees the unit's slot before the unit ends: what is left of the
// unit (sending what it read) may block on a slow client, which must not
// keep other catch-up work from running. Its processor time is still
// charged at End.
func (t *Turn) Release() {
	if t.released || t.ended {
		return
	}
	t.released = true
	t.s.mu.Lock()
	t.s.mu.core.free(t.w)
	t.s.dispatchLocked()
	t.s.mu.Unlock()
}

// End charges the unit the processor time it used, frees its slot if
// Release did not, and yields the processor so that goroutines queued
// behind the unit run before the next one.
func (t *Turn) End() {
	if t.ended {
		return
	}
	t.ended = true
	used := t.cpu.stop()
	t.s.mu.Lock()
	t.s.mu.core.release(t.w, used, t.s.now())
	t.s.dispatchLocked()
	t.s.mu.Unlock()
	runtime.Gosched()
}

// Live marks live work as running until the returned func is called. It
// never waits. While live work runs, catch-up units do not start (for up to
// MaxDefer each).
func (s *Scheduler) Live() (done func()) {
	s.mu.Lock()
	s.mu.core.beginLive(s.now())
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.mu.core.endLive(s.now())
			s.dispatchLocked()
			s.mu.Unlock()
		})
	}
}

// Stats returns the counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.core.stats()
}

// dispatchLocked lets the core grant what it can now and arms the timer
// for the next moment it could grant more.
func (s *Scheduler) dispatchLocked() {
	now := s.now()
	granted, wake := s.mu.core.grant(now)
	for _, w := range granted {
		close(w.ready)
	}
	if wake.IsZero() || (!s.mu.at.IsZero() && !wake.Before(s.mu.at)) {
		return
	}
	if s.mu.timer != nil {
		s.mu.timer.Stop()
	}
	s.mu.at = wake
	s.mu.timer = time.AfterFunc(max(wake.Sub(now), 0), func() {
		s.mu.Lock()
		s.mu.at = time.Time{}
		s.dispatchLocked()
		s.mu.Unlock()
	})
}
