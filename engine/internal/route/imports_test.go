package route

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsNothingAbove: imports go api -> broker -> route, never back.
// The router sees the broker only through Leadership and AddressBook, and
// the broker implements nothing for the api edge.
func TestImportsNothingAbove(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	const mod = "github.com/rewind-io/rewind/"
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case mod + "engine", mod + "engine/internal/broker", mod + "engine/internal/api", mod + "raftlog/transport":
			t.Errorf("route depends on %s", dep)
		}
	}
}
