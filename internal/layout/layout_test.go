package layout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// moduleRoot walks up from the test's directory to the go.mod of the
// server's module.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

type pkg struct {
	ImportPath     string
	Dir            string
	Doc            string
	GoFiles        []string
	CgoFiles       []string
	TestGoFiles    []string
	XTestGoFiles   []string
	IgnoredGoFiles []string
}

// listPackages runs `go list -json ./...` at root and returns the packages
// by their path relative to the module ("." for the root).
func listPackages(t *testing.T, root string) (module string, pkgs map[string]pkg) {
	t.Helper()
	cmd := exec.Command("go", "list", "-m")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module = strings.TrimSpace(string(out))
	cmd = exec.Command("go", "list", "-e", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	pkgs = map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "" {
			rel = "."
		}
		pkgs[rel] = p
	}
	if len(pkgs) == 0 {
		t.Fatal("go list ./... listed no packages")
	}
	return module, pkgs
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// tableRows returns the package paths the layout table of architecture.md
// names, in order: the code spans of each row's first cell.
func tableRows(t *testing.T, root string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "<!-- layout:begin"):
			in = true
			continue
		case strings.HasPrefix(line, "<!-- layout:end"):
			in = false
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("docs/architecture.md: no layout table between <!-- layout:begin and <!-- layout:end")
	}
	return names
}

func TestLayoutTableNamesEveryPackage(t *testing.T) {
	root := moduleRoot(t)
	_, pkgs := listPackages(t, root)
	named := map[string]bool{}
	var prefixes []string
	for _, n := range tableRows(t, root) {
		if p, ok := strings.CutSuffix(n, "/..."); ok {
			prefixes = append(prefixes, p)
			covers := false
			for rel := range pkgs {
				covers = covers || rel == p || strings.HasPrefix(rel, p+"/")
			}
			if !covers {
				t.Errorf("docs/architecture.md names %q, but no package of the module is under %s", n, p)
			}
			continue
		}
		if named[n] {
			t.Errorf("docs/architecture.md names %q twice", n)
		}
		named[n] = true
		if _, ok := pkgs[n]; !ok {
			t.Errorf("docs/architecture.md names %q, which is not a package of the module (go list ./...)", n)
		}
	}
	var missing []string
	for rel := range pkgs {
		if named[rel] || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(rel, p+"/") || rel == p }) {
			continue
		}
		missing = append(missing, rel)
	}
	slices.Sort(missing)
	for _, rel := range missing {
		t.Errorf("package %s is missing from the layout table of docs/architecture.md", rel)
	}
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// isGenerated reports whether every one of files in dir is generated code.
func isGenerated(t *testing.T, dir string, files []string) bool {
	t.Helper()
	if len(files) == 0 {
		return false
	}
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !generated.Match(b) {
			return false
		}
	}
	return true
}

// docOf returns the package doc comment found in files of dir.
func docOf(t *testing.T, dir string, files []string) string {
	t.Helper()
	fset := token.NewFileSet()
	var doc []string
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			doc = append(doc, strings.TrimSpace(f.Doc.Text()))
		}
	}
	return strings.Join(doc, "\n")
}

func TestEveryPackageHasADocComment(t *testing.T) {
	root := moduleRoot(t)
	_, pkgs := listPackages(t, root)
	rels := make([]string, 0, len(pkgs))
	for rel := range pkgs {
		rels = append(rels, rel)
	}
	slices.Sort(rels)
	for _, rel := range rels {
		p := pkgs[rel]
		// The doc comment must be where `go doc` and `go list` read it:
		// a non-test file (a package of tests only gets a doc.go).
		files := slices.Concat(p.GoFiles, p.CgoFiles)
		if len(files) == 0 {
			// Only files for other platforms or build tags.
			files = p.IgnoredGoFiles
		}
		if isGenerated(t, p.Dir, files) {
			continue
		}
		doc := docOf(t, p.Dir, files)
		if doc == "" {
			t.Errorf("package %s has no package doc comment (write one, in doc.go if it is long)", rel)
			continue
		}
		if !strings.HasPrefix(doc, "Package ") && !strings.HasPrefix(doc, "Command ") {
			t.Errorf("package %s: its doc comment should start with \"Package\" or \"Command\": %q", rel, firstLine(doc))
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
