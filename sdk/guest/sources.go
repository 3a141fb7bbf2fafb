// Package guest holds the sources of the guest SDKs (the Go package
// filter with jsonscan, and the AssemblyScript SDK with its lockfile) as
// an embedded file system, so that a tool can copy them into a new
// project: sdk/guest/scaffold, behind `rewind plugin new`, does.
package guest

import "embed"

// Sources is the guest SDKs' source tree, rooted at sdk/guest:
//
//	filter/*.go, filter/jsonscan/*.go            the Go SDK (tests included)
//	assemblyscript/assembly/rewind/*.ts          the AssemblyScript SDK
//	assemblyscript/package.json, package-lock.json
//
// It is read-only and safe for concurrent use.
//
//go:embed filter/*.go filter/jsonscan/*.go
//go:embed assemblyscript/assembly/rewind/*.ts
//go:embed assemblyscript/package.json assemblyscript/package-lock.json
var Sources embed.FS
