// Command testsummary reads `go test -json` on stdin and prints what a
// person wants from a long run: one line per package as it finishes, the
// output of every failing test (and of a package that failed outside its
// tests: a build error, a panic, a timeout), and at the end how many tests
// ran and how they ended. It exits 1 when anything failed, 2 on bad input.
//
//	go test -json ./... | go run -C sdk/tools ./testsummary
//
// .ci/run uses it. Lines that are not JSON events pass through unchanged.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one test2json event (go doc test2json).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Elapsed    float64
	Output     string
}

// maxOutput bounds the output kept per test: the end of it, where a
// failure is reported.
const maxOutput = 256 << 10

type key struct{ pkg, test string }

type summary struct {
	out io.Writer

	output map[key]*strings.Builder
	// Per package: tests that ended, by result.
	ran    map[string]int
	failed []key

	tests, topLevel, passed, fails, skipped int
	pkgOK, pkgFail, pkgNoTests              int
	failedPkgs                              []string
	buildFailed                             bool
}

func main() {
	s := &summary{out: os.Stdout, output: map[key]*strings.Builder{}, ran: map[string]int{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(s.out, string(line))
			continue
		}
		s.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if s.report() {
		os.Exit(1)
	}
}

func (s *summary) add(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
		return
	case "build-fail":
		s.buildFailed = true
		return
	}
	k := key{e.Package, e.Test}
	switch e.Action {
	case "output":
		b := s.output[k]
		if b == nil {
			b = new(strings.Builder)
			s.output[k] = b
		}
		if b.Len() > maxOutput {
			rest := b.String()[b.Len()-maxOutput/2:]
			b.Reset()
			b.WriteString("[... earlier output cut ...]\n")
			b.WriteString(rest)
		}
		b.WriteString(e.Output)
	case "pass", "fail", "skip":
		if e.Test == "" {
			s.endPackage(e)
			return
		}
		s.tests++
		s.ran[e.Package]++
		if !strings.Contains(e.Test, "/") {
			s.topLevel++
		}
		switch e.Action {
		case "pass":
			s.passed++
			delete(s.output, k)
		case "skip":
			s.skipped++
			delete(s.output, k)
		case "fail":
			s.fails++
			s.failed = append(s.failed, k)
			s.printOutput(fmt.Sprintf("FAIL %s %s (%.2fs)", e.Package, e.Test, e.Elapsed), s.output[k])
			delete(s.output, k)
		}
	}
}

// endPackage prints a package's line, and its own output if it failed
// without a failing test (a build error, a panic, a timeout, TestMain).
func (s *summary) endPackage(e event) {
	k := key{e.Package, ""}
	own := s.output[k]
	delete(s.output, k)
	n := s.ran[e.Package]
	switch e.Action {
	case "pass":
		s.pkgOK++
		fmt.Fprintf(s.out, "ok   %s %.1fs, %s\n", e.Package, e.Elapsed, plural(n, "test"))
	case "skip":
		s.pkgNoTests++
	case "fail":
		s.pkgFail++
		s.failedPkgs = append(s.failedPkgs, e.Package)
		failedTests := 0
		for _, f := range s.failed {
			if f.pkg == e.Package {
				failedTests++
			}
		}
		if failedTests == 0 {
			s.printOutput("FAIL "+e.Package+" (outside its tests)", own)
		}
		// Tests that never ended (a panic or timeout killed the binary).
		var open []string
		for k := range s.output {
			if k.pkg == e.Package {
				open = append(open, k.test)
			}
		}
		sort.Strings(open)
		for _, t := range open {
			s.printOutput("FAIL "+e.Package+" "+t+" (did not finish)", s.output[key{e.Package, t}])
			delete(s.output, key{e.Package, t})
		}
		fmt.Fprintf(s.out, "FAIL %s %.1fs, %s\n", e.Package, e.Elapsed, plural(n, "test"))
	}
}

func (s *summary) printOutput(title string, b *strings.Builder) {
	fmt.Fprintf(s.out, "---- %s\n", title)
	if b == nil {
		return
	}
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "=== RUN") || strings.HasPrefix(t, "=== PAUSE") || strings.HasPrefix(t, "=== CONT") || t == "" {
			continue
		}
		fmt.Fprint(s.out, l)
		if !strings.HasSuffix(l, "\n") {
			fmt.Fprintln(s.out)
		}
	}
}

// report prints the totals and says whether anything failed.
func (s *summary) report() bool {
	fmt.Fprintf(s.out, "\n%s ran (%d top-level): %d passed, %d failed, %d skipped\n",
		plural(s.tests, "test"), s.topLevel, s.passed, s.fails, s.skipped)
	fmt.Fprintf(s.out, "packages: %d ok, %d failed, %d without tests\n", s.pkgOK, s.pkgFail, s.pkgNoTests)
	if len(s.failed) > 0 {
		fmt.Fprintln(s.out, "failed tests:")
		for _, f := range s.failed {
			fmt.Fprintf(s.out, "  %s %s\n", f.pkg, f.test)
		}
	}
	if len(s.failedPkgs) > 0 {
		fmt.Fprintln(s.out, "failed packages:")
		for _, p := range s.failedPkgs {
			fmt.Fprintf(s.out, "  %s\n", p)
		}
	}
	return s.fails > 0 || s.pkgFail > 0 || s.buildFailed
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
