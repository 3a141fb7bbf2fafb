package sched

import "time"

// waiter is one catch-up unit, from the moment it asks for a turn until it
// ends.
type waiter struct {
	ready chan struct{} // closed when granted (nil in core tests)
	asked time.Time
	// granted is set once the unit got its turn; running while it holds a
	// slot.
	granted, running bool
	// deferred is set once live work held the unit back (counted once).
	deferred bool
}

// core holds the scheduler's rules. It owns no goroutine and reads no
// clock: every method takes the current time, so tests replay exact
// sequences of decisions.
type core struct {
	cfg Config
	// factor scales the budget's refill (rate); 1 unless the governor
	// lowered it. Invariant: minFactor <= factor <= 1.
	factor float64
	// budget is the processor time catch-up work may still use; it may go
	// below zero (a unit is charged after it ran), and is refilled up to
	// Burst as time passes. Invariant: budget <= Burst.
	budget time.Duration
	last   time.Time // when budget was last refilled
	queue  []*waiter // waiting units, in the order they asked
	// running counts units holding a slot; live the live work running,
	// and lastLive when live work last began or ended.
	running, live int
	lastLive      time.Time
	st            Stats
}

func newCore(cfg Config, now time.Time) core {
	return core{cfg: cfg, factor: 1, budget: cfg.Burst, last: now, lastLive: now}
}

// rate is the budget's refill, in processor time per unit of wall time:
// Share × Cores, scaled by the governor's factor.
func (c *core) rate() float64 { return c.cfg.Share * float64(c.cfg.Cores) * c.factor }

func (c *core) refill(now time.Time) {
	if el := now.Sub(c.last); el > 0 {
		c.budget = min(c.cfg.Burst, c.budget+time.Duration(float64(el)*c.rate()))
		c.last = now
	}
}

// ask queues w.
func (c *core) ask(w *waiter, now time.Time) {
	w.asked = now
	c.queue = append(c.queue, w)
}

// cancel withdraws w; it reports whether w had been granted already (the
// caller must then release it).
func (c *core) cancel(w *waiter) bool {
	for i, q := range c.queue {
		if q == w {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return false
		}
	}
	return w.granted
}

// grant gives turns to waiters in order while the rules allow, and returns
// them with the earliest time at which waiters still queued could be
// granted because of the passing of time alone (zero if only a release or
// the end of live work can help).
func (c *core) grant(now time.Time) (granted []*waiter, wake time.Time) {
	c.refill(now)
	for len(c.queue) > 0 {
		w := c.queue[0]
		if c.running >= c.cfg.Slots {
			return granted, time.Time{}
		}
		if c.budget <= 0 && !c.quiet(now) {
			need := float64(-c.budget+1) / c.rate()
			wake := now.Add(time.Duration(need) + 1)
			if quietAt := c.lastLive.Add(c.cfg.IdleAfter); c.live == 0 && quietAt.Before(wake) {
				wake = quietAt // the budget stops applying then
			}
			return granted, wake
		}
		if c.live > 0 {
			until := w.asked.Add(c.cfg.MaxDefer)
			if now.Before(until) {
				if !w.deferred {
					w.deferred = true
					c.st.Deferred++
				}
				return granted, until
			}
		}
		c.queue = c.queue[1:]
		w.granted, w.running = true, true
		c.running++
		c.st.Units++
		c.st.Waited += now.Sub(w.asked)
		granted = append(granted, w)
	}
	return granted, time.Time{}
}

// free gives back w's slot (its unit goes on without one).
func (c *core) free(w *waiter) {
	if w.running {
		w.running = false
		c.running--
	}
}

// release ends w's unit, charging it used processor time.
func (c *core) release(w *waiter, used time.Duration, now time.Time) {
	c.free(w)
	c.refill(now)
	if !c.quiet(now) {
		c.budget -= used
	}
	c.st.CPU += used
}

func (c *core) beginLive(now time.Time) {
	c.live++
	c.lastLive = now
}

func (c *core) endLive(now time.Time) {
	c.live--
	c.lastLive = now
}

// quiet reports whether no live work has run for IdleAfter: catch-up work
// then runs without a budget (only Slots bound it), because there is
// nothing to protect, and is not charged.
func (c *core) quiet(now time.Time) bool {
	return c.live == 0 && now.Sub(c.lastLive) >= c.cfg.IdleAfter
}

func (c *core) stats() Stats {
	s := c.st
	s.Factor = c.factor
	s.Waiting, s.Running, s.Live, s.LastLive = len(c.queue), c.running, c.live, c.lastLive
	return s
}

// setFactor scales the budget's refill rate by f, kept in [minFactor, 1]
// (the governor lowers it while live work is delayed). What accrued at the
// old rate is refilled first.
func (c *core) setFactor(f float64, now time.Time) {
	c.refill(now)
	c.factor = min(max(f, minFactor), 1)
}

// minFactor keeps catch-up work moving however busy the node is.
const minFactor = 1.0 / 64
