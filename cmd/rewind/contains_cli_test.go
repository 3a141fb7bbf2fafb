package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rewind-io/rewind/internal/enginetest"
)

// TestReplayContains: `replay --contains` prints exactly the records whose
// key, value or a header holds the text (case-sensitive), with their own
// offsets; a failed filter's resume command keeps --contains; too long a text is refused with InvalidArgument.
func TestReplayContains(t *testing.T) {
	s := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	s.ok(t, nil, "topic", "create", "c", "--partitions", "1")
	lines := []string{
		`{"key":"k-needle","value":"0"}`,
		`{"key":"k","value":"1"}`,
		`{"key":"k","value":"a needle in 2"}`,
		`{"key":"k","value":"3 Needle"}`,
		`{"key":"k","value":"4","headers":{"h":"needle"}}`,
		`{"key":"k","value":"5","headers":{"needle-h":"x"}}`,
		`{"key":"k","value":"6"}`,
	}
	s.ok(t, []byte(strings.Join(lines, "\n")+"\n"), "publish", "c", "--input", "json")

	// The matches' offsets are not dense: parseReplay's check is not for
	// them.
	var got []uint64
	for _, line := range splitLines(t, s.ok(t, nil, "replay", "c", "--from", "earliest", "--contains", "needle", "--format", "json")) {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		got = append(got, r.Offset)
	}
	if want := []uint64{0, 2, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("--contains needle printed offsets %v, want %v", got, want)
	}

	// A failed filter's resume command keeps --contains.
	f := filterFlags{ref: "f", contains: "a needle"}
	if got, want := f.resumeCommand("c", "T", "", true), "rewind replay c --from token:T --follow --filter f --contains 'a needle'"; got != want {
		t.Errorf("resume command %q, want %q", got, want)
	}

	s.fails(t, "invalid_argument", "replay", "c", "--from", "earliest", "--contains", strings.Repeat("x", 1025))
}
