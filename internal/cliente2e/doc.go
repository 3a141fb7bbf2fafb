// Package cliente2e holds the end-to-end tests of the Go client
// (sdk/client): each starts real nodes on loopback (internal/enginetest;
// the examples through engine.Node.Serve) and talks to them through the client, over real
// connections. It has no code of its own, only tests, the examples that
// need a server, and BenchmarkPublishDuringPause.
//
// Why here and not beside the client? The client is a module of its own
// (github.com/rewind-io/rewind/sdk/client, see docs/design.md) whose graph
// holds connect and protobuf only; a test file in that module importing
// the engine would put Pebble, wazero and the rest into it, and every
// user's go.sum. A directory under sdk/client belongs to that module, so
// the tests live in the server's module, which requires the client from
// ./sdk/client (a replace line): they always test the client's code in
// this checkout. The client's tests that need no node (positions, retry
// policy, node choice, the publisher's options against a fake
// PublishService) stay in its module.
package cliente2e
