//go:build failpoints

package failpoint

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// crashClone is what a kill -9 of the process leaves on disk: everything
// the wrapped filesystem was given, synced or not (the page cache
// survives a process crash). What FaultFS held in memory is gone.
func crashClone(mem *vfs.MemFS) *vfs.MemFS {
	return mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 2))})
}

func readAll(t *testing.T, fs vfs.FS, name string) string {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, f vfs.File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// TestPowerLossHoldsUnsyncedData: with power-loss, written data reaches
// the disk only when its file is synced; until then the process reads it
// (sequentially, at an offset, in Stat), and a crash drops it. A rename
// carries the held data along; clearing the failpoint writes it out on
// the next write.
func TestPowerLossHoldsUnsyncedData(t *testing.T) {
	reset(t)
	mem := vfs.NewCrashableMem()
	fs := NewFaultFS(mem)
	if err := Set(PowerLoss, ""); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("a", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "synced ")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	write(t, f, "held")
	if _, err := f.WriteAt([]byte("H"), 7); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fs, "a"); got != "synced Held" {
		t.Fatalf("the process reads %q, want its own unsynced bytes too", got)
	}
	buf := make([]byte, 20)
	if n, err := f.ReadAt(buf, 5); err != io.EOF || string(buf[:n]) != "d Held" {
		t.Fatalf("ReadAt: %q %v", buf[:n], err)
	}
	if fi, err := fs.Stat("a"); err != nil || fi.Size() != 11 {
		t.Fatalf("Stat: %v %v, want size 11", fi, err)
	}
	if got := readAll(t, mem, "a"); got != "synced " {
		t.Fatalf("the disk has %q, want only the synced bytes", got)
	}
	if got := readAll(t, crashClone(mem), "a"); got != "synced " {
		t.Fatalf("after a crash: %q, want only the synced bytes", got)
	}
	if fs.Unsynced() != 5 { // "held", and "H" over its first byte
		t.Fatalf("Unsynced = %d, want 5", fs.Unsynced())
	}

	if err := fs.Rename("a", "b"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fs, "b"); got != "synced Held" {
		t.Fatalf("after a rename: %q", got)
	}
	Clear(PowerLoss)
	write(t, f, "!") // writes out what is held first
	if got := readAll(t, mem, "b"); got != "synced Held!" {
		t.Fatalf("after clearing power-loss and writing: the disk has %q", got)
	}
	if fs.Unsynced() != 0 {
		t.Fatalf("Unsynced = %d after writing it out", fs.Unsynced())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// panicLogger makes Pebble's fatal errors panics the test can recover
// (Pebble's default logger exits the process).
type panicLogger struct{}

func (panicLogger) Infof(string, ...any)  {}
func (panicLogger) Errorf(string, ...any) {}
func (panicLogger) Fatalf(format string, args ...any) {
	panic(fmt.Errorf(format, args...)) // %w in Pebble's formats keeps the cause
}

func openDB(t *testing.T, fs vfs.FS) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: panicLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// set writes key with opts and returns the error, or the fatal error
// Pebble panicked with.
func set(db *pebble.DB, key string, opts *pebble.WriteOptions) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble fatal: %v", r)
		}
	}()
	return db.Set([]byte(key), []byte("v-"+key), opts)
}

func has(t *testing.T, db *pebble.DB, key string) bool {
	t.Helper()
	_, closer, err := db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	closer.Close()
	return true
}

// walSize returns the size of the store's one WAL file on fs.
func walSize(t *testing.T, fs vfs.FS) int64 {
	t.Helper()
	names, err := fs.List("db")
	if err != nil {
		t.Fatal(err)
	}
	var wals []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			wals = append(wals, n)
		}
	}
	if len(wals) != 1 {
		t.Fatalf("WAL files %v, want one", wals)
	}
	fi, err := fs.Stat(fs.PathJoin("db", wals[0]))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestPowerLossWithPebble: a write committed with Sync survives a crash
