//go:build !linux

package sched

import "time"

// cpuClock measures a unit's wall time where no per-thread CPU clock is
// available: a unit blocked on a slow client is charged as if it ran.
type cpuClock struct {
	wall0   time.Time
	started bool
}

func (c *cpuClock) start() { c.wall0, c.started = time.Now(), true }

func (c *cpuClock) stop() time.Duration {
	if !c.started {
		return 0
	}
	c.started = false
	return time.Since(c.wall0)
}
