// Package filter is the Go SDK for Rewind filter and transform modules:
// WebAssembly modules that a replay carries to decide, record by record,
// what the subscriber receives (a filter) or to rewrite it (a transform).
// The package implements the module side of ABI v1 (sdk/guest/ABI.md):
// its exports, the input and output encodings and the return codes. A
// module written with it is a Go main package that registers one function.
//
// # Writing a module
//
//  1. Write a filter, func(filter.Record) bool, or a transform,
//     func(filter.Record) (filter.Record, bool). It runs once per record,
//     so it should not allocate; the record's slices alias the input
//     buffer and are valid only during the call (see Record).
//
//  2. Register it from an init function with Filter or Transform (exactly
//     one of them, once). To read the replay's configuration, also
//     register OnInit; return an error from it for a bad config, which
//     fails the replay with that text in the server log.
//
//  3. Give the main package an empty func main. Built with
//     -buildmode=c-shared, the module is a WASI reactor: the host calls
//     _initialize, which runs the package init functions, never main.
//
//  4. Build it:
//
//     GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o f.wasm .
//
//     (or with sdk/guest/build.Go, which `rewind plugin build` uses).
//
// A complete filter:
//
//	package main
//
//	import (
//		"bytes"
//
//		"github.com/rewind-io/rewind/sdk/guest/filter"
//	)
//
//	var prefix = []byte("user-1")
//
//	func init() {
//		filter.Filter(func(r filter.Record) bool {
//			return bytes.HasPrefix(r.Key, prefix)
//		})
//	}
//
//	func main() {}
//
// More are under sdk/guest/examples/go. For JSON record values, package
// jsonscan (sdk/guest/filter/jsonscan) finds and compares top-level fields
// without allocating.
//
// # Imports a module may not use
//
// The server refuses a module that imports a WASI function outside ABI
// v1's allow-list. Package os, and every package that imports it (fmt,
// log, encoding/json, flag, ...), makes the Go runtime import
// fd_prestat_get, fd_prestat_dir_name and fd_fdstat_set_flags, which the
// list does not hold: keep them out of a module (strconv, bytes, errors,
// unicode/utf8 and the like are fine). This package and jsonscan import
// none of them; only their native, non-WebAssembly code does.
//
// # Testing a module
//
// The registered function runs natively too: a Harness (NewHarness)
// drives it through the same encoding, dispatch and decoding as the wasm
// exports, so a module's package tests with plain `go test`. Build the
// module for real (sdk/guest/build) for an end-to-end test under wazero.
//
// # How the exports work
//
// On wasip1 the package exports rewind_abi_v1, rewind_input,
// rewind_input_cap, rewind_output, rewind_output_cap, rewind_init and
// rewind_filter, and imports rewind.log (Log). The input and output
// buffers (DefaultBufferSize each, or SetBufferSizes) are allocated when
// the host first asks for an address, after _initialize. rewind_filter
// decodes each record in place, calls the function and writes (index, 0)
// for a kept or unchanged record and (index, 1, replacement) for a
// replaced one. It returns the output length; -2 when the output buffer is
// full (the host retries with fewer records); -1, after a log line, when
// the input is malformed, rewind_init has not succeeded, or the function
// panics. Nothing on that path allocates.
package filter
