//go:build unix

package store

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFixModesClosesTheTreeButNotWhatLinksPointAt: fixModes makes every
// open directory 0700 and open file 0600 under the data directory (reached
// through a symbolic link, as an operator may mount it), counts exactly
// what it changed, leaves private paths alone, and does not follow a link
// inside the directory to a file outside it.
func TestFixModesClosesTheTreeButNotWhatLinksPointAt(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dir, filepath.Join(dir, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]os.FileMode{
		filepath.Join(dir, "000001.log"): 0o644,
		filepath.Join(dir, "sub", "a"):   0o660,
		filepath.Join(dir, "private"):    0o600,
		filepath.Join(dir, "owner-only"): 0o400,
		outside:                          0o644,
	}
	for p, m := range files {
		if err := os.WriteFile(p, nil, m); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, m); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "data-link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	fixed, err := fixModes(link)
	if err != nil {
		t.Fatal(err)
	}
	if fixed != 4 { // data, data/sub, 000001.log, sub/a
		t.Errorf("fixed %d paths, want 4", fixed)
	}
	want := map[string]os.FileMode{
		dir: 0o700, filepath.Join(dir, "sub"): 0o700,
		filepath.Join(dir, "000001.log"): 0o600, filepath.Join(dir, "sub", "a"): 0o600,
		filepath.Join(dir, "private"): 0o600, filepath.Join(dir, "owner-only"): 0o400,
		outside: 0o644,
	}
	for p, m := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != m {
			t.Errorf("%s: mode %#o, want %#o", p, fi.Mode().Perm(), m)
		}
	}
	if fixed, err := fixModes(filepath.Join(base, "missing")); fixed != 0 || err != nil {
		t.Errorf("a missing directory: fixed %d, %v", fixed, err)
	}
}

// TestOpenOnMemFSStillWorks: the private wrapper changes nothing on a
// filesystem that is not the operating system's (tests' in-memory and
// crash-simulating ones) and the store opens, writes and reopens on it.
func TestOpenOnMemFSStillWorks(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db, err := Open(Config{Dir: "d", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(Config{Dir: "d", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, closer, err := db.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("get after reopen: %q, %v", v, err)
	} else {
		closer.Close()
	}
}

// TestOpenCreatesPrivateFiles: with the umask at 0 (each file gets the mode
// asked for), every directory and file Pebble creates in a new store, and
// after a write and a reopen (WAL, tables, MANIFEST, OPTIONS, LOCK,
// markers), is private. Pebble alone makes them 0755 and 0666.
func TestOpenCreatesPrivateFiles(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data", "store")
	for i := range 2 {
		db, err := Open(Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Set([]byte{byte(i)}, []byte("v"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	n := 0
	err := filepath.WalkDir(filepath.Dir(dir), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %#o, want %#o", path, fi.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Fatalf("only %d paths: the check saw too little", n)
	}
}

// BenchmarkFixModes measures the walk every start makes over a data
// directory of 1,000 files (a store of about 64 GiB in 64 MiB tables):
// "private" is the usual start (a stat per path, nothing to change),
// "open" the first start after an upgrade (a chmod per path too).
func BenchmarkFixModes(b *testing.B) {
	for _, tc := range []struct {
		name string
		mode os.FileMode
	}{{"private", 0o600}, {"open", 0o644}} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			if err := os.Chmod(dir, 0o700); err != nil { // TempDir is 0755
				b.Fatal(err)
			}
			const files = 1000
			for i := range files {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d.sst", i)), nil, 0o600); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for i := range files {
					if err := os.Chmod(filepath.Join(dir, fmt.Sprintf("%06d.sst", i)), tc.mode); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				fixed, err := fixModes(dir)
				if err != nil {
					b.Fatal(err)
				}
				if want := map[bool]int{true: files, false: 0}[tc.mode&0o077 != 0]; fixed != want {
					b.Fatalf("fixed %d, want %d", fixed, want)
				}
			}
		})
	}
}
