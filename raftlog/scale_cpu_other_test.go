//go:build !unix

package raftlog

import "time"

var start = time.Now()

// processCPU falls back to the wall clock where getrusage is missing.
func processCPU() time.Duration { return time.Since(start) }