// in power-loss mode; what Pebble wrote to its WAL after it without
// syncing (the full blocks of a large record committed without Sync) is
// not on the disk after the crash, although the store reads it while it
// runs. Without power-loss the same crash keeps those blocks (the
// control: they were on the disk).
func TestPowerLossWithPebble(t *testing.T) {
	for _, powerLoss := range []bool{true, false} {
		t.Run(fmt.Sprintf("power-loss=%v", powerLoss), func(t *testing.T) {
			reset(t)
			mem := vfs.NewCrashableMem()
			fs := NewFaultFS(mem)
			walWrites := make(chan struct{}, 1000)
			fs.afterWrite = func(name string) {
				if strings.HasSuffix(name, ".log") {
					walWrites <- struct{}{}
				}
			}
			if powerLoss {
				if err := Set(PowerLoss, ""); err != nil {
					t.Fatal(err)
				}
			}
			db := openDB(t, fs)
			if err := set(db, "synced", pebble.Sync); err != nil {
				t.Fatal(err)
			}
			syncedSize := walSize(t, mem)
			for len(walWrites) > 0 {
				<-walWrites
			}
			// Pebble's WAL blocks are 32 KiB: the full blocks of this record
			// are written without a sync as soon as they fill.
			if err := db.Set([]byte("unsynced"), make([]byte, 200<<10), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			<-walWrites // Pebble's WAL flusher wrote (and did not sync)
			if !has(t, db, "unsynced") {
				t.Fatal("the running store lost its own write")
			}
			if got := walSize(t, fs); got <= syncedSize {
				t.Fatalf("the store sees a WAL of %d bytes, want more than the %d synced", got, syncedSize)
			}
			if held := fs.Unsynced(); powerLoss != (held > 0) {
				t.Fatalf("%d bytes held in memory", held)
			}
			crashed := crashClone(mem)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			Clear(PowerLoss)
			if got := walSize(t, crashed); powerLoss != (got == syncedSize) {
				t.Fatalf("after the crash the WAL has %d bytes, %d were synced", got, syncedSize)
			}
			db = openDB(t, crashed)
			defer db.Close()
			if !has(t, db, "synced") {
				t.Fatal("a synced write was lost in the crash")
			}
		})
	}
}

// TestFsyncEIO: every sync fails with EIO; Pebble cannot commit with Sync
// and treats it as fatal.
func TestFsyncEIO(t *testing.T) {
	reset(t)
	mem := vfs.NewMem()
	fs := NewFaultFS(mem)
	db := openDB(t, fs)
	if err := set(db, "before", pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := Set(FsyncEIO, ""); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("x", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	for name, sync := range map[string]func() error{
		"Sync": f.Sync, "SyncData": f.SyncData,
		"SyncTo": func() error { _, err := f.SyncTo(1); return err },
	} {
		if err := sync(); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s: %v, want EIO", name, err)
		}
	}
	if err := set(db, "after", pebble.Sync); err == nil || !strings.Contains(err.Error(), syscall.EIO.Error()) {
		t.Fatalf("a synced commit: %v, want a fatal EIO", err)
	}
}

// TestENOSPC: writes fail with ENOSPC and the disk has nothing free.
func TestENOSPC(t *testing.T) {
	reset(t)
	mem := vfs.NewMem()
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30, UsedBytes: 1 << 30})
	fs := NewFaultFS(mem)
	db := openDB(t, fs)
	if err := Set(ENOSPC, ""); err != nil {
		t.Fatal(err)
	}
	if u, err := fs.GetDiskUsage("db"); err != nil || u.AvailBytes != 0 {
		t.Fatalf("disk usage %+v %v, want nothing available", u, err)
	}
	f, err := fs.Create("x", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write: %v, want ENOSPC", err)
	}
	if err := set(db, "k", pebble.Sync); err == nil || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		t.Fatalf("a synced commit: %v, want a fatal ENOSPC", err)
	}
}

