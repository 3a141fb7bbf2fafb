package scaffold_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/sdk/guest/build"
	"github.com/rewind-io/rewind/sdk/guest/scaffold"
)

// offlineEnv makes a go command fail rather than reach a module proxy or
// download a toolchain.
func offlineEnv() []string {
	return append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly")
}

func TestGoVersionIsTheRepository(t *testing.T) {
	b, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	if m == nil || string(m[1]) != scaffold.GoVersion {
		t.Fatalf("go.mod says go %s; scaffold.GoVersion is %s", m[1], scaffold.GoVersion)
	}
}

// TestGoProjectBuildsOffline writes a Go project and checks that it is
// gofmt-clean and vets, tests and builds with no module proxy.
func TestGoProjectBuildsOffline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders")
	paths, err := scaffold.Write(dir, "orders", scaffold.Go)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".gitignore", "go.mod", "main.go", "main_test.go", "rewind-sdk/go.mod",
		"rewind-sdk/sdk/guest/filter/dispatch.go", "rewind-sdk/sdk/guest/filter/jsonscan/jsonscan.go"} {
		if !slices.Contains(paths, want) {
			t.Errorf("project has no %s: %v", want, paths)
		}
	}
	files, err := scaffold.New("orders", scaffold.Go)
	if err != nil {
		t.Fatal(err)
	}
	checkPlaceholders(t, files)
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") && strings.HasPrefix(p, "rewind-sdk/") {
			t.Errorf("the SDK copy has a test file, %s (its imports are not in the project)", p)
		}
		if !strings.HasSuffix(p, ".go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if f, err := format.Source(src); err != nil || !bytes.Equal(f, src) {
			t.Errorf("%s is not gofmt-clean (%v)", p, err)
		}
	}
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, offlineEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in the project: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	wasm, err := build.Go(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		t.Fatalf("build.Go returned %d bytes that are not a module", len(wasm))
	}
}

// TestAssemblyScriptProject checks what an npm project needs: a
// package.json whose build script writes build/NAME.wasm and a lockfile
// that names the project and pins the compiler. The CLI tests build it.
func TestAssemblyScriptProject(t *testing.T) {
	files, err := scaffold.New("orders", scaffold.AssemblyScript)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".gitignore", "package.json", "package-lock.json", "tsconfig.json", "assembly/index.ts",
		"assembly/rewind/index.ts", "assembly/rewind/abi.ts", "test/filter.test.mjs"} {
		if _, ok := files[want]; !ok {
			t.Errorf("project has no %s", want)
		}
	}
	var pkg struct {
		Name            string            `json:"name"`
		Scripts         map[string]string `json:"scripts"`
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(files["package.json"], &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	if pkg.Name != "orders" || !strings.Contains(pkg.Scripts["build"], "--outFile build/orders.wasm --runtime stub -O3 --noAssert") || pkg.Scripts["test"] == "" {
		t.Errorf("package.json: %+v", pkg)
	}
	var lock struct {
		Name     string `json:"name"`
		Packages map[string]struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(files["package-lock.json"], &lock); err != nil {
		t.Fatalf("package-lock.json: %v", err)
	}
	asc := pkg.DevDependencies["assemblyscript"]
	if lock.Name != "orders" || lock.Packages[""].Name != "orders" || asc == "" || lock.Packages["node_modules/assemblyscript"].Version != asc {
		t.Errorf("package-lock.json names %q/%q and assemblyscript %q; package.json wants %q",
			lock.Name, lock.Packages[""].Name, lock.Packages["node_modules/assemblyscript"].Version, asc)
	}
	checkPlaceholders(t, files)
}

// checkPlaceholders checks that the templates' placeholders were all
// replaced.
func checkPlaceholders(t *testing.T, files map[string][]byte) {
	t.Helper()
	placeholder := regexp.MustCompile(`__[A-Z_]+__`)
	for p, b := range files {
		if m := placeholder.Find(b); m != nil && !strings.HasPrefix(p, "assembly/rewind/") && !strings.HasPrefix(p, "rewind-sdk/sdk/") {
			t.Errorf("%s has the placeholder %s", p, m)
		}
	}
}

func TestWriteRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, lang := range []scaffold.Lang{scaffold.Go, scaffold.AssemblyScript} {
		if _, err := scaffold.Write(dir, "orders", lang); !errors.Is(err, scaffold.ErrNotEmpty) {
			t.Errorf("%s into a non-empty dir: %v, want ErrNotEmpty", lang, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a refused scaffold wrote files: %v", entries)
	}
	// An empty directory is fine.
	empty := t.TempDir()
	if _, err := scaffold.Write(empty, "orders", scaffold.AssemblyScript); err != nil {
		t.Errorf("into an empty dir: %v", err)
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"orders", "a", "key-prefix_2", strings.Repeat("a", scaffold.MaxNameLen)} {
		if err := scaffold.CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Orders", "2fast", "-x", "a.b", "a/b", "a b", "../x", strings.Repeat("a", scaffold.MaxNameLen+1)} {
		if err := scaffold.CheckName(bad); !errors.Is(err, scaffold.ErrBadName) {
			t.Errorf("CheckName(%q): %v, want ErrBadName", bad, err)
		}
	}
	for _, std := range []string{"errors", "go", "crypto", "std"} {
		if _, err := scaffold.New(std, scaffold.Go); !errors.Is(err, scaffold.ErrBadName) {
			t.Errorf("Go project %q: %v, want ErrBadName", std, err)
		}
	}
	if _, err := scaffold.New("errors", scaffold.AssemblyScript); err != nil {
		t.Errorf("AssemblyScript project errors: %v", err)
	}
	if _, err := scaffold.New("orders", "rust"); !errors.Is(err, scaffold.ErrBadLang) {
		t.Errorf("New in rust: %v, want ErrBadLang", err)
	}
}

// TestGoReservedCoversTheStandardLibrary checks the reserved names
// against the toolchain running the test: every top-level directory of
// GOROOT/src is a path the go command would confuse a module with.
func TestGoReservedCoversTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(strings.TrimSpace(string(out)), "src"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == "testdata" || scaffold.CheckName(name) != nil {
			continue
		}
		if _, err := scaffold.New(name, scaffold.Go); !errors.Is(err, scaffold.ErrBadName) {
			t.Errorf("Go project %q (a standard library path): %v, want ErrBadName", name, err)
		}
	}
}
