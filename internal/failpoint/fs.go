//go:build failpoints

package failpoint

import (
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS returns fs wrapped with the storage failpoints (a *FaultFS); fs
// already wrapped is returned as it is. While no storage failpoint is set
// and nothing is held for PowerLoss, every call goes straight through.
func FS(fs vfs.FS) vfs.FS {
	if _, ok := fs.(*FaultFS); ok {
		return fs
	}
	return NewFaultFS(fs)
}

// FaultFS is a vfs.FS that applies the storage failpoints (FsyncEIO,
// ENOSPC, FsyncDelay, TornWrite, BitFlip, PowerLoss) to the filesystem it
// wraps. It exists only in a tagged build. Safe for concurrent use, as
// Pebble uses a filesystem; each file it returns is used like the file it
// wraps (writes from one goroutine at a time, reads concurrently).
//
// PowerLoss holds the data written to each file in memory until the file
// is synced (through any handle): reads, Stat and sizes see it, the
// wrapped filesystem does not. What is held belongs to the file, not its
// name, as data belongs to an inode: a rename or a link keeps it, a
// truncating create or the removal of the last name drops it.
type FaultFS struct {
	vfs.FS
	// crash ends the process after a torn write; tests replace it.
	crash func()
	// afterWrite, if set, is called after each write (tests).
	afterWrite func(name string)

	mu sync.Mutex
	// files maps the names of the files opened through fs to their held
	// data.
	files map[string]*heldFile
	// nheld counts the files holding data, read without mu: files skip
	// the overlay while it is 0.
	nheld atomic.Int64
}

// heldFile is one file's data held in memory (PowerLoss), under
// FaultFS.mu.
type heldFile struct {
	writes []heldWrite // in write order, later over earlier
	names  int         // names that refer to it
}

// heldWrite is a write held in memory. Its data is never changed below
// len(data) once held (a write that continues it appends).
type heldWrite struct {
	off  int64
	data []byte
}

func (w heldWrite) end() int64 { return w.off + int64(len(w.data)) }

// NewFaultFS wraps fs (see FS).
func NewFaultFS(fs vfs.FS) *FaultFS {
	return &FaultFS{FS: fs, crash: killSelf, files: map[string]*heldFile{}}
}

// killSelf ends the process as kill -9 does: no deferred calls, no
// flushing, nothing more reaches the disk.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
		time.Sleep(time.Minute) // the signal is on its way
	}
	os.Exit(137)
}

// sleep waits out FsyncDelay (tests replace it).
var sleep = time.Sleep

// storageActive reports whether any failpoint is set (the storage ones are
// looked up after it).
func storageActive() bool { return registry.active.Load() != nil }

// Unwrap implements vfs.FS.
func (fs *FaultFS) Unwrap() vfs.FS { return fs.FS }

// Create implements vfs.FS: a new (or truncated) file holds nothing.
func (fs *FaultFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	fs.unlinkLocked(name)
	h := fs.linkLocked(name, &heldFile{})
	fs.mu.Unlock()
	return fs.wrap(f, name, h, true), nil
}

// Open implements vfs.FS.
func (fs *FaultFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f, name, fs.fileOf(name), false), nil
}

// OpenReadWrite implements vfs.FS.
func (fs *FaultFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f, name, fs.fileOf(name), true), nil
}

// OpenDir implements vfs.FS: a directory's Sync fails or waits like a
// file's.
func (fs *FaultFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f, name, &heldFile{}, false), nil
}

// ReuseForWrite implements vfs.FS (a recycled WAL): a rename, then an
// open for writing.
func (fs *FaultFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	fs.renamed(oldname, newname)
	return fs.wrap(f, newname, fs.fileOf(newname), true), nil
}

// Rename implements vfs.FS.
func (fs *FaultFS) Rename(oldname, newname string) error {
	if err := fs.FS.Rename(oldname, newname); err != nil {
		return err
	}
	fs.renamed(oldname, newname)
	return nil
}

func (fs *FaultFS) renamed(oldname, newname string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	h := fs.files[oldname]
	if h != nil {
		h.names++ // kept across the unlinks
	}
	fs.unlinkLocked(oldname)
	fs.unlinkLocked(newname)
	if h != nil {
		fs.files[newname] = h
	}
}

// Link implements vfs.FS: both names refer to the same held data.
func (fs *FaultFS) Link(oldname, newname string) error {
	if err := fs.FS.Link(oldname, newname); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if h := fs.files[oldname]; h != nil {
		fs.linkLocked(newname, h)
	}
	return nil
}

// Remove implements vfs.FS.
func (fs *FaultFS) Remove(name string) error {
	if err := fs.FS.Remove(name); err != nil {
		return err
	}
	fs.mu.Lock()
	fs.unlinkLocked(name)
	fs.mu.Unlock()
	return nil
}

