// Package layout holds tests only: they keep docs/architecture.md and the
// code from drifting apart.
//
// TestLayoutTableNamesEveryPackage parses the layout table of
// docs/architecture.md (between the layout:begin and layout:end markers)
// and checks it against `go list ./...` of the module: every package the
// table names exists, and every package of the module is named, directly
// or under a prefix row ending in "/...".
//
// TestEveryPackageHasADocComment checks that every package of the module
// has a package doc comment in a non-test file, where `go doc` and
// `go list -f '{{.Doc}}'` read it (a package of tests only gets a doc.go
// holding just its comment). Packages whose files are all generated
// ("Code generated ... DO NOT EDIT.") are exempt: their generator owns
// them, and regenerating with `clean: true` would delete a doc.go added
// beside them.
//
// To fix a failure: add the package to the table (one line, in its group),
// remove the row of a package that is gone, or write the package's doc
// comment (a big one in doc.go, on the model of raftlog/doc.go).
package layout
