package main

import (
	"strings"
	"testing"
)

// TestParseBytes: sizes with units, and what is refused with a message
// instead of wrapping: a value past int64 (--min-free-disk 10000000TiB
// once became negative and turned the disk guard off), NaN, infinities.
func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "1048576": 1 << 20, "64MiB": 64 << 20, "2 GiB": 2 << 30, "500MB": 500e6, "1.5KiB": 1536,
	} {
		got, err := parseBytes(in)
		if err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if got, err := parseBytes("8000000TiB"); err != nil || got != 8000000<<40 {
		t.Errorf("8000000TiB = %d, %v", got, err)
	}
	for _, in := range []string{"10000000TiB", "9223372036854775808", "1e30", "NaN", "Inf", "+Inf", "-1", "-Inf", "1e400", "x", "7EB"} {
		got, err := parseBytes(in)
		if err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), in) {
			t.Errorf("parseBytes(%q): %v does not name the input", in, err)
		}
	}
}
