// Command rewind-image writes Rewind's OCI image (tools/release/image) as
// an OCI image layout, from the linux binaries a goreleaser build left in
// its dist directory (dist/artifacts.json names them):
//
//	go tool -modfile=tools/release/go.mod goreleaser release --clean --skip=publish
//	go run -C tools/release ./cmd/rewind-image -dist ../../dist -o ../../dist/oci
//
// or from binaries named on the command line:
//
//	rewind-image -bin linux/amd64=path/to/rewind -version 1.2.3 -o out
//
// The version defaults to the one in dist/metadata.json, the creation
// time to $SOURCE_DATE_EPOCH (set it to the commit's time for a
// reproducible image), else the build's date in dist/metadata.json.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-io/rewind/tools/release/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rewind-image:", err)
		os.Exit(1)
	}
}

type binFlags map[string]string

func (b binFlags) String() string { return fmt.Sprint(map[string]string(b)) }
func (b binFlags) Set(s string) error {
	platform, file, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not OS/ARCH=FILE", s)
	}
	b[platform] = file
	return nil
}

func run(args []string) error {
	fs := flag.NewFlagSet("rewind-image", flag.ContinueOnError)
	bins := binFlags{}
	fs.Var(bins, "bin", "OS/ARCH=FILE: a rewind binary for a platform (repeat for each)")
	dist := fs.String("dist", "", "a goreleaser dist directory: take its linux binaries, version and commit time")
	out := fs.String("o", "", "the OCI layout directory to write (must not exist or be empty)")
	version := fs.String("version", "", "the image's version (default: the dist directory's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return errors.New("-o is required")
	}
	cfg := image.Config{Binaries: bins, Version: *version}
	if *dist != "" {
		if err := fromDist(*dist, &cfg); err != nil {
			return err
		}
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
		}
		cfg.Created = time.Unix(sec, 0)
	}
	idx, err := image.Build(cfg)
	if err != nil {
		return err
	}
	if err := image.Write(*out, idx, cfg.Version); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: rewind %s, %d platform(s), index %s\n", *out, cfg.Version, len(cfg.Binaries), d)
	return nil
}

// fromDist fills cfg from goreleaser's artifacts.json and metadata.json
// in dir; flags given explicitly win.
func fromDist(dir string, cfg *image.Config) error {
	var artifacts []struct {
		Type   string `json:"type"`
		Path   string `json:"path"`
		Goos   string `json:"goos"`
		Goarch string `json:"goarch"`
		Extra  struct {
			ID string `json:"ID"`
		} `json:"extra"`
	}
	var meta struct {
		Version string    `json:"version"`
		Date    time.Time `json:"date"`
		Commit  string    `json:"commit"`
	}
	if err := readJSON(filepath.Join(dir, "artifacts.json"), &artifacts); err != nil {
		return err
	}
	if err := readJSON(filepath.Join(dir, "metadata.json"), &meta); err != nil {
		return err
	}
	// goreleaser writes paths relative to the directory it ran in, the
	// repository's root: dist's parent.
	root := filepath.Dir(filepath.Clean(dir))
	for _, a := range artifacts {
		if a.Type != "Binary" || a.Goos != "linux" || a.Extra.ID != "rewind" {
			continue
		}
		p := a.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		key := a.Goos + "/" + a.Goarch
		if _, set := cfg.Binaries[key]; !set {
			cfg.Binaries[key] = p
		}
	}
	if cfg.Version == "" {
		cfg.Version = meta.Version
	}
	cfg.Created = meta.Date
	return nil
}

func readJSON(file string, v any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
