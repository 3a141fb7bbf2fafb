package npm

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFresh(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Fresh(dir); err == nil {
		t.Fatal("no lockfile: want an error")
	}
	lock := `{"packages":{"":{},"node_modules/a":{"version":"1.0.0","integrity":"sha-a"},"node_modules/opt":{"version":"1","optional":true}}}`
	write("package-lock.json", lock)
	if ok, err := Fresh(dir); ok || err != nil {
		t.Fatalf("nothing installed: %v %v", ok, err)
	}
	write("node_modules/.package-lock.json", `{"packages":{"node_modules/a":{"version":"1.0.0","integrity":"sha-a"}}}`)
	if ok, _ := Fresh(dir); ok {
		t.Fatal("a package directory is missing, yet fresh")
	}
	write("node_modules/a/package.json", `{}`)
	if ok, err := Fresh(dir); !ok || err != nil {
		t.Fatalf("installed as locked: %v %v", ok, err)
	}
	write("node_modules/.package-lock.json", `{"packages":{"node_modules/a":{"version":"1.0.1","integrity":"sha-b"}}}`)
	if ok, _ := Fresh(dir); ok {
		t.Fatal("another version installed, yet fresh")
	}
	write("node_modules/.package-lock.json", `{"packages":{"node_modules/a":{"version":"1.0.0","integrity":"sha-a"},"node_modules/x":{}}}`)
	if ok, _ := Fresh(dir); ok {
		t.Fatal("a package the lockfile does not name is installed, yet fresh")
	}
}
