//go:build unix

package tier

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFileStoreObjectsArePrivate: a file:// tier holds every record, so
// (issue 24, finding 1) the directories a FileStore creates are 0700 and
// its objects 0600, whatever the umask (0 here: each path gets the mode
// asked for; they were 0755 and 0644).
func TestFileStoreObjectsArePrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := filepath.Join(t.TempDir(), "tier")
	s, err := NewFileStore(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), "topics/7/0/00000000000000000000.seg", []byte("records")); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{
		root:                              0o700,
		filepath.Join(root, "topics"):     0o700,
		filepath.Join(root, "topics/7"):   0o700,
		filepath.Join(root, "topics/7/0"): 0o700,
		filepath.Join(root, "topics/7/0/00000000000000000000.seg"): 0o600,
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
}