// RemoveAll implements vfs.FS.
func (fs *FaultFS) RemoveAll(dir string) error {
	if err := fs.FS.RemoveAll(dir); err != nil {
		return err
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for n := range fs.files {
		if n == dir || strings.HasPrefix(n, prefix) {
			fs.unlinkLocked(n)
		}
	}
	return nil
}

// Stat implements vfs.FS: the size counts held data.
func (fs *FaultFS) Stat(name string) (vfs.FileInfo, error) {
	fi, err := fs.FS.Stat(name)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	h := fs.files[name]
	fs.mu.Unlock()
	return fs.statOverlay(h, fi), nil
}

// filled is set when a write failed under ENOSPCWrites: from then on the
// disk reports no free space while the failpoint is on, as a full disk
// does once a write found it full.
var filled atomic.Bool

// GetDiskUsage implements vfs.FS: with ENOSPC (or ENOSPCWrites once a
// write failed) nothing is free.
func (fs *FaultFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	u, err := fs.FS.GetDiskUsage(path)
	if err == nil && (Enabled(ENOSPC) || Enabled(ENOSPCWrites) && filled.Load()) {
		u.UsedBytes += u.AvailBytes
		u.AvailBytes = 0
	}
	return u, err
}

// Unsynced returns how many bytes PowerLoss holds in memory.
func (fs *FaultFS) Unsynced() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var n int64
	seen := map[*heldFile]bool{}
	for _, h := range fs.files {
		if !seen[h] {
			seen[h] = true
			for _, w := range h.writes {
				n += int64(len(w.data))
			}
		}
	}
	return n
}

// fileOf returns the file name refers to, registering it if new.
func (fs *FaultFS) fileOf(name string) *heldFile {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if h := fs.files[name]; h != nil {
		return h
	}
	return fs.linkLocked(name, &heldFile{})
}

func (fs *FaultFS) linkLocked(name string, h *heldFile) *heldFile {
	fs.files[name] = h
	h.names++
	return h
}

// unlinkLocked forgets a name; the file's held data goes with its last
// name (handles still open on it write to a file nobody can open).
func (fs *FaultFS) unlinkLocked(name string) {
	h := fs.files[name]
	if h == nil {
		return
	}
	delete(fs.files, name)
	if h.names--; h.names == 0 && len(h.writes) > 0 {
		h.writes = nil
		fs.nheld.Add(-1)
	}
}

// hold keeps a write of p at off to h in memory.
func (fs *FaultFS) hold(h *heldFile, off int64, p []byte) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n := len(h.writes); n > 0 && h.writes[n-1].end() == off {
		h.writes[n-1].data = append(h.writes[n-1].data, p...)
		return
	}
	if len(h.writes) == 0 {
		if h.names == 0 {
			return // removed: a power cut loses it anyway
		}
		fs.nheld.Add(1)
	}
	h.writes = append(h.writes, heldWrite{off: off, data: slices.Clone(p)})
}

// heldOf returns a snapshot of what h holds.
func (fs *FaultFS) heldOf(h *heldFile) []heldWrite {
	if fs.nheld.Load() == 0 {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(h.writes)
}

// release writes what h holds to f, in order, and forgets it. The writes
// happen outside the lock; readers meanwhile see the same bytes in both
// places.
func (fs *FaultFS) release(h *heldFile, f vfs.File) error {
	held := fs.heldOf(h)
	for _, w := range held {
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			return err
		}
	}
	if len(held) == 0 {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	cur := h.writes
	if len(cur) < len(held) {
		return nil // dropped meanwhile (removed)
	}
	// The last written entry may have grown since the snapshot (the same
	// writer appended): keep its new tail.
	last, now := held[len(held)-1], cur[len(held)-1]
	rest := slices.Clone(cur[len(held):])
	if len(now.data) > len(last.data) {
		rest = append([]heldWrite{{off: last.end(), data: slices.Clone(now.data[len(last.data):])}}, rest...)
	}
	h.writes = rest
	if len(rest) == 0 {
		fs.nheld.Add(-1)
	}
	return nil
}

func (fs *FaultFS) statOverlay(h *heldFile, fi vfs.FileInfo) vfs.FileInfo {
	if h == nil {
		return fi
	}
	size := fi.Size()
	for _, w := range fs.heldOf(h) {
		size = max(size, w.end())
	}
	if size == fi.Size() {
		return fi
	}
	return sizedInfo{FileInfo: fi, size: size}
}

// sizedInfo is a FileInfo with the size held data gives the file.
type sizedInfo struct {
	vfs.FileInfo
	size int64
}

func (i sizedInfo) Size() int64 { return i.size }

func (fs *FaultFS) wrap(f vfs.File, name string, h *heldFile, writable bool) vfs.File {
	base := fs.FS.PathBase(name)
	return &faultFile{
		File: f, fs: fs, held: h, name: name, writable: writable,
		wal: strings.HasSuffix(base, ".log"), table: strings.HasSuffix(base, ".sst"),
	}
}

// faultFile is a file of a FaultFS.
type faultFile struct {
	vfs.File
	fs              *FaultFS
	held            *heldFile
	name            string
	writable        bool
	wal, table      bool
	pos             int64 // where Write writes next
	rpos            int64 // where Read reads next
	positional      bool  // Write held data: write at pos, the file's offset is stale
	positionalReads bool  // Read saw held data: read at rpos
}

func (f *faultFile) pathErr(op string, err error) error {
	return &os.PathError{Op: op, Path: f.name, Err: err}
}

// Write implements io.Writer.
func (f *faultFile) Write(p []byte) (int, error) {
	if !storageActive() && f.fs.nheld.Load() == 0 && !f.positional {
		n, err := f.File.Write(p)
		f.pos += int64(n)
		f.wrote()
		return n, err
	}
	f.positional = true
	n, err := f.write(p, f.pos)
	f.pos += int64(n)
	return n, err
}

// WriteAt implements io.WriterAt.
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if !storageActive() && f.fs.nheld.Load() == 0 {
		defer f.wrote()
		return f.File.WriteAt(p, off)
	}
	return f.write(p, off)
}

