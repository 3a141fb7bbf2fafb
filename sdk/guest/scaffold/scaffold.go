// Package scaffold writes new Rewind filter projects: one key-prefix filter
// with a JSON config, a native test, and a copy of the guest SDK, in Go or
// in AssemblyScript. `rewind plugin new` calls it.
//
//	files, err := scaffold.Write("./orders", "orders", scaffold.Go)
//
// A project builds from its own files alone. The rewind module is not on
// any module proxy, so a Go project requires github.com/rewind-io/rewind
// and replaces it with ./rewind-sdk, a copy of sdk/guest/filter and
// sdk/guest/filter/jsonscan (without their tests) under a go.mod of that
// name: imports read github.com/rewind-io/rewind/sdk/guest/filter, as in
// the documentation, and `go build` and `go test` need no network. An
// AssemblyScript project carries the SDK in assembly/rewind and the SDK's
// own package-lock.json, so `npm ci` installs the exact compiler the SDK
// is tested with (that step needs the npm registry, or an npm cache).
package scaffold

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rewind-io/rewind/sdk/guest"
)

// Lang is the language of a project.
type Lang string

const (
	// Go is a Go main package built with GOOS=wasip1 GOARCH=wasm
	// -buildmode=c-shared (sdk/guest/filter).
	Go Lang = "go"
	// AssemblyScript is an npm project compiled by asc
	// (sdk/guest/assemblyscript).
	AssemblyScript Lang = "assemblyscript"
)

// GoVersion is the go directive of the projects' go.mod files: the Rewind
// module's (a test keeps them equal).
const GoVersion = "1.26.8"

// MaxNameLen bounds project names.
const MaxNameLen = 64

var (
	// ErrBadName is wrapped by the errors of New and Write for a name that
	// is not a valid project name (see CheckName).
	ErrBadName = errors.New("scaffold: bad project name")
	// ErrBadLang is wrapped for a language other than Go and AssemblyScript.
	ErrBadLang = errors.New("scaffold: unknown language")
	// ErrNotEmpty is wrapped by Write when the directory already holds
	// something: a scaffold never overwrites a file.
	ErrNotEmpty = errors.New("scaffold: directory is not empty")
)

//go:embed templates
var templates embed.FS

// CheckName reports whether name can name a project: it becomes the Go
// module path, the npm package name, the module's file name NAME.wasm and
// the suggested plugin name, so it is 1 to MaxNameLen lowercase letters,
// digits, '-' and '_', starting with a letter.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: %q: a name has 1 to %d characters", ErrBadName, name, MaxNameLen)
	}
	for i, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_')
		if !ok {
			return fmt.Errorf("%w: %q: use lowercase letters, digits, '-' and '_', starting with a letter", ErrBadName, name)
		}
	}
	return nil
}

// goReserved are the names a Go module path cannot have: the first
// elements of the standard library's import paths, where `go build` finds
// the main package ambiguous, and the go command's package patterns.
var goReserved = map[string]bool{
	"all": true, "archive": true, "arena": true, "bufio": true, "builtin": true, "bytes": true, "cmd": true,
	"cmp": true, "compress": true, "container": true, "context": true, "crypto": true, "database": true,
	"debug": true, "embed": true, "encoding": true, "errors": true, "expvar": true, "flag": true, "fmt": true,
	"go": true, "hash": true, "html": true, "image": true, "index": true, "internal": true, "io": true,
	"iter": true, "log": true, "maps": true, "math": true, "mime": true, "net": true, "os": true, "path": true,
	"plugin": true, "reflect": true, "regexp": true, "runtime": true, "simd": true, "slices": true, "sort": true,
	"std": true, "strconv": true, "strings": true, "structs": true, "sync": true, "syscall": true,
	"testing": true, "text": true, "time": true, "tool": true, "unicode": true, "unique": true, "unsafe": true,
	"vendor": true, "weak": true,
}

// New returns the files of a new project named name in lang, by
// slash-separated path relative to the project's root. Besides CheckName,
// a Go project's name must not be a standard library path (errors, go,
// crypto, ...): ErrBadName. The map and its
// slices belong to the caller.
func New(name string, lang Lang) (map[string][]byte, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	switch lang {
	case Go:
		if goReserved[name] {
			return nil, fmt.Errorf("%w: %q: the go command reads it as the standard library's (pick another name)", ErrBadName, name)
		}
		return goProject(name)
	case AssemblyScript:
		return ascProject(name)
	}
	return nil, fmt.Errorf("%w: %q (go or assemblyscript)", ErrBadLang, lang)
}

