//go:build unix

package enginetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Module is the server's module path; Binary builds its cmd/rewind.
const Module = "github.com/rewind-io/rewind"

// binaryCacheDir is where Binary keeps what it built, below os.TempDir,
// shared by every test binary of every package (and every checkout: the
// key tells trees apart).
const binaryCacheDir = "rewind-enginetest-bin"

// binaryTTL is how long a build nobody asked for stays in the cache, and
// binaryKept how many builds it holds at most.
const (
	binaryTTL  = 24 * time.Hour
	binaryKept = 8
)

// built memoizes Binary within one test binary, by tags.
var built sync.Map // string -> func() (string, error)

// Binary returns the path of the rewind command (cmd/rewind) built from
// this checkout with the build tags given (none: the release build), and
// fails the test if it cannot be built. Test binaries running at once,
// of any package, share one build per source tree:
//
//  1. The key hashes what goes into the binary: the files of the
//     module's own packages it imports (Go, cgo and embedded files, by
//     content), the other modules' versions, go.mod and go.sum, the Go
//     version, the tags and the build's environment (CGO_ENABLED,
//     GOFLAGS, GOEXPERIMENT).
//  2. A build of that key, if present, is used as is.
//  3. Otherwise Binary takes the key's lock file (flock), checks again,
//     builds to a temporary name and renames it into place, so no one
//     ever runs a half-written binary; a second test binary waits on the
//     lock, then finds the build done.
//
// Builds live in os.TempDir()/rewind-enginetest-bin; when a new one is
// made, those unused for a day are removed, and all but the 8 most
// recently used.
func Binary(tb testing.TB, tags ...string) string {
	tb.Helper()
	tags = slices.Sorted(slices.Values(tags))
	f, _ := built.LoadOrStore(strings.Join(tags, ","), sync.OnceValues(func() (string, error) { return buildBinary(tags) }))
	bin, err := f.(func() (string, error))()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

func buildBinary(tags []string) (string, error) {
	gotool := goTool()
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	key, err := sourceKey(gotool, root, tags)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), binaryCacheDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, key, "rewind")
	if used(bin) {
		return bin, nil
	}
	lock, err := os.OpenFile(filepath.Join(dir, key+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if used(bin) { // built while we waited
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	args := []string{"build", "-o", tmp}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command(gotool, append(args, Module+"/cmd/rewind")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s/cmd/rewind (tags %q): %v\n%s", Module, tags, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	prune(dir, key)
	return bin, nil
}

// used reports whether bin exists, and marks it used now.
func used(bin string) bool {
	now := time.Now()
	return os.Chtimes(filepath.Dir(bin), now, now) == nil && fileExists(bin)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// prune removes the builds other than keep that were not used for
// binaryTTL, and all but the binaryKept-1 most recently used of the rest:
// every commit of a busy day makes new builds (about 50 MB each, one per
// set of tags), and a day of them filled a CI machine's disk. A build in
// use by a running test was marked used when that test binary started.
func prune(dir, keep string) {
	type build struct {
		name string
		used time.Time
	}
	var builds []build
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() || e.Name() == keep {
			continue
		}
		if fi, err := e.Info(); err == nil {
			builds = append(builds, build{e.Name(), fi.ModTime()})
		}
	}
	slices.SortFunc(builds, func(a, b build) int { return b.used.Compare(a.used) })
	for i, b := range builds {
		if i >= binaryKept-1 || time.Since(b.used) > binaryTTL {
			os.RemoveAll(filepath.Join(dir, b.name))
			os.Remove(filepath.Join(dir, b.name+".lock"))
		}
	}
}

// sourceKey hashes what a build of cmd/rewind with tags depends on (step
// 1 of Binary).
func sourceKey(gotool, root string, tags []string) (string, error) {
	const format = `{{if not .Standard}}{{.ImportPath}}|{{.Dir}}|{{with .Module}}{{.Path}}@{{.Version}}{{with .Replace}}=>{{.Path}}@{{.Version}}{{end}}{{end}}|` +
		`{{join .GoFiles ","}},{{join .CgoFiles ","}},{{join .CFiles ","}},{{join .HFiles ","}},{{join .SFiles ","}},{{join .EmbedFiles ","}}{{end}}`
	args := []string{"list", "-deps", "-f", format}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command(gotool, append(args, Module+"/cmd/rewind")...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -deps %s/cmd/rewind: %v\n%s", Module, err, stderr.Bytes())
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s tags=%q cgo=%q goflags=%q experiment=%q\n", runtime.Version(), runtime.GOOS, runtime.GOARCH,
		tags, os.Getenv("CGO_ENABLED"), os.Getenv("GOFLAGS"), os.Getenv("GOEXPERIMENT"))
	for _, name := range []string{"go.mod", "go.sum"} {
		if err := hashFile(h, filepath.Join(root, name)); err != nil {
			return "", err
		}
	}
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		io.WriteString(h, line+"\n")
		parts := strings.SplitN(line, "|", 4)
		if len(parts) != 4 {
			return "", fmt.Errorf("go list: unexpected line %q", line)
		}
		dir, mod := parts[1], parts[2]
		// A module with a version is immutable in the module cache; ours
		// (no version, or replaced by a directory) are hashed by content.
		if _, repl, ok := strings.Cut(mod, "=>"); ok {
			mod = repl
		}
		if mod != "" && !strings.HasSuffix(mod, "@") {
			continue
		}
		for _, f := range strings.Split(parts[3], ",") {
			if f == "" {
				continue
			}
			if err := hashFile(h, filepath.Join(dir, f)); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(h, "%s\n", path)
	_, err = io.Copy(h, f)
	return err
}

// goTool is the go command: the one on PATH, else the official
// installation's (go test may run with a PATH that lacks it).
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// moduleRoot walks up from the working directory (a test runs in its
// package's) to the server module's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module "+Module+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("enginetest: no go.mod of " + Module + " above the working directory")
		}
		dir = parent
	}
}
