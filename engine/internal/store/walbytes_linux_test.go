package store

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// WALBytes must be what a WAL file really takes on disk, whatever it holds:
// the free-disk guard's default (ReserveBytes) is made of it. A Pebble
// upgrade that changes its preallocation fails this test.
func TestWALBytesIsWhatAWALFileTakes(t *testing.T) {
	const memtable = 4 << 20
	dir := t.TempDir()
	db, err := Open(Config{Dir: dir, FS: vfs.Default, MemTableBytes: memtable, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Set([]byte("k"), make([]byte, 1000), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no WAL file in %s: %v", dir, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(logs[len(logs)-1], &st); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(logs[len(logs)-1])
	taken := st.Blocks * 512
	if taken < 1<<20 {
		t.Skipf("the filesystem under %s does not preallocate (a WAL file of %d bytes takes %d)", dir, fi.Size(), taken)
	}
	if want := WALBytes(memtable); taken < want || taken > want+64<<10 {
		t.Fatalf("a WAL file holding %d bytes takes %d bytes on disk, WALBytes says %d", fi.Size(), taken, want)
	}
	t.Logf("a WAL file holding %d bytes takes %d bytes on disk (memtables of %d)", fi.Size(), taken, memtable)
	if got, want := ReserveBytes(0), int64(2*(64<<20+64<<20/10)+64<<20); got != want {
		t.Fatalf("ReserveBytes(0) = %d, want %d", got, want)
	}
}
