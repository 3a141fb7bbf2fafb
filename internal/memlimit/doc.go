// Package memlimit reads the memory limit of the container a process runs
// in: the limit of its cgroup, which the kernel enforces by killing the
// process (OOM) once its memory passes it. Go does not read it: without
// GOMEMLIMIT the garbage collector lets the heap grow to twice its live
// size whatever the container allows, and caches sized for a large
// machine fill a small container.
//
// Usage:
//
//  1. Make a Source: Default() reads the real system (/sys/fs/cgroup and
//     /proc/self/cgroup); a test makes one on a temporary directory that
//     holds files in the kernel's format.
//  2. Call Source.Read. A Limit with Bytes 0 means none was found: no
//     cgroup file system, a cgroup without a limit ("max" in cgroup v2, a
//     number near 2^63 in v1), or a process outside any container.
//  3. Decide what to do with it (rewind serve sets the Go memory limit to
//     90% of it and caps its caches at an eighth each); this package only
//     reads.
//
// Both cgroup versions are read. Version 2 (one unified hierarchy, Root
// holds cgroup.controllers) keeps the limit in memory.max; version 1 keeps
// it in memory/…/memory.limit_in_bytes. A limit set on any ancestor of the
// process's cgroup applies to it too, so the smallest limit from the
// process's cgroup up to the root is the one returned. A cgroup path that
// does not exist under Root (the membership file names a path of the
// host's hierarchy, the mount shows the container's) contributes only the
// ancestors that do exist, down to Root itself.
//
// Read is safe to call from any goroutine; it reads files and keeps no
// state.
package memlimit
