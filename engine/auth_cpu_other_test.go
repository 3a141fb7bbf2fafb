//go:build !unix

package engine_test

// cpuTime is not measured here: cpu-ns/record reads 0.
func cpuTime() int64 { return 0 }
