// Package build compiles Rewind filter and transform modules from source:
// Go with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared (Go) and
// AssemblyScript with the npm package assemblyscript (AssemblyScript).
// `rewind plugin build` uses it, and so do the tests, which build every
// module they run from source instead of checking in binaries.
//
//	wasm, err := build.Go(ctx, "sdk/guest/examples/go/keyprefix")
//
// Go relies on the go command's build cache (a rebuild of unchanged sources
// takes about 0.1 s); AssemblyScript builds a project once per process and
// serializes processes with a file lock, so parallel test binaries do not
// install or compile the same project at once.
package build

import "errors"

// ErrToolMissing is wrapped by the errors of Go and AssemblyScript when the
// toolchain they run (go; node and npm) is not on PATH.
var ErrToolMissing = errors.New("build: toolchain not found")
