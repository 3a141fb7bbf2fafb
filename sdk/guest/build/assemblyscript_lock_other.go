//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package build

// ascLock is a no-op where flock is not available: builds are still
// serialized within a process, but not across processes.
func ascLock(path string) (unlock func(), err error) {
	return func() {}, nil
}
