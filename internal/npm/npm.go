// Package npm answers whether a Node project's node_modules holds exactly
// what its package-lock.json names, so the builds and tests that use npm
// run `npm ci` only when it is needed (it is slow, and needs the registry).
package npm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// lockfile is the part of a package-lock.json (or of the hidden
// node_modules/.package-lock.json npm writes when it installs) that says
// what is installed.
type lockfile struct {
	Packages map[string]struct {
		Version   string `json:"version"`
		Integrity string `json:"integrity"`
		Optional  bool   `json:"optional"`
	} `json:"packages"`
}

// Fresh reports whether dir/node_modules holds exactly the packages
// dir/package-lock.json names (npm ci is needed otherwise). A missing or
// unreadable lockfile is an error; a missing node_modules is just stale.
func Fresh(dir string) (bool, error) {
	var want, have lockfile
	b, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return false, fmt.Errorf("npm: %w", err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		return false, fmt.Errorf("npm: %s/package-lock.json: %w", dir, err)
	}
	b, err = os.ReadFile(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil || json.Unmarshal(b, &have) != nil {
		return false, nil // never installed, or by something other than npm
	}
	for path, w := range want.Packages {
		if !strings.HasPrefix(path, "node_modules/") {
			continue // the project itself
		}
		h, ok := have.Packages[path]
		if !ok {
			if w.Optional {
				continue // e.g. a binary for another platform
			}
			return false, nil
		}
		if h.Version != w.Version || h.Integrity != w.Integrity {
			return false, nil
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(path), "package.json")); err != nil {
			return false, nil
		}
	}
	for path := range have.Packages {
		if _, ok := want.Packages[path]; !ok {
			return false, nil // left over from another lockfile
		}
	}
	return true, nil
}
