//go:build unix

package engine

import "syscall"

// descriptorLimit is the process's open-file limit (Go raises the soft
// limit to the hard one at start), or 0 if unknown.
func descriptorLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
