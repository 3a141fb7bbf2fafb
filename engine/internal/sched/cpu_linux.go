package sched

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// cpuClock measures the processor time one goroutine uses between start
// and stop: the goroutine is locked to its thread meanwhile, and the
// thread's own CPU clock (CLOCK_THREAD_CPUTIME_ID) is read at both ends.
// Time the goroutine spends blocked (a send waiting for a slow client) is
// not counted. (getrusage(RUSAGE_THREAD) is no substitute: it leaves out
// the running time slice, and undercounted 0.5 ms units tenfold.)
type cpuClock struct {
	t0     time.Duration
	wall0  time.Time
	locked bool
}

const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID

func threadCPU() (time.Duration, bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
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
