// Module client is the Go client of Rewind. It depends on connect,
// protobuf and the generated API (sdk/gen) only: never on the server
// (.ci/run checks that no storage, sandbox or browser module enters its
// graph). The replace line builds against the API in this checkout; it
// has no effect for users, who get the sdk/gen version required here: the
// pseudo-version of the last commit that changed sdk/gen, until releases
// tag sdk/gen/vX.Y.Z (bump it when the API changes).
module github.com/rewind-io/rewind/sdk/client

go 1.26.8

require (
	connectrpc.com/connect v1.21.1
	github.com/rewind-io/rewind/sdk/gen v0.0.0-20261207050449-b209f6201f2d
	google.golang.org/protobuf v1.36.12
)

replace github.com/rewind-io/rewind/sdk/gen => ../gen