func (f *faultFile) write(p []byte, off int64) (int, error) {
	if Enabled(ENOSPC) || Enabled(ENOSPCWrites) {
		if Enabled(ENOSPCWrites) {
			filled.Store(true)
		}
		return 0, f.pathErr("write", syscall.ENOSPC)
	}
	if f.wal && len(p) > 1 && take(TornWrite) {
		n, _ := f.write(p[:len(p)/2], off)
		f.fs.crash()
		return n, f.pathErr("write", io.ErrShortWrite)
	}
	defer f.wrote()
	if Enabled(PowerLoss) {
		f.fs.hold(f.held, off, p)
		return len(p), nil
	}
	if err := f.fs.release(f.held, f.File); err != nil {
		return 0, err
	}
	if f.table && len(p) > 0 && take(BitFlip) {
		q := slices.Clone(p)
		q[len(q)/2] ^= 0x10
		n, err := f.File.WriteAt(q, off)
		return n, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) wrote() {
	if f.fs.afterWrite != nil {
		f.fs.afterWrite(f.name)
	}
}

// ReadAt implements io.ReaderAt: held data overlays the file's.
func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	h := f.fs.heldOf(f.held)
	if len(h) == 0 {
		return f.File.ReadAt(p, off)
	}
	n, err := f.File.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return n, err
	}
	end := off + int64(n) // of what was read
	for _, w := range h {
		lo, hi := max(w.off, off), min(w.end(), off+int64(len(p)))
		if lo >= hi {
			continue
		}
		if lo > end {
			clear(p[end-off : lo-off]) // a hole: zeros
		}
		copy(p[lo-off:hi-off], w.data[lo-w.off:hi-w.off])
		end = max(end, hi)
	}
	n = int(end - off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read implements io.Reader.
func (f *faultFile) Read(p []byte) (int, error) {
	if !f.positionalReads && f.fs.nheld.Load() == 0 {
		n, err := f.File.Read(p)
		f.rpos += int64(n)
		return n, err
	}
	f.positionalReads = true
	n, err := f.ReadAt(p, f.rpos)
	f.rpos += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}

// Stat implements vfs.File: the size counts held data.
func (f *faultFile) Stat() (vfs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return f.fs.statOverlay(f.held, fi), nil
}

// syncFault applies FsyncEIO and FsyncDelay, and writes out what the file
// holds: after it, a sync of the file makes everything written durable.
func (f *faultFile) syncFault() error {
	if Enabled(FsyncEIO) {
		return f.pathErr("fsync", syscall.EIO)
	}
	if d, ok := duration(FsyncDelay); ok {
		sleep(d)
	}
	if f.writable {
		return f.fs.release(f.held, f.File)
	}
	return nil
}

// Sync implements vfs.File.
func (f *faultFile) Sync() error {
	if storageActive() || f.fs.nheld.Load() > 0 {
		if err := f.syncFault(); err != nil {
			return err
		}
	}
	return f.File.Sync()
}

// SyncData implements vfs.File.
func (f *faultFile) SyncData() error {
	if storageActive() || f.fs.nheld.Load() > 0 {
		if err := f.syncFault(); err != nil {
			return err
		}
	}
	return f.File.SyncData()
}

// SyncTo implements vfs.File. With data held it syncs everything (a full
// sync), which is allowed: a power cut may keep more than was synced.
func (f *faultFile) SyncTo(length int64) (fullSync bool, err error) {
	if storageActive() || f.fs.nheld.Load() > 0 {
		held := len(f.fs.heldOf(f.held)) > 0
		if err := f.syncFault(); err != nil {
			return false, err
		}
		if held {
			return true, f.File.Sync()
		}
	}
	return f.File.SyncTo(length)
}
