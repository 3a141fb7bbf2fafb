//go:build !failpoints

package engine_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginehook"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/failpoint"
)

// TestNormalBuildHasNoFailpoints: a binary built without the failpoints
// tag has none, and its node does not serve /debug/failpoints.
func TestNormalBuildHasNoFailpoints(t *testing.T) {
	if failpoint.Available {
		t.Fatal("failpoints compiled into a normal build")
	}
	n := enginetest.StartNode(t, enginehook.With(engine.Config{Dir: "data"}, enginehook.Hooks{FS: vfs.NewMem()}))
	if code, body := probe(t, n.URL+failpoint.Path); code != http.StatusNotFound {
		t.Fatalf("GET %s: %d %s, want 404", failpoint.Path, code, body)
	}
	resp, err := http.PostForm(n.URL+failpoint.Path, url.Values{failpoint.FsyncEIO: {"on"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST %s: %d, want 404", failpoint.Path, resp.StatusCode)
	}
}
