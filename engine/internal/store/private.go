package store

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
)

// The data directory holds everything a node knows, the authentication
// state among it (the resume-token key and the token hashes sit in the
// WAL and the tables in plain text), so only the user the node runs as
// may read it: directories 0700, files 0600, whatever the process umask.
// Pebble creates its files 0666 and its directories 0755 less the umask,
// and takes no mode, so privateFS sets the mode after each creation, and
// fixModes repairs a directory an older version (or an operator's copy)
// left open, before Pebble opens it.
const (
	privateDirMode  os.FileMode = 0o700
	privateFileMode os.FileMode = 0o600
)

// privateFS is a vfs.FS whose new files are 0600 and new directories 0700.
// Over the operating system's filesystem (vfs.Root is vfs.Default) it
// sets the mode on the path after creating it; over any other filesystem
// (in-memory, crash-simulating) it changes nothing, as such files have no
// mode anyone could read them by. A file is open to others (if its
// directory lets them in) between its creation and the chmod; that is why
// fixModes closes the directory itself before Pebble creates anything.
type privateFS struct {
	vfs.FS
	os bool // the files are the operating system's
}

func newPrivateFS(base vfs.FS) privateFS {
	return privateFS{FS: base, os: vfs.Root(base) == vfs.Default}
}

// Unwrap implements vfs.FS.
func (p privateFS) Unwrap() vfs.FS { return p.FS }

// Create implements vfs.FS.
func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return p.private(name)(p.FS.Create(name, category))
}

// OpenReadWrite implements vfs.FS (it creates the file if missing).
func (p privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return p.private(name)(p.FS.OpenReadWrite(name, category, opts...))
}

// ReuseForWrite implements vfs.FS (a recycled WAL, which may instead be
// created afresh).
func (p privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return p.private(newname)(p.FS.ReuseForWrite(oldname, newname, category))
}

// Lock implements vfs.FS (it creates the lock file if missing).
func (p privateFS) Lock(name string) (io.Closer, error) {
	c, err := p.FS.Lock(name)
	if err == nil && p.os {
		if err = os.Chmod(name, privateFileMode); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, err
}

// MkdirAll implements vfs.FS: the directory is 0700 whatever perm asks.
// Parents it creates are 0700 less the umask.
func (p privateFS) MkdirAll(dir string, _ os.FileMode) error {
	if err := p.FS.MkdirAll(dir, privateDirMode); err != nil {
		return err
	}
	if p.os {
		return os.Chmod(dir, privateDirMode)
	}
	return nil
}

// private returns a function that sets the mode of the file just opened
// at name, closing it on failure.
func (p privateFS) private(name string) func(vfs.File, error) (vfs.File, error) {
	return func(f vfs.File, err error) (vfs.File, error) {
		if err != nil || !p.os {
			return f, err
		}
		if err := os.Chmod(name, privateFileMode); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
}

// fixModes makes dir and everything in it private to the owner: a
// directory readable, writable or searchable by group or others becomes
// 0700, such a file 0600. It does not follow symbolic links inside dir
// (dir itself may be one). It returns how many paths it changed and the
// paths it could not change (one error each, joined); a dir that does not
// exist yet is not an error.
func fixModes(dir string) (fixed int, err error) {
	root, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var errs []error
	walkErr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, err)
			return nil // a directory that cannot be read is skipped
		}
		if !d.Type().IsDir() && !d.Type().IsRegular() {
			return nil // a link, a socket: its mode is not the data's
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile (a temporary file)
		}
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if info.Mode().Perm()&0o077 == 0 {
			return nil
		}
		mode := privateFileMode
		if d.IsDir() {
			mode = privateDirMode
		}
		if err := os.Chmod(path, mode); err != nil {
			errs = append(errs, err)
			return nil
		}
		fixed++
		return nil
	})
	return fixed, errors.Join(append(errs, walkErr)...)
}

// fixOpenDir runs fixModes on dir and logs what it did. A path it cannot
// change is logged, not fatal: refusing to start would stop the upgrade of
// every node whose directory an older version created 0755, and a path
// the node's user cannot chmod is one it does not own.
//
// On Windows modes do not say who may read a file (ACLs do), so it does
// nothing there.
func fixOpenDir(dir string, log hclog.Logger) {
	if runtime.GOOS == "windows" {
		return
	}
	fixed, err := fixModes(dir)
	if fixed > 0 {
		log.Warn("data directory was open to other users: made it private (directories 0700, files 0600)",
			"dir", dir, "fixed", fixed)
	}
	if err != nil {
		log.Warn("data directory: some paths could not be made private", "dir", dir, "error", err)
	}
}
