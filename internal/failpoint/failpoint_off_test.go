//go:build !failpoints

package failpoint

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The normal build has no failpoints: nothing can be set, the handler is
// a 404, and the filesystem and clock are passed through untouched.
func TestNormalBuildHasNone(t *testing.T) {
	if Available {
		t.Fatal("Available in a build without the failpoints tag")
	}
	if err := Set(FsyncEIO, ""); err == nil || !strings.Contains(err.Error(), "-tags failpoints") {
		t.Fatalf("Set: %v, want an error naming the build tag", err)
	}
	if Enabled(FsyncEIO) || len(Active()) != 0 {
		t.Fatal("a failpoint is set")
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path+"?fsync-eio=on", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("handler answered %d, want 404", rec.Code)
	}
	mem := vfs.NewMem()
	if FS(mem) != vfs.FS(mem) {
		t.Fatal("FS wrapped the filesystem")
	}
}
