package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOpenTwiceSaysTheDirectoryIsInUse: a second open of a data directory
// names it and says it is in use, instead of "resource temporarily
// unavailable" (issue 13, item 13).
func TestOpenTwiceSaysTheDirectoryIsInUse(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Config{Dir: dir, CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = Open(Config{Dir: dir, CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
	var l *LockedError
	if !errors.As(err, &l) || !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v, want a LockedError naming %s", err, dir)
	}
}

// TestLockedDirectoryNamesItsHolder runs a second process (this test binary)
// that holds a data directory open: opening it here says which process
// holds it.
func TestLockedDirectoryNamesItsHolder(t *testing.T) {
	if dir := os.Getenv("REWIND_STORE_LOCK_HOLDER"); dir != "" {
		db, err := Open(Config{Dir: dir, CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin) // hold it until the parent lets go
		db.Close()
		os.Exit(0)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockedDirectoryNamesItsHolder$")
	cmd.Env = append(os.Environ(), "REWIND_STORE_LOCK_HOLDER="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("holder: %q, %v", line, err)
	}
	_, err = Open(Config{Dir: dir, CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
	var l *LockedError
	if !errors.As(err, &l) || l.ThisProcess || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("open of a held directory: %v, want a LockedError naming %s", err, dir)
	}
	if want := fmt.Sprintf("(pid %d)", cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Fatalf("%v: want it to name the holder %s", err, want)
	}
}
