//go:build unix

package enginetest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// prune keeps the build just made, and of the others only the most
// recently used that are younger than binaryTTL, binaryKept builds in all.
func TestPruneKeepsTheNewestBuilds(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	mk := func(name string, age time.Duration) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".lock"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, name), now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	// b00 is the newest, b11 the oldest; "new" was just built but marked
	// used long ago (it must stay anyway), "stale" is past the TTL.
	for i := range 12 {
		mk(fmt.Sprintf("b%02d", i), time.Duration(i)*time.Minute)
	}
	mk("new", 48*time.Hour)
	prune(dir, "new")

	var left []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{"new", "new.lock"}
	for i := range binaryKept - 1 {
		want = append(want, fmt.Sprintf("b%02d", i), fmt.Sprintf("b%02d.lock", i))
	}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Fatalf("after prune: %v, want %v", left, want)
	}

	// A build past the TTL goes even when there is room.
	for i := range 4 {
		os.Remove(filepath.Join(dir, fmt.Sprintf("b%02d", i)))
	}
	mk("stale", binaryTTL+time.Hour)
	prune(dir, "new")
	if _, err := os.Stat(filepath.Join(dir, "stale")); !os.IsNotExist(err) {
		t.Fatalf("a build unused for over %v is still there (%v)", binaryTTL, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b04")); err != nil {
		t.Fatalf("a build used a few minutes ago is gone: %v", err)
	}
}
