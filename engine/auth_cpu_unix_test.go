//go:build unix

package engine_test

import "syscall"

// cpuTime is the CPU time (user and system) the process used so far, in
// nanoseconds: server and client both run in it, so per record it is what
// a record costs whatever else the machine runs, which wall-clock rates on
// a shared machine are not.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