// Write writes New(name, lang) into dir, creating dir (and its parents)
// if needed, and returns the paths it wrote, sorted. It refuses a dir that
// exists and is not empty (ErrNotEmpty), and never replaces a file: one
// that appears while it writes fails the call, which leaves what it has
// written so far.
func Write(dir, name string, lang Lang) ([]string, error) {
	files, err := New(name, lang)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("scaffold: %w", err)
	case len(entries) > 0:
		return nil, fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, fmt.Errorf("scaffold: %w", err)
		}
		if err := writeNew(full, files[p]); err != nil {
			return nil, fmt.Errorf("scaffold: %w", err)
		}
	}
	return paths, nil
}

// writeNew creates path with b, failing if it exists.
func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func goProject(name string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, dir := range []string{"filter", "filter/jsonscan"} {
		if err := copySources(files, dir, "rewind-sdk/sdk/guest/"+dir, ".go"); err != nil {
			return nil, err
		}
	}
	return files, render(files, "go", map[string]string{"__NAME__": name, "__GO_VERSION__": GoVersion})
}

func ascProject(name string) (map[string][]byte, error) {
	files := map[string][]byte{}
	if err := copySources(files, "assemblyscript/assembly/rewind", "assembly/rewind", ".ts"); err != nil {
		return nil, err
	}
	version, err := assemblyscriptVersion()
	if err != nil {
		return nil, err
	}
	lock, err := guest.Sources.ReadFile("assemblyscript/package-lock.json")
	if err != nil {
		return nil, fmt.Errorf("scaffold: %w", err)
	}
	// The SDK's lockfile pins the compiler and its dependencies; only the
	// project's own name differs (a checked name needs no JSON escaping).
	files["package-lock.json"] = []byte(strings.ReplaceAll(string(lock), `"name": "@rewind-io/guest-assemblyscript"`, `"name": "`+name+`"`))
	return files, render(files, "assemblyscript", map[string]string{"__NAME__": name, "__ASSEMBLYSCRIPT_VERSION__": version})
}

// layout maps templates to their paths in a project where the path is
// not the template's name without .tmpl.
var layout = map[string]map[string]string{
	"go": {"sdk.go.mod": "rewind-sdk/go.mod", "gitignore": ".gitignore"},
	"assemblyscript": {
		"index.ts":        "assembly/index.ts",
		"filter.test.mjs": "test/filter.test.mjs",
		"gitignore":       ".gitignore",
	},
}

// render adds the templates of lang to files, with the placeholders
// replaced: templates/LANG/X.tmpl becomes X, or what layout says.
func render(files map[string][]byte, lang string, vars map[string]string) error {
	root := "templates/" + lang
	entries, err := templates.ReadDir(root)
	if err != nil {
		return fmt.Errorf("scaffold: %w", err)
	}
	var pairs []string
	for k, v := range vars {
		pairs = append(pairs, k, v)
	}
	r := strings.NewReplacer(pairs...)
	for _, e := range entries {
		b, err := templates.ReadFile(root + "/" + e.Name())
		if err != nil {
			return fmt.Errorf("scaffold: %w", err)
		}
		target := strings.TrimSuffix(e.Name(), ".tmpl")
		if p, ok := layout[lang][target]; ok {
			target = p
		}
		if _, dup := files[target]; dup {
			return fmt.Errorf("scaffold: template %s collides with a copied SDK file", target)
		}
		files[target] = []byte(r.Replace(string(b)))
	}
	return nil
}

// copySources adds the files of guest.Sources under dir ending in ext,
// tests excluded, to files under prefix.
func copySources(files map[string][]byte, dir, prefix, ext string) error {
	entries, err := guest.Sources.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("scaffold: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ext) || strings.HasSuffix(n, "_test.go") || strings.HasSuffix(n, ".test.ts") {
			continue
		}
		b, err := guest.Sources.ReadFile(dir + "/" + n)
		if err != nil {
			return fmt.Errorf("scaffold: %w", err)
		}
		files[path.Join(prefix, n)] = b
	}
	return nil
}

// assemblyscriptVersion is the compiler version the SDK's package.json
// pins, which its lockfile resolves.
func assemblyscriptVersion() (string, error) {
	b, err := guest.Sources.ReadFile("assemblyscript/package.json")
	if err != nil {
		return "", fmt.Errorf("scaffold: %w", err)
	}
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", fmt.Errorf("scaffold: the SDK's package.json: %w", err)
	}
	v := pkg.DevDependencies["assemblyscript"]
	if v == "" {
		return "", errors.New("scaffold: the SDK's package.json pins no assemblyscript version")
	}
	return v, nil
}
