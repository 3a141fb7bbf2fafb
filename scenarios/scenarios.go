// Package scenarios holds the scenario files shipped with Rewind (the
// library `rewind scenario list` shows), embedded in the binary. The
// format is documented in docs/scenarios.md.
package scenarios

import (
	"embed"
	"io/fs"
	"path"
	"slices"
	"strings"
)

//go:embed *.hcl
var files embed.FS

// Names lists the built-in scenarios, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".hcl"))
	}
	slices.Sort(out)
	return out
}

// File returns a built-in scenario's file name and contents.
func File(name string) (filename string, src []byte, ok bool) {
	filename = name + ".hcl"
	src, err := files.ReadFile(path.Clean(filename))
	return filename, src, err == nil
}
