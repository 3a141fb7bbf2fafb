package store

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
)

func TestOpenMarksAndChecksFormat(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open(Config{Dir: "d", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("x"), nil, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(Config{Dir: "d", FS: fs}); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	// A newer layout version is refused.
	if err := db.Set([]byte("mf"), []byte{99}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(Config{Dir: "d", FS: fs}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("open with layout 99: %v, want ErrIncompatible", err)
	}
}

func TestOpenRefusesForeignStore(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("d", &pebble.Options{FS: fs, Logger: &pebbleLogger{l: hclog.NewNullLogger()}})
	if err == nil {
		db.Set([]byte("someone else's"), nil, pebble.Sync)
		db.Close()
	}
	if _, err := Open(Config{Dir: "d", FS: fs}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("open foreign store: %v, want ErrIncompatible", err)
	}
}
