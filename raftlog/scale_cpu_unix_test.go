//go:build unix

package raftlog

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used (user and system), which
// a busy machine disturbs less than the wall clock.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
