package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func upload(name, module string) *Upload {
	s := sha256.Sum256([]byte(module))
	return &Upload{Name: name, Module: []byte(module), SHA256: hex.EncodeToString(s[:]), UploadTime: int64(len(module))}
}

func apply(t *testing.T, db *pebble.DB, r *Registry, fn func(w *pebble.Batch) error) error {
	t.Helper()
	w := db.NewBatch()
	defer w.Close()
	if err := fn(w); err != nil {
		return err
	}
	if err := w.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	r.Publish()
	return nil
}

func refs(ps []*Plugin) []string {
	var out []string
	for _, p := range ps {
		out = append(out, Ref{Name: p.Name, Version: p.Version}.String()+"="+p.SHA256[:8])
	}
	return out
}

// TestRegistry applies uploads and deletes, and checks what readers see,
// which bytes are stored, and that a reopened registry is the same.
func TestRegistry(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	prefix := []byte("mw")
	r, err := Open(db, prefix)
	if err != nil {
		t.Fatal(err)
	}
	a, b := upload("f", "module-a"), upload("f", "module-b")
	var p *Plugin
	var unchanged bool
	mustApply := func(fn func(w *pebble.Batch) error) {
		t.Helper()
		if err := apply(t, db, r, fn); err != nil {
			t.Fatal(err)
		}
	}
	mustApply(func(w *pebble.Batch) (err error) { p, unchanged, err = r.ApplyUpload(w, a); return })
	if p.Version != 1 || unchanged {
		t.Fatalf("first upload: %+v, unchanged %v", p, unchanged)
	}
	mustApply(func(w *pebble.Batch) (err error) { p, unchanged, err = r.ApplyUpload(w, a); return })
	if p.Version != 1 || !unchanged {
		t.Fatalf("same bytes again: %+v, unchanged %v; want version 1 unchanged", p, unchanged)
	}
	mustApply(func(w *pebble.Batch) (err error) { p, _, err = r.ApplyUpload(w, b); return })
	mustApply(func(w *pebble.Batch) (err error) { p, _, err = r.ApplyUpload(w, a); return }) // a again, after b: a new version
	if p.Version != 3 {
		t.Fatalf("a after b: version %d, want 3", p.Version)
	}
	g := upload("g", "module-a") // the same bytes under another name
	mustApply(func(w *pebble.Batch) (err error) { _, _, err = r.ApplyUpload(w, g); return })

	want := []string{"f@1=" + a.SHA256[:8], "f@2=" + b.SHA256[:8], "f@3=" + a.SHA256[:8], "g@1=" + a.SHA256[:8]}
	if got := refs(r.List("")); len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("list %v, want %v", got, want)
	}
	for ref, wantV := range map[string]uint32{"f": 3, "f@2": 2, "g": 1} {
		rf, err := ParseRef(ref)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := r.Resolve(rf); err != nil || p.Version != wantV {
			t.Errorf("resolve %s: %+v, %v; want version %d", ref, p, err, wantV)
		}
	}
	if p, err := r.Resolve(Ref{SHA256: b.SHA256}); err != nil || p.Version != 2 {
		t.Errorf("resolve by sha: %+v, %v", p, err)
	}

	// Deleting f@2 removes b's bytes (nothing else refers to them);
	// deleting f keeps a's, which g still uses.
	mustApply(func(w *pebble.Batch) error { _, err := r.ApplyDelete(w, &Delete{Name: "f", Version: 2}); return err })
	if _, err := r.Module(b.SHA256); !errors.Is(err, ErrNotFound) {
		t.Errorf("bytes of a deleted module: %v, want ErrNotFound", err)
	}
	mustApply(func(w *pebble.Batch) error { _, err := r.ApplyDelete(w, &Delete{Name: "f"}); return err })
	if m, err := r.Module(a.SHA256); err != nil || string(m) != "module-a" {
		t.Errorf("bytes still used by g: %q, %v", m, err)
	}
	if err := apply(t, db, r, func(w *pebble.Batch) error { _, err := r.ApplyDelete(w, &Delete{Name: "f"}); return err }); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete again: %v, want ErrNotFound", err)
	}
	// Versions are never reused.
	mustApply(func(w *pebble.Batch) (err error) { p, _, err = r.ApplyUpload(w, b); return })
	if p.Version != 4 {
		t.Errorf("upload after deleting every version: version %d, want 4", p.Version)
	}

	// A reopened registry sees the same.
	before := refs(r.List(""))
	r2, err := Open(db, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if after := refs(r2.List("")); len(after) != len(before) || after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("after reopen %v, before %v", after, before)
	}
	w := db.NewBatch()
	if p, _, err := r2.ApplyUpload(w, a); err != nil || p.Version != 5 {
		t.Errorf("next version after reopen: %+v, %v; want 5", p, err)
	}
	w.Close()
}

func TestParseRef(t *testing.T) {
	sha := "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
	for _, c := range []struct {
		in   string
		want Ref
		ok   bool
	}{
		{"orders", Ref{Name: "orders"}, true},
		{"orders@12", Ref{Name: "orders", Version: 12}, true},
		{"a.b_c-D", Ref{Name: "a.b_c-D"}, true},
		{"sha256:" + sha, Ref{SHA256: sha}, true},
		{"sha256:" + "AB" + sha[2:], Ref{SHA256: sha}, true},
		{"", Ref{}, false},
		{"orders@0", Ref{}, false},
		{"orders@x", Ref{}, false},
		{"a@1@2", Ref{}, false},
		{"bad name", Ref{}, false},
		{"sha256:abc", Ref{}, false},
		{"sha256:" + sha[:63] + "g", Ref{}, false},
	} {
		got, err := ParseRef(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrBadRef) {
			t.Errorf("ParseRef(%q): %v is not ErrBadRef", c.in, err)
		}
		if err == nil && got.String() != c.in && got.SHA256 == "" {
			t.Errorf("String() = %q, want %q", got.String(), c.in)
		}
	}
}
