package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Source says where the cgroup files are.
type Source struct {
	// Root is where the cgroup file systems are mounted: /sys/fs/cgroup
	// on Linux.
	Root string
	// Self is the process's cgroup membership file, /proc/self/cgroup
	// (lines "ID:CONTROLLERS:PATH"). Empty, or a file that cannot be
	// read, puts the process in the root cgroup: only Root's own limit is
	// read.
	Self string
}

// Default is the Source of the running system.
func Default() Source { return Source{Root: "/sys/fs/cgroup", Self: "/proc/self/cgroup"} }

// Limit is a memory limit found by Read.
type Limit struct {
	// Bytes is the limit; 0 means no limit.
	Bytes int64
	// File is the file the limit was read from ("" when none).
	File string
	// Version is the cgroup version read: 1 or 2; 0 when Root holds no
	// cgroup file system.
	Version int
}

// unlimitedV1 is where cgroup v1 numbers stop meaning a limit: the kernel
// reports "no limit" as the largest page-aligned int64 (9223372036854771712
// with 4 KiB pages), and no machine has 2^62 bytes.
const unlimitedV1 = 1 << 62

// Read returns the smallest memory limit on the process's cgroup and its
// ancestors. A missing file is no limit; a file that exists but holds no
// number (nor "max") is an error naming it.
func (s Source) Read() (Limit, error) {
	if _, err := os.Stat(filepath.Join(s.Root, "cgroup.controllers")); err == nil {
		return s.smallest(2, s.Root, s.cgroupPath(func(id, _ string) bool { return id == "0" }), "memory.max")
	}
	v1 := filepath.Join(s.Root, "memory")
	if fi, err := os.Stat(v1); err != nil || !fi.IsDir() {
		return Limit{}, nil // no cgroup file system: no limit
	}
	rel := s.cgroupPath(func(_, controllers string) bool {
		for _, c := range strings.Split(controllers, ",") {
			if c == "memory" {
				return true
			}
		}
		return false
	})
	return s.smallest(1, v1, rel, "memory.limit_in_bytes")
}

// cgroupPath returns the path, in its hierarchy, of the process's cgroup
// on the line of Self that match accepts; "/" when there is none.
func (s Source) cgroupPath(match func(id, controllers string) bool) string {
	if s.Self == "" {
		return "/"
	}
	b, err := os.ReadFile(s.Self)
	if err != nil {
		return "/"
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if ok && match(id, controllers) {
			return path.Clean("/" + p)
		}
	}
	return "/"
}

// smallest reads name in the directory of rel under mount and in each of
// its ancestors up to mount, and returns the smallest limit among them.
func (s Source) smallest(version int, mount, rel, name string) (Limit, error) {
	best := Limit{Version: version}
	for p := rel; ; p = path.Dir(p) {
		file := filepath.Join(mount, filepath.FromSlash(p), name)
		n, err := readLimit(file, version)
		if err != nil {
			return Limit{}, err
		}
		if n > 0 && (best.Bytes == 0 || n < best.Bytes) {
			best.Bytes, best.File = n, file
		}
		if p == "/" {
			return best, nil
		}
	}
}

// readLimit reads one limit file: 0 when it is missing or says there is
// no limit.
func readLimit(file string, version int) (int64, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("memlimit: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if version == 2 && v == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		if errors.Is(err, strconv.ErrRange) && version == 1 {
			return 0, nil // beyond int64: surely no limit
		}
		return 0, fmt.Errorf("memlimit: %s holds %q, not a number of bytes", file, v)
	}
	if version == 1 && n >= unlimitedV1 {
		return 0, nil
	}
	return n, nil
}
