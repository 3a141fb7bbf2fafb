package main

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/internal/failpoint"
)

// buildVersion is the release's semantic version, set at link time by the
// release build (.goreleaser.yaml, docs/releasing.md):
//
//	go build -ldflags "-X main.buildVersion=1.2.3" ./cmd/rewind
//
// A leading "v" is dropped. Empty in every other build, where version
// falls back to the module's version or a development version.
var buildVersion string

// devVersion is the version of a build that is not a release: it sorts
// before every release (semver.org, rule 11).
const devVersion = "0.0.0-dev"

// semverRE is a semantic version 2.0.0 without a leading "v" (semver.org's
// own expression, without its named groups).
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// buildInfo is what version reads of a build: the link-time version and
// what the Go toolchain recorded (debug.ReadBuildInfo).
type buildInfo struct {
	linked   string // buildVersion
	module   string // the main module's version: "(devel)" unless go install'ed at a version
	revision string // vcs.revision; empty when built with -buildvcs=false or outside a checkout
	modified bool   // vcs.modified
}

func readBuildInfo() buildInfo {
	b := buildInfo{linked: buildVersion}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.module = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

// version is the build's semantic version, in this order:
//  1. the link-time version of a release build (buildVersion), as given;
//  2. the module's version when the binary was built by `go install
//     .../cmd/rewind@vX.Y.Z` (a tag or a pseudo-version), or in a
//     checkout by a Go that stamps the commit (Go 1.24 on, unless
//     -buildvcs=false: 0.0.0-<time>-<commit>[+dirty]), without its "v";
//  3. otherwise 0.0.0-dev, with the commit as build metadata when the
//     build recorded one (+<12 hex digits>, and .dirty when the tree had
//     changes): 0.0.0-dev+f7fd040a1b2c.dirty.
func (b buildInfo) version() string {
	if b.linked != "" {
		return strings.TrimPrefix(b.linked, "v")
	}
	if v := strings.TrimPrefix(b.module, "v"); semverRE.MatchString(v) {
		return v
	}
	if b.revision == "" {
		return devVersion
	}
	v := devVersion + "+" + shortRevision(b.revision)
	if b.modified {
		v += ".dirty"
	}
	return v
}

func shortRevision(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

// versionLine says which build this is: the version, the commit and
// whether the tree had changes, and the Go version and platform. Its
// first line is "rewind VERSION"; a failpoints build ends with
// failpointsLine.
func versionLine() string {
	b := readBuildInfo()
	commit := "unknown"
	if b.revision != "" {
		commit = shortRevision(b.revision)
	}
	if b.modified {
		commit += " (modified)"
	}
	line := fmt.Sprintf("rewind %s\ncommit %s\n%s %s/%s", b.version(), commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if failpoint.Available {
		line += "\n" + failpointsLine
	}
	return line
}

// failpointsLine ends the version of a binary built with -tags failpoints
// (the scenario runner looks for it).
const failpointsLine = "failpoints: built in (testing only)"

func newVersion() *cobra.Command {
	var short bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this build",
		Long: `Print the version of this build (a semantic version: the release's, or
0.0.0-dev+COMMIT for a build from a checkout), its commit and Go version.
--short prints the version alone, for scripts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if short {
				fmt.Fprintln(cmd.OutOrStdout(), readBuildInfo().version())
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
	cmd.Flags().BoolVar(&short, "short", false, "print the version alone")
	return cmd
}
