//go:build !unix

package engine

// descriptorLimit is 0 (unknown) where there is no RLIMIT_NOFILE.
func descriptorLimit() int { return 0 }
