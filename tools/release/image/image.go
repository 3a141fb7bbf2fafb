// Package image builds Rewind's container image without a container
// daemon, as an OCI image layout in a directory (the format `skopeo copy
// oci:DIR:TAG docker://...`, `crane push --index` and `podman load` take).
//
// The image is one layer on an empty base (no shell, no libc: rewind is
// built with CGO_ENABLED=0 and links statically):
//
//	/usr/bin/rewind              the binary, 0755
//	/etc/passwd, /etc/group      the user and group rewind (65532), so tools
//	                             that resolve names find one
//	/var/lib/rewind              the data directory, 0700, owned by 65532
//	/tmp                         1777 (os.TempDir)
//
// and a config that runs, as user 65532:65532,
//
//	/usr/bin/rewind serve --data /var/lib/rewind
//
// with /var/lib/rewind as its working directory and volume and 7070/tcp
// exposed. The default command listens on 127.0.0.1 (serve's safe
// default), which nothing outside the container reaches: a deployment
// gives its own arguments (deploy/helm/rewind; docs/releasing.md).
//
// Build is deterministic: the same binaries, version and time give the
// same digests.
package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and runs (see the package comment).
const (
	BinaryPath = "/usr/bin/rewind"
	DataDir    = "/var/lib/rewind"
	UID        = 65532
	Port       = "7070/tcp"
)

// Entrypoint and Cmd are the image's default process.
var (
	Entrypoint = []string{BinaryPath}
	Cmd        = []string{"serve", "--data", DataDir}
)

// Config says what to build. Every field is required.
type Config struct {
	// Binaries maps a platform, "linux/amd64" or "linux/arm64" (OS/ARCH
	// as Go spells them), to the path of a rewind binary built for it.
	// Each must be a statically linked ELF file for that architecture.
	Binaries map[string]string
	// Version is the release's semantic version: the image's
	// org.opencontainers.image.version label, and the tag (ref.name) of
	// the index in the layout.
	Version string
	// Created is the image's creation time and every file's modification
	// time; the commit's time keeps builds reproducible.
	Created time.Time
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if len(c.Binaries) == 0 {
		errs = append(errs, errors.New("image: no binaries"))
	}
	for _, p := range slices.Sorted(maps.Keys(c.Binaries)) {
		if _, ok := elfMachine[p]; !ok {
			errs = append(errs, fmt.Errorf("image: platform %q: want linux/amd64 or linux/arm64", p))
			continue
		}
		if err := checkBinary(c.Binaries[p], p); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Version == "" {
		errs = append(errs, errors.New("image: no version"))
	}
	if c.Created.IsZero() {
		errs = append(errs, errors.New("image: no creation time"))
	}
	return errors.Join(errs...)
}

var elfMachine = map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}

// checkBinary refuses what would not run in the image: a file that is not
// an ELF executable for the platform, or one that needs a dynamic loader.
func checkBinary(file, platform string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("image: %s binary: %w", platform, err)
	}
	defer f.Close()
	if f.Machine != elfMachine[platform] {
		return fmt.Errorf("image: %s binary %s is for %s", platform, file, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("image: %s binary %s is dynamically linked (build it with CGO_ENABLED=0)", platform, file)
		}
	}
	return nil
}

// Build returns the multi-platform image index of c: one image per
// binary.
func Build(c Config) (v1.ImageIndex, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var idx v1.ImageIndex = empty.Index
	for _, p := range slices.Sorted(maps.Keys(c.Binaries)) {
		img, err := buildImage(c, p)
		if err != nil {
			return nil, err
		}
		goos, arch, _ := strings.Cut(p, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: arch}},
		})
	}
	return mutate.IndexMediaType(idx, types.OCIImageIndex), nil
}

func buildImage(c Config, platform string) (v1.Image, error) {
	bin, err := os.ReadFile(c.Binaries[platform])
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	layerTar, err := rootfs(bin, c.Created)
	if err != nil {
		return nil, err
	}
	// An uncompressed layer: gzip's output depends on its implementation,
	// and registries compress on the wire anyway.
	layer := static.NewLayer(layerTar, types.OCIUncompressedLayer)
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, _ = strings.Cut(platform, "/")
	cf.Created = v1.Time{Time: c.Created.UTC()}
	user := fmt.Sprintf("%d:%d", UID, UID)
	cf.Config = v1.Config{
		User:         user,
		Entrypoint:   Entrypoint,
		Cmd:          Cmd,
		WorkingDir:   DataDir,
		Env:          []string{"PATH=/usr/bin", "HOME=" + DataDir},
		Volumes:      map[string]struct{}{DataDir: {}},
		ExposedPorts: map[string]struct{}{Port: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "rewind",
			"org.opencontainers.image.version":  c.Version,
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.source":   "https://github.com/rewind-io/rewind",
		},
	}
	cf.History = []v1.History{{Created: cf.Created, CreatedBy: "tools/release/image: rewind " + c.Version}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// rootfs is the layer's tar: the files of the package comment.
func rootfs(bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime = mtime.UTC().Truncate(time.Second)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nrewind:x:%d:%d:rewind:%s:/sbin/nologin\n", UID, UID, DataDir)
	group := fmt.Sprintf("root:x:0:\nrewind:x:%d:\n", UID)
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("usr", 0o755, 0) },
		func() error { return dir("usr/bin", 0o755, 0) },
		func() error { return file("usr/bin/rewind", 0o755, bin) },
		func() error { return dir("var", 0o755, 0) },
		func() error { return dir("var/lib", 0o755, 0) },
		func() error { return dir("var/lib/rewind", 0o700, UID) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return buf.Bytes(), nil
}

// Write writes idx to dir as an OCI image layout (dir must not exist, or
// be empty), its index.json naming idx with the tag version.
func Write(dir string, idx v1.ImageIndex, version string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("image: %s is not empty", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version})); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}
