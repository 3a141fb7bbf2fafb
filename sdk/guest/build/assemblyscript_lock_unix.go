//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package build

import (
	"os"
	"syscall"
)

// ascLock takes an exclusive flock on path (created if needed), so that
// test processes building the same AssemblyScript project take turns. The
// lock goes away with the process if it dies.
func ascLock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
