// Package proto holds the public API definitions (rewind/v1/*.proto): the
// buf module clients generate from (`buf generate sdk/proto` yields
// rewind.v1 and nothing else). The peer protocol between cluster members
// (rewind.peer.v1) is another module of the same buf workspace,
// internal/proto (see buf.yaml).
//
// The package has no Go code of its own. Its tests lint the API (buf's
// STANDARD rules), keep the checked-in generated code of both modules
// honest (regenerating must change nothing: sdk/gen, sdk/ts/src/gen and
// internal/gen), and keep the public module free of the peer protocol.
package proto
