// Package store opens the node's one Pebble database with the options Rewind
// depends on, and checks that what it opens is a Rewind store it can serve.
package store

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/internal/failpoint"
)

// FormatMajorVersion is the Pebble on-disk format Rewind writes. It is pinned
// so that upgrading the Pebble library never silently ratchets the format of
// existing data directories (a ratchet cannot be undone by a downgrade).
const FormatMajorVersion = pebble.FormatValueSeparation

// formatVersion is Rewind's own layout version, stored under keys.FormatKey.
// A store written by a newer layout is refused rather than misread.
const formatVersion = 1

// ErrIncompatible is returned for a data directory this build cannot serve.
var ErrIncompatible = errors.New("store: incompatible data directory")

// ErrLocked is returned (as a *LockedError) for a data directory that
// another process, or another store of this process, has open.
var ErrLocked = errors.New("store: data directory in use")

// LockedError says who holds the data directory Open was asked for. It is
// an ErrLocked.
type LockedError struct {
	Dir string
	// PID is the process holding the directory's lock, as the operating
	// system reports it; 0 when unknown (another filesystem, another
	// platform, or a process in another PID namespace).
	PID int
	// ThisProcess is set when the holder is a store this process opened.
	ThisProcess bool
}

func (e *LockedError) Error() string {
	switch {
	case e.ThisProcess:
		return fmt.Sprintf("store: data directory %s is in use: this process has it open already", e.Dir)
	case e.PID > 0:
		return fmt.Sprintf("store: data directory %s is in use by another process (pid %d), such as another rewind serve: stop it, or use another data directory", e.Dir, e.PID)
	}
	return fmt.Sprintf("store: data directory %s is in use by another process, such as another rewind serve: stop it, or use another data directory", e.Dir)
}

// Is makes a LockedError an ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Config configures Open. The zero value of each field selects its default.
type Config struct {
	// Dir is the data directory. Required.
	Dir string
	// FS is the filesystem; default: the OS. Tests pass vfs.NewMem or a
	// crashable filesystem.
	FS vfs.FS
	// CacheBytes sizes Pebble's block cache. Default 256 MiB.
	CacheBytes int64
	// MemTableBytes sizes each memtable. Default DefaultMemTableBytes. It
	// also sizes each WAL file on disk (WALBytes) and so the free space
	// the store needs (ReserveBytes).
	MemTableBytes uint64
	Logger        hclog.Logger
	// OnDiskFull, if set, is called when a write of the store meets
	// ENOSPC after Open returned (Pebble's vfs.OnDiskFull): every other
	// write of the store waits while it runs, and the write that met
	// ENOSPC is tried once more when it returns (failing again, it is
	// the fatal failure OnFatal reports). So an OnDiskFull that returns
	// once space is back turns a full disk into a stall of the store's
	// writes instead of a failed store; reads go on meanwhile. It is
	// called on the writing goroutine (the raft loop's, or Pebble's
	// flushes and compactions), once for all the writes that met ENOSPC
	// together. Unset, ENOSPC fails the write at once.
	OnDiskFull func()
	// OnFatal, if set, is called (once) with the error when Pebble meets
	// a failure it cannot go on from after Open returned: a MANIFEST
	// write or sync (a flush or compaction in the background), a failed
	// commit (WAL write or fsync), corruption. Pebble requires that its
	// fatal logger never return, so the goroutine that met the failure
	// then blocks for good and the store must not be used or closed
	// again: the owner stops serving and exits. Unset, such a failure
	// panics (the process dies unless the caller recovers), as during
	// Open, where it is returned as Open's error instead.
	OnFatal func(error)
}

// ErrFatal marks the error passed to Config.OnFatal, or returned by Open
// for a fatal failure while opening.
var ErrFatal = errors.New("store: fatal storage failure")

// ErrDiskFull is returned (wrapped) by Open when a write of the opening
// store meets ENOSPC: replaying the WAL flushes it to tables, which needs
// about as much free space as the WAL holds. Pebble would retry that
// flush for ever, so Open gives up at once; the caller should exit and be
// started again once there is space.
var ErrDiskFull = errors.New("store: disk full")

// DefaultMemTableBytes is Config.MemTableBytes' default.
const DefaultMemTableBytes = 64 << 20

// WALBytes returns the disk space one WAL file takes with memtables of
// memTableBytes (0: the default): Pebble preallocates 110 % of the
// memtable size for each WAL file as it creates it (fallocate, so the
// space is taken before anything is written: a WAL holding 3 MB of
// records takes 70.4 MiB with 64 MiB memtables), and keeps up to
// MemTableStopWritesThreshold+1 (5) used WAL files for reuse at that size.
// A preallocation that fails for lack of space is ignored; the writes
// then take the space as they go.
func WALBytes(memTableBytes uint64) int64 {
	if memTableBytes == 0 {
		memTableBytes = DefaultMemTableBytes
	}
	return int64(memTableBytes + memTableBytes/10)
}

