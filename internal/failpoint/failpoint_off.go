//go:build !failpoints

package failpoint

import (
	"errors"
	"net/http"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Available reports whether this binary was built with failpoints (the
// build tag `failpoints`). It is false here: every function below is a
// constant.
const Available = false

// errNotBuilt is Set's error in this build.
var errNotBuilt = errors.New("failpoint: this binary was built without failpoints (build it with -tags failpoints)")

// Enabled reports whether failpoint name is set: never, in this build.
func Enabled(string) bool { return false }

// Value returns failpoint name's value and whether it is set: never, in
// this build.
func Value(string) (string, bool) { return "", false }

// Set sets failpoint name to value: always an error, in this build.
func Set(name, _ string) error { return errNotBuilt }

// Clear clears failpoint name: a no-op, in this build.
func Clear(string) {}

// Pause returns at once, in this build.
func Pause(string) {}

// Reached returns nil (a channel never ready), in this build.
func Reached(string) <-chan struct{} { return nil }

// Active returns the set failpoints: none, in this build.
func Active() map[string]string { return nil }

// Handler answers 404, in this build.
func Handler() http.Handler { return http.NotFoundHandler() }

// FS returns fs: no storage faults, in this build.
func FS(fs vfs.FS) vfs.FS { return fs }

// Clock returns clock: no offset, in this build.
func Clock(clock func() time.Time) func() time.Time { return clock }
