package scenarios_test

import (
	"testing"

	"github.com/rewind-io/rewind/scenarios"
	"github.com/rewind-io/rewind/scenarios/spec"
)

// TestBuiltinsParse: every shipped scenario file is valid, is named after
// its file, and says what it does.
func TestBuiltinsParse(t *testing.T) {
	names := scenarios.Names()
	if len(names) < 10 {
		t.Fatalf("%d built-in scenarios", len(names))
	}
	for _, n := range names {
		fn, src, ok := scenarios.File(n)
		if !ok {
			t.Fatalf("%s listed but not found", n)
		}
		s, err := spec.Parse(fn, src)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if s.Name != n || s.Description == "" {
			t.Errorf("%s: named %q, description %q", n, s.Name, s.Description)
		}
	}
	if _, _, ok := scenarios.File("../go.mod"); ok {
		t.Error("a path outside the library was served")
	}
}
