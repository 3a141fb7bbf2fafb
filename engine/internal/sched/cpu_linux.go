package sched

import (
	"runtime"
	"syscall"
	"time"
)

// cpuClock measures the processor time one goroutine uses between start
// and stop: the goroutine is locked to its thread meanwhile, and the
// thread's own CPU clock (RUSAGE_THREAD) is read at both ends. Time the
// goroutine spends blocked (a send waiting for a slow client) is not
// counted.
type cpuClock struct {
	t0     time.Duration
	wall0  time.Time
	locked bool
}

const rusageThread = 1 // RUSAGE_THREAD

func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

func (c *cpuClock) start() {
	runtime.LockOSThread()
	c.locked = true
	c.wall0 = time.Now()
	if t, ok := threadCPU(); ok {
		c.t0 = t
	} else {
		c.t0 = -1
	}
}

func (c *cpuClock) stop() time.Duration {
	if !c.locked {
		return 0
	}
	c.locked = false
	defer runtime.UnlockOSThread()
	if t, ok := threadCPU(); ok && c.t0 >= 0 {
		return max(t-c.t0, 0)
	}
	return time.Since(c.wall0)
}
