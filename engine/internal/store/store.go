// Package store opens the node's one Pebble database with the options Rewind
// depends on, and checks that what it opens is a Rewind store it can serve.
package store

import (
	"errors"
	"fmt"
	"io/fs"
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
	// MemTableBytes sizes each memtable. Default 64 MiB.
	MemTableBytes uint64
	Logger        hclog.Logger
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
		cfg.MemTableBytes = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if vfs.Root(cfg.FS) == vfs.Default {
		fixOpenDir(cfg.Dir, cfg.Logger)
	}
	logger := &pebbleLogger{l: cfg.Logger.Named("pebble"), onFatal: cfg.OnFatal}
	cache := pebble.NewCache(cfg.CacheBytes)
	defer cache.Unref()
	opts := &pebble.Options{
		// In a build with the failpoints tag the storage faults act here
		// (internal/failpoint); otherwise this is cfg.FS, creating its
		// files 0600 and directories 0700 (private.go).
		FS:                          failpoint.FS(newPrivateFS(cfg.FS)),
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
	db, err := openPebble(cfg.Dir, opts)
	if err != nil {
		if l := lockedError(cfg, err); l != nil {
			return nil, l
		}
		return nil, fmt.Errorf("store: open %s: %w", cfg.Dir, err)
	}
	if err := checkFormat(db); err != nil {
		db.Close()
		return nil, err
	}
	logger.opened.Store(true)
	return db, nil
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
		return db.Set(keys.FormatKey, []byte{formatVersion}, pebble.Sync)
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
// return. Before Open returns it panics (a fatalPanic, which Open turns
// into its error). After, with onFatal set, it reports the failure first;
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
