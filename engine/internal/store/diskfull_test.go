package store

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// fullFS fails every write with ENOSPC while full is set, as a full disk
// does (creating a file, an inode, still works).
type fullFS struct {
	vfs.FS
	full *atomic.Bool
}

func (f fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return fullFile{file, f.full}, err
}

func (f fullFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, o...)
	return fullFile{file, f.full}, err
}

func (f fullFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return fullFile{file, f.full}, err
}

type fullFile struct {
	vfs.File
	full *atomic.Bool
}

func (f fullFile) Write(p []byte) (int, error) {
	if f.full.Load() {
		return 0, &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func (f fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.full.Load() {
		return 0, &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(p, off)
}

// A store opened on a full disk must flush the WAL it replays, which
// Pebble retries for ever while its Open waits (issue 27: a node started
// on a full disk never listened and logged ENOSPC 46 times a second).
// Open gives up at the first ENOSPC with ErrDiskFull instead.
func TestOpenOnAFullDiskFailsWithErrDiskFull(t *testing.T) {
	var full atomic.Bool
	fs := fullFS{FS: vfs.NewMem(), full: &full}
	db, err := Open(Config{Dir: "d", FS: fs, MemTableBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("x"), make([]byte, 4096), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	_, err = Open(Config{Dir: "d", FS: fs, MemTableBytes: 1 << 20})
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("open on a full disk: %v, want ErrDiskFull", err)
	}
	t.Log(err)
	// A new store on a full disk too.
	if _, err := Open(Config{Dir: "fresh", FS: fs, MemTableBytes: 1 << 20}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("new store on a full disk: %v, want ErrDiskFull", err)
	}
	// Space comes back: the abandoned open finishes and closes its store
	// (else it would hold the lock), so a new Open succeeds.
	full.Store(false)
	deadline := time.Now().Add(time.Minute)
	for {
		db, err = Open(Config{Dir: "d", FS: fs, MemTableBytes: 1 << 20})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("open once space is back: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	db.Close()
}

// After Open, ENOSPC goes to Config.OnDiskFull, and the write that met it
// is retried once when it returns: a callback that waits for space turns a
// full disk into a stall, not a failed store.
func TestOnDiskFullStallsAWriteUntilSpaceIsBack(t *testing.T) {
	var full atomic.Bool
	called := make(chan struct{})
	release := make(chan struct{})
	fs := fullFS{FS: vfs.NewMem(), full: &full}
	db, err := Open(Config{Dir: "d", FS: fs, OnDiskFull: func() {
		close(called)
		<-release
		full.Store(false)
	}, OnFatal: func(err error) { t.Errorf("store failed: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	full.Store(true)
	done := make(chan error, 1)
	go func() { done <- db.Set([]byte("k"), []byte("v"), pebble.Sync) }()
	<-called
	select {
	case err := <-done:
		t.Fatalf("the write returned while the disk was full: %v", err)
	default:
	}
	if _, closer, err := db.Get([]byte("k")); err == nil {
		closer.Close() // a read while the write waits: it may see it or not, but it answers
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("write after space came back: %v", err)
	}
}
