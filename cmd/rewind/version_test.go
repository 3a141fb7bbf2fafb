package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

func TestVersionOfBuild(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		b    buildInfo
		want string
	}{
		{"release", buildInfo{linked: "1.4.0", module: "(devel)", revision: "f7fd040a1b2c3d4e"}, "1.4.0"},
		{"release tag with v", buildInfo{linked: "v1.4.0-rc.1"}, "1.4.0-rc.1"},
		{"go install at a tag", buildInfo{module: "v1.3.2"}, "1.3.2"},
		{"go install at a commit", buildInfo{module: "v0.0.0-20261207134725-f7fd040a1b2c"}, "0.0.0-20261207134725-f7fd040a1b2c"},
		{"checkout", buildInfo{module: "(devel)", revision: "f7fd040a1b2c3d4e5f60"}, "0.0.0-dev+f7fd040a1b2c"},
		{"checkout with changes", buildInfo{module: "(devel)", revision: "f7fd040a1b2c3d4e5f60", modified: true}, "0.0.0-dev+f7fd040a1b2c.dirty"},
		{"no vcs info (-buildvcs=false)", buildInfo{module: "(devel)"}, "0.0.0-dev"},
		{"no build info", buildInfo{}, "0.0.0-dev"},
	} {
		got := c.b.version()
		if got != c.want {
			t.Errorf("%s: version() = %q; want %q", c.name, got, c.want)
		}
		if !semverRE.MatchString(got) {
			t.Errorf("%s: version() = %q is not a semantic version", c.name, got)
		}
	}
	for _, bad := range []string{"1.2", "v1.2.3", "01.2.3", "1.2.3-", "1.2.3+a..b", "(devel)"} {
		if semverRE.MatchString(bad) {
			t.Errorf("semverRE accepts %q", bad)
		}
	}
}

// TestVersionLinkedAtBuild builds rewind as the release build does (the
// version through -ldflags -X, CGO_ENABLED=0) and runs `rewind version`.
func TestVersionLinkedAtBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/rewind")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "rewind")
	const v = "3.14.15-rc.2+build.7"
	build := exec.Command(goCommand(), "build", "-ldflags", "-X main.buildVersion=v"+v, "-o", bin, enginetest.Module+"/cmd/rewind")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("rewind version: %v", err)
	}
	if first, _, _ := strings.Cut(string(out), "\n"); first != "rewind "+v {
		t.Errorf("rewind version printed %q first; want %q", first, "rewind "+v)
	}
	if !strings.Contains(string(out), runtime.Version()) {
		t.Errorf("rewind version printed %q; want the Go version %s in it", out, runtime.Version())
	}
	short, err := exec.Command(bin, "version", "--short").Output()
	if err != nil || string(short) != v+"\n" {
		t.Errorf("rewind version --short: %q, %v; want %q", short, err, v+"\n")
	}
}

// TestVersionOfDevBuild: the test's own build (no -ldflags) says it is a
// development version: 0.0.0-dev when Go stamped no commit
// (-buildvcs=false, or outside a checkout), else the pseudo-version Go
// gives the checkout's commit (Go 1.24 on: 0.0.0-<time>-<commit>, with
// +dirty for a changed tree). Either sorts before every release.
func TestVersionOfDevBuild(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, nil, "version", "--short")
	v := strings.TrimSpace(r.stdout)
	if r.code != 0 || !semverRE.MatchString(v) || !(strings.HasPrefix(v, devVersion) || pseudoRE.MatchString(v)) {
		t.Errorf("rewind version --short: exit %d, %q; want a semantic version starting %s, or a Go pseudo-version", r.code, r.stdout, devVersion)
	}
}

// pseudoRE is Go's pseudo-version of a commit with no tag before it,
// without its "v".
var pseudoRE = regexp.MustCompile(`^0\.0\.0-\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// goCommand is the go command of the toolchain running the test.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}
