// Package ts is the directory of the TypeScript client, the npm package
// @rewind-io/client (src/, generated code in src/gen, built into dist/).
// It has no Go code: its Go tests (package ts_test) run the client's own
// suite with npm and a headless Chromium test against real servers, so
// that `go test ./...` covers the TypeScript client too.
package ts
