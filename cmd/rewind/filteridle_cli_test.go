package main

import (
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestServeRefusesBadFilterIdleMemory checks --filter-idle-memory-mib's
// bounds: a negative value (or one that would wrap as bytes) is refused,
// naming the flag.
func TestServeRefusesBadFilterIdleMemory(t *testing.T) {
	for _, v := range []string{"-1", "1048577"} {
		r := runCLI(t, nil, nil, "serve", "--data", t.TempDir(), "--listen", enginetest.FreeAddr(t), "--filter-idle-memory-mib", v)
		if r.code == 0 || !strings.Contains(r.stderr, "--filter-idle-memory-mib") {
			t.Errorf("--filter-idle-memory-mib %s: exit %d, stderr %q", v, r.code, r.stderr)
		}
	}
}
