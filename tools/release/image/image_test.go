package image

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/rewind-io/rewind/tools/release/internal/testbin"
)

// TestImage builds rewind as the release does (static, version linked in),
// writes its image as an OCI layout, reads the layout back, unpacks the
// image's layers into a root directory and runs the binary found there:
// `rewind version`, and the image's default command (`serve --data`, with
// a loopback --listen and a temporary data directory) answering
// CreateTopic and ListTopics.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs the image's linux binary")
	}
	const version = "1.2.3-test.1"
	tmp := t.TempDir()
	bin := testbin.Build(t, tmp, version)
	platform := "linux/" + runtime.GOARCH
	created := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	cfg := Config{Binaries: map[string]string{platform: bin}, Version: version, Created: created}

	idx, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "oci")
	if err := Write(dir, idx, version); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, idx, version); err == nil {
		t.Error("Write into a layout that exists: no error")
	}
	again, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same input: index digests %s and %s; want the same (reproducible)", d1, d2)
	}

	img := readLayout(t, dir, version, platform)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(created) {
		t.Errorf("config: os %q, architecture %q, created %s; want linux, %s, %s", cf.OS, cf.Architecture, cf.Created, runtime.GOARCH, created)
	}
	if diff := cmp.Diff([]string{"65532:65532", "/usr/bin/rewind", "serve --data /var/lib/rewind", "/var/lib/rewind"},
		[]string{cf.Config.User, strings.Join(cf.Config.Entrypoint, " "), strings.Join(cf.Config.Cmd, " "), cf.Config.WorkingDir}); diff != "" {
		t.Errorf("config: user, entrypoint, cmd, working dir (-want +got):\n%s", diff)
	}
	if _, ok := cf.Config.Volumes[DataDir]; !ok {
		t.Errorf("config: volumes %v; want %s", cf.Config.Volumes, DataDir)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("config: version label %q; want %q", got, version)
	}

	root := filepath.Join(tmp, "root")
	headers := unpack(t, img, root)
	for name, want := range map[string]struct {
		mode int64
		uid  int
	}{
		"usr/bin/rewind": {0o755, 0}, "var/lib/rewind": {0o700, UID}, "tmp": {0o1777, 0}, "etc/passwd": {0o644, 0},
	} {
		h, ok := headers[name]
		if !ok {
			t.Errorf("image has no %s", name)
			continue
		}
		if h.Mode&0o7777 != want.mode || h.Uid != want.uid {
			t.Errorf("%s: mode %o, uid %d; want %o, %d", name, h.Mode&0o7777, h.Uid, want.mode, want.uid)
		}
	}
	if passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd")); err != nil || !strings.Contains(string(passwd), "rewind:x:65532:65532:") {
		t.Errorf("etc/passwd: %q, %v; want the user rewind, 65532", passwd, err)
	}
	rewind := filepath.Join(root, cf.Config.Entrypoint[0])
	if err := checkBinary(rewind, platform); err != nil {
		t.Error(err)
	}

	out, err := exec.Command(rewind, "version").Output()
	if first, _, _ := strings.Cut(string(out), "\n"); err != nil || first != "rewind "+version {
		t.Errorf("rewind version from the image: %q, %v; want first line %q", out, err, "rewind "+version)
	}

	serveDefault(t, rewind, cf.Config.Cmd, filepath.Join(tmp, "data"))
}

// TestConfigValidate: what cannot make a runnable image is refused, every
// problem at once.
func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "rewind.sh")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Config{Binaries: map[string]string{"linux/amd64": notELF, "windows/amd64": notELF, "linux/arm64": filepath.Join(dir, "missing")}}.Validate()
	if err == nil {
		t.Fatal("Validate: nil")
	}
	for _, want := range []string{"linux/amd64 binary", "platform \"windows/amd64\"", "linux/arm64 binary", "no version", "no creation time"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to say %q", err, want)
		}
	}
	if _, err := Build(Config{}); err == nil || !strings.Contains(err.Error(), "no binaries") {
		t.Errorf("Build(Config{}): %v; want no binaries", err)
	}
	// A dynamically linked executable (the go command itself may be
	// static, so use the test's own binary only when it has a loader).
	if self, err := os.Executable(); err == nil && checkBinary(self, "linux/"+runtime.GOARCH) != nil {
		if err := checkBinary(self, "linux/"+runtime.GOARCH); !strings.Contains(err.Error(), "dynamically linked") {
			t.Errorf("checkBinary(test binary): %v", err)
		}
	}
}

// readLayout opens the layout in dir as a registry client would: the
// index tagged version, then its image for platform.
func readLayout(t *testing.T, dir, version, platform string) v1.Image {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("index.json: %+v; want one index tagged %s", tm.Manifests, version)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range im.Manifests {
		if m.Platform != nil && m.Platform.OS+"/"+m.Platform.Architecture == platform {
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("index: no image for %s in %+v", platform, im.Manifests)
	return nil
}

// unpack writes the image's filesystem (its layers, flattened) under
// root and returns each entry's header by path.
func unpack(t *testing.T, img v1.Image, root string) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	headers := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			t.Fatalf("layer entry %q leaves the root", h.Name)
		}
		headers[name] = h
		dst := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, os.FileMode(h.Mode&0o777))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("layer entry %q: type %q; the image has only directories and files", h.Name, h.Typeflag)
		}
	}
	return headers
}

// serveDefault runs the image's default command with its data directory
// replaced by data and a loopback --listen, calls it, and stops it with
// SIGTERM: it must exit 0 (a clean shutdown).
func serveDefault(t *testing.T, rewind string, cmdArgs []string, data string) {
	t.Helper()
	args := slices.Clone(cmdArgs)
	i := slices.Index(args, DataDir)
	if i < 0 {
		t.Fatalf("default command %q has no %s", cmdArgs, DataDir)
	}
	args[i] = data
	addr := testbin.FreeLoopback(t)
	p := testbin.Start(t, rewind, append(args, "--listen", addr)...)
	base := "http://" + addr
	p.WaitReady(t, nil, base)
	testbin.Post(t, nil, "", base+"/rewind.v1.TopicService/CreateTopic", `{"name":"orders","config":{"partitions":2}}`)
	if body := testbin.Post(t, nil, "", base+"/rewind.v1.TopicService/ListTopics", `{}`); !strings.Contains(body, `"orders"`) {
		t.Errorf("ListTopics: %s; want the topic orders", body)
	}
	p.Stop(t)
	if _, err := os.Stat(data); err != nil {
		t.Errorf("data directory: %v", err)
	}
}