// ReserveBytes returns the free space a store with memtables of
// memTableBytes (0: the default) should keep for its own background
// writes once it stops taking data: 2 × WALBytes + memTableBytes, 204.8
// MiB with the default 64 MiB memtables, and never under 64 MiB. That is
// room for the memtable being filled to be flushed to a table (at most
// its size) while the WAL after it is created and preallocated, and for
// one more WAL after that (raft's hard state, the metadata group and
// heartbeats' commits keep writing a little). The broker's free-disk
// guard (MinFreeBytes) defaults to it.
func ReserveBytes(memTableBytes uint64) int64 {
	if memTableBytes == 0 {
		memTableBytes = DefaultMemTableBytes
	}
	return max(64<<20, 2*WALBytes(memTableBytes)+int64(memTableBytes))
}

// Open opens (or creates) the store in cfg.Dir.
func Open(cfg Config) (*pebble.DB, error) {
	if cfg.Dir == "" {
		return nil, errors.New("store: Dir is required")
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = 256 << 20
	}
	if cfg.MemTableBytes == 0 {
		cfg.MemTableBytes = DefaultMemTableBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if vfs.Root(cfg.FS) == vfs.Default {
		fixOpenDir(cfg.Dir, cfg.Logger)
	}
	o := &opening{failed: make(chan struct{})}
	logger := &pebbleLogger{l: cfg.Logger.Named("pebble"), onFatal: cfg.OnFatal, opening: o}
	cache := pebble.NewCache(cfg.CacheBytes)
	defer cache.Unref()
	onDiskFull := func() {
		// Until Open returns, the write fails (and Open with it): nothing
		// runs yet that could wait for space.
		if !logger.opened.Load() {
			o.fail(fmt.Errorf("%w: no space left on the disk of %s to open the store (replaying its WAL writes about as much as the WAL holds): free space or grow the volume, then start again", ErrDiskFull, cfg.Dir))
			return
		}
		if cfg.OnDiskFull != nil {
			cfg.OnDiskFull()
		}
	}
	opts := &pebble.Options{
		// In a build with the failpoints tag the storage faults act here
		// (internal/failpoint); otherwise this is cfg.FS, creating its
		// files 0600 and directories 0700 (private.go). ENOSPC goes to
		// onDiskFull first.
		FS:                          vfs.OnDiskFull(failpoint.FS(newPrivateFS(cfg.FS)), onDiskFull),
		Cache:                       cache,
		FormatMajorVersion:          FormatMajorVersion,
		MemTableSize:                cfg.MemTableBytes,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		LBaseMaxBytes:               256 << 20,
		// Two cores: one compaction at a time leaves a core for the broker.
		CompactionConcurrencyRange: func() (int, int) { return 1, 1 },
		BytesPerSync:               1 << 20,
		Logger:                     logger,
	}
	// Bloom filters make point lookups of absent keys cheap (the dedupe
	// index is mostly asked about new keys).
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := o.open(cfg.Dir, opts)
	if err != nil {
		if l := lockedError(cfg, err); l != nil {
			return nil, l
		}
		return nil, fmt.Errorf("store: open %s: %w", cfg.Dir, err)
	}
	if err := checkFormat(db); err != nil {
		if errors.Is(err, ErrFatal) {
			// The marker's commit failed: the store must not be used
			// or closed again (pebbleLogger). Say why if it was space.
			select {
			case <-o.failed:
				return nil, o.err
			default:
				return nil, err
			}
		}
		db.Close()
		return nil, err
	}
	logger.opened.Store(true)
	return db, nil
}

// opening watches one Open for failures off its goroutine: ENOSPC (the
// flush of the replayed WAL, which Pebble retries for ever while Open
// waits for it) and fatal errors on Pebble's goroutines.
type opening struct {
	once   sync.Once
	failed chan struct{} // closed with err set
	err    error
	// over is set once open returned: later failures take the paths of
	// an open store.
	over atomic.Bool
}

func (o *opening) fail(err error) {
	o.once.Do(func() { o.err = err; close(o.failed) })
}

// open runs openPebble on a goroutine of its own and returns its result,
// or the first failure reported meanwhile. After a failure the goroutine
// is left to itself (it may wait for ever: the caller exits); if Pebble
// opens after all, it closes the store.
func (o *opening) open(dir string, opts *pebble.Options) (*pebble.DB, error) {
	type result struct {
		db  *pebble.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		db, err := openPebble(dir, opts)
		done <- result{db, err}
	}()
	defer o.over.Store(true)
	select {
	case r := <-done:
		return r.db, r.err
	case <-o.failed:
	}
	go func() {
		if r := <-done; r.db != nil {
			r.db.Close()
		}
	}()
	return nil, o.err
}

// openPebble is pebble.Open, with a fatal failure while opening (the
// logger's panic, on this goroutine) returned as an error.
func openPebble(dir string, opts *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatalPanic)
			if !ok {
				panic(r)
			}
			db, err = nil, f.err
		}
	}()
	return pebble.Open(dir, opts)
}