// TestFsyncDelay: a sync waits the delay, then syncs.
func TestFsyncDelay(t *testing.T) {
	reset(t)
	var slept []string
	sleep = func(d time.Duration) { slept = append(slept, d.String()) }
	defer func() { sleep = time.Sleep }()
	fs := NewFaultFS(vfs.NewMem())
	f, err := fs.Create("x", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := Set(FsyncDelay, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := Set(FsyncDelay, "1s"); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(slept, " "); got != "200ms 1s" {
		t.Fatalf("slept %q, want 200ms then 1s", got)
	}
}

// TestTornWrite: the next WAL write is cut in half and the process
// "crashes"; reopened, the store has everything synced before and nothing
// of the torn write.
func TestTornWrite(t *testing.T) {
	reset(t)
	mem := vfs.NewCrashableMem()
	fs := NewFaultFS(mem)
	var crashed *vfs.MemFS
	fs.crash = func() { crashed = crashClone(mem) }
	db := openDB(t, fs)
	for i := range 10 {
		if err := set(db, fmt.Sprint("before-", i), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := Set(TornWrite, ""); err != nil {
		t.Fatal(err)
	}
	if err := set(db, "torn", pebble.Sync); err == nil {
		t.Fatal("the torn write's commit succeeded")
	}
	if crashed == nil {
		t.Fatal("the torn write did not crash the process")
	}
	if Enabled(TornWrite) {
		t.Fatal("torn-write did not clear itself")
	}
	db = openDB(t, crashed)
	defer db.Close()
	for i := range 10 {
		if !has(t, db, fmt.Sprint("before-", i)) {
			t.Fatalf("synced write %d lost", i)
		}
	}
	if has(t, db, "torn") {
		t.Fatal("the half-written record was read back")
	}
}

// TestBitFlip: one bit of the next table written is flipped on the disk;
// reading the table back fails with a corruption error instead of
// returning wrong data.
func TestBitFlip(t *testing.T) {
	reset(t)
	mem := vfs.NewMem()
	fs := NewFaultFS(mem)
	db := openDB(t, fs)
	for i := range 100 {
		if err := set(db, fmt.Sprintf("key-%03d", i), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := Set(BitFlip, ""); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if Enabled(BitFlip) {
		t.Fatal("no table was written, or bitflip did not clear itself")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, fs) // nothing cached
	defer db.Close()
	n, err := scan(db)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("scan of the flipped table: %d records, error %v, want a corruption error", n, err)
	}
}

// scan reads every record, checking each is the one written, and returns
// how many it read and the error that ended the scan: the iterator's, or
// the corruption Pebble reported as fatal (panicLogger).
func scan(db *pebble.DB) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	it, err := db.NewIter(nil)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for it.First(); it.Valid(); it.Next() {
		if want := fmt.Sprintf("key-%03d", n); string(it.Key()) != want || string(it.Value()) != "v-"+want {
			return n, fmt.Errorf("record %d read back as %q=%q", n, it.Key(), it.Value())
		}
		n++
	}
	return n, nil
}

// TestPowerLossFollowsTheFile: held data belongs to the file, as data
// belongs to an inode: a link shares it, removing one name keeps it, a
// truncating create or removing the last name drops it.
func TestPowerLossFollowsTheFile(t *testing.T) {
	reset(t)
	mem := vfs.NewMem()
	fs := NewFaultFS(mem)
	if err := Set(PowerLoss, ""); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("a", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "held")
	if err := fs.Link("a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fs, "b"); got != "held" {
		t.Fatalf("through the link after the first name went: %q", got)
	}
	if err := f.Sync(); err != nil { // through the handle of the removed name
		t.Fatal(err)
	}
	if got := readAll(t, mem, "b"); got != "held" || fs.Unsynced() != 0 {
		t.Fatalf("after the sync the disk has %q, %d bytes still held", got, fs.Unsynced())
	}
	write(t, f, " more")
	g, err := fs.Create("b", vfs.WriteCategoryUnspecified) // truncates
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fs, "b"); got != "" || fs.Unsynced() != 0 {
		t.Fatalf("after a truncating create: %q, %d bytes held", got, fs.Unsynced())
	}
	write(t, g, "new")
	if err := fs.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename("b", "d/c"); err != nil {
		t.Fatal(err)
	}
	if err := fs.RemoveAll("d"); err != nil {
		t.Fatal(err)
	}
	if fs.Unsynced() != 0 {
		t.Fatalf("%d bytes held for removed files", fs.Unsynced())
	}
	f.Close()
	g.Close()
}
