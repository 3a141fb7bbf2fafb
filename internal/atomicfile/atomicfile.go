// Package atomicfile writes a file so that a crash leaves either the old
// file or the whole new one: a temporary file beside it (named with a
// leading dot), synced, renamed into place, and the directory synced.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm, atomically and durably.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteInSteps(path, data, perm, 0)
}

// WriteInSteps is Write that syncs the file after every step bytes (0:
// once, at the end). A large file then never has more than step bytes
// waiting to reach the disk, so the other writers' syncs on the same disk
// (a raft log's) wait behind one step, not the whole file.
func WriteInSteps(path string, data []byte, perm os.FileMode, step int) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if step <= 0 {
		step = len(data)
	}
	for rest := data; err == nil; {
		n := min(step, len(rest))
		if _, err = f.Write(rest[:n]); err == nil {
			err = f.Sync()
		}
		if rest = rest[n:]; len(rest) == 0 {
			break
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, so that the names created or removed in it
// survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