// lockedError returns a *LockedError when err is Pebble failing to lock
// the directory, nil for any other failure. Pebble's lock is a POSIX
// record lock on the LOCK file: another process holding it makes the
// lock call fail with EAGAIN (or EACCES), which reaches us as a bare
// errno, unlike a failure to create the file (an *fs.PathError); a store
// of this process holding it is caught by Pebble before the system call.
// The holder's pid comes from the system (F_GETLK), so nothing has to be
// written, and nothing stale can be read.
func lockedError(cfg Config, err error) *LockedError {
	if strings.Contains(err.Error(), "lock held by current process") {
		return &LockedError{Dir: cfg.Dir, ThisProcess: true}
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) || !(errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES)) {
		return nil
	}
	l := &LockedError{Dir: cfg.Dir}
	if cfg.FS == vfs.Default {
		l.PID = lockHolder(cfg.FS.PathJoin(cfg.Dir, "LOCK"))
	}
	return l
}

func checkFormat(db *pebble.DB) error {
	v, closer, err := db.Get(keys.FormatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		// A new store, or one that holds no Rewind data: mark it. A store
		// with data but no marker is not ours.
		it, err := db.NewIter(nil)
		if err != nil {
			return err
		}
		nonEmpty := it.First()
		it.Close()
		if nonEmpty {
			return fmt.Errorf("%w: it has data but no Rewind format marker", ErrIncompatible)
		}
		b := db.NewBatch()
		if err := b.Set(keys.FormatKey, []byte{formatVersion}, nil); err != nil {
			return err
		}
		return Commit(b, pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("store: read format marker: %w", err)
	}
	defer closer.Close()
	if len(v) != 1 || v[0] != formatVersion {
		return fmt.Errorf("%w: layout version %v, this build reads %d", ErrIncompatible, v, formatVersion)
	}
	return nil
}

// pebbleLogger adapts hclog to Pebble's Logger. Pebble's Fatalf must not
// return. While pebble.Open runs it reports the failure to Open (opening)
// and panics on Open's own goroutine (a fatalPanic, which openPebble
// turns into its error), or blocks for good on one of Pebble's, where a
// panic would kill the process before Open returns the reason. Until Open
// returns it panics (checkFormat's Commit recovers). After, with onFatal set, it reports the failure first;
// then a failed commit (WAL write or fsync) panics on the committing
// goroutine, which Commit, the raft host's guard and net/http turn into an
// error, so a commit failure stops the raft host cleanly; any other
// failure (a MANIFEST write of a background flush or compaction,
// corruption) happened on a goroutine of Pebble's that nobody can recover,
// so it blocks that goroutine for good, leaving Pebble's state as the
// failure found it while the owner exits (Config.OnFatal).
type pebbleLogger struct {
	l       hclog.Logger
	onFatal func(error)
	opening *opening
	opened  atomic.Bool
	once    sync.Once
}

// fatalCommitFormat is the format of Pebble's Fatalf for a failed commit
// (pebble.DB.Apply), which it calls on the committing goroutine.
// TestFailedFsyncStopsAcknowledgingAndLosesNothing (broker) catches a
// Pebble upgrade that changes it.
const fatalCommitFormat = "pebble: fatal commit error: %v"

// fatalPanic is what Fatalf panics with.
type fatalPanic struct{ err error }

func (f fatalPanic) String() string { return f.err.Error() }

func (p *pebbleLogger) Infof(format string, args ...any) {
	if p.l.IsDebug() {
		p.l.Debug(fmt.Sprintf(format, args...))
	}
}
func (p *pebbleLogger) Errorf(format string, args ...any) { p.l.Error(fmt.Sprintf(format, args...)) }
func (p *pebbleLogger) Fatalf(format string, args ...any) {
	err := fmt.Errorf("%w: %s", ErrFatal, fmt.Sprintf(format, args...))
	p.l.Error("pebble fatal error", "error", err)
	if p.opening != nil && !p.opening.over.Load() {
		p.opening.fail(err)
		if !strings.Contains(string(debug.Stack()), "store.openPebble(") {
			// One of Pebble's goroutines (a flush while opening): a
			// panic there would kill the process with a stack trace
			// before Open returns the reason.
			select {}
		}
	}
	if p.onFatal == nil || !p.opened.Load() {
		panic(fatalPanic{err})
	}
	p.once.Do(func() { p.onFatal(err) })
	if format == fatalCommitFormat {
		panic(fatalPanic{err})
	}
	select {} // Pebble must not go on; the owner exits
}

// Commit commits b like b.Commit(opts), and returns a fatal failure of the
// commit (Pebble's fatal logger panicking on this goroutine) as an error
// (an ErrFatal) instead of panicking: the store is unusable after it, and
// Config.OnFatal has been told.
func Commit(b *pebble.Batch, opts *pebble.WriteOptions) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatalPanic)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	return b.Commit(opts)
}
