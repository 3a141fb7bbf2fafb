package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWholeAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, data := range []string{"first", "second, longer"} {
		if err := Write(p, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != data {
			t.Fatalf("read %q %v, want %q", got, err, data)
		}
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only the file", len(ents))
	}
	if err := Write(filepath.Join(dir, "missing", "f"), nil, 0o644); err == nil {
		t.Fatal("wrote into a missing directory")
	}
}

// WriteInSteps writes the whole file whatever the step: shorter than the
// data and not dividing it, equal to it, longer, and for empty data.
func TestWriteInStepsWritesEverything(t *testing.T) {
	p := filepath.Join(t.TempDir(), "obj")
	data := []byte("0123456789abcdefghij")
	for _, c := range []struct {
		data []byte
		step int
	}{{data, 3}, {data, len(data)}, {data, 1 << 20}, {data, 0}, {nil, 3}} {
		if err := WriteInSteps(p, c.data, 0o644, c.step); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(p); err != nil || string(got) != string(c.data) {
			t.Fatalf("step %d: read %q %v, want %q", c.step, got, err, c.data)
		}
	}
}
