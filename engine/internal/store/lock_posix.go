//go:build linux || darwin || freebsd

package store

import (
	"io"
	"os"
	"syscall"
)

// lockHolder returns the pid of the process holding a write lock on the
// file at path (what Pebble takes on its LOCK file), or 0.
//
// It must not run while this process holds a record lock on the file:
// closing any descriptor of a file drops the process's record locks on it.
// Open calls it only after Pebble failed to take the lock.
func lockHolder(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil || lk.Type == syscall.F_UNLCK {
		return 0
	}
	return int(lk.Pid)
}
