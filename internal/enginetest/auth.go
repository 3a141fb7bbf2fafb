package enginetest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine"
)

// BootstrapToken waits (up to 30 s) for the auth bootstrap of a node
// started with Config.Auth.Enabled and returns the superuser token it wrote to
// its data directory, failing the test unless the file's mode is 0600.
// The node's Dir must be on the OS's filesystem (no enginehook FS).
func (n *Node) BootstrapToken(tb testing.TB) string {
	tb.Helper()
	select {
	case <-n.AuthReady():
	case <-time.After(30 * time.Second):
		tb.Fatal("auth bootstrap did not finish")
	}
	path := filepath.Join(n.Config.Dir, engine.BootstrapTokenFile)
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		tb.Fatalf("bootstrap token file mode %v, want 0600", fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Buffer is an io.Writer a test reads while a node writes to it: an audit
// log (Config.Auth.AuditLog), a logger's output. Safe for concurrent use; the
// zero value is empty.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
