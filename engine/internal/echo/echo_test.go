package echo

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":                             `""`,
		"orders":                       `"orders"`,
		"tab\there":                    `"tab\there"`,
		strings.Repeat("a", 64):        `"` + strings.Repeat("a", 64) + `"`,
		strings.Repeat("a", 65):        `"` + strings.Repeat("a", 64) + `…" (65 bytes)`,
		strings.Repeat("a", 1e6):       `"` + strings.Repeat("a", 64) + `…" (1000000 bytes)`,
		strings.Repeat("a", 62) + "é":  `"` + strings.Repeat("a", 62) + `é"`,
		strings.Repeat("a", 63) + "é":  `"` + strings.Repeat("a", 63) + `…" (65 bytes)`,
		strings.Repeat("a", 63) + "éé": `"` + strings.Repeat("a", 63) + `…" (67 bytes)`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%.70q): %s, want %s", in, got, want)
		}
		if got := QuoteBytes([]byte(in)); got != want {
			t.Errorf("QuoteBytes(%.70q): %s, want %s", in, got, want)
		}
	}
}

// FuzzClip: a clipped message is bounded, valid UTF-8 if the message was,
// and keeps the message's start and end.
func FuzzClip(f *testing.F) {
	f.Add("short", 0)
	f.Add("é", 5000)
	f.Add("topic name \"x\": use 1 to 249 characters", 100000)
	f.Fuzz(func(t *testing.T, part string, repeat int) {
		if repeat < 0 || repeat > 1<<20 || len(part)*repeat > 8<<20 {
			return
		}
		msg := "start " + strings.Repeat(part, repeat) + " end"
		got := Clip(msg)
		if len(got) > MaxMessage+64 {
			t.Fatalf("%d bytes clipped to %d", len(msg), len(got))
		}
		if utf8.ValidString(msg) && !utf8.ValidString(got) {
			t.Fatalf("clipping broke UTF-8: %q", got)
		}
		if !strings.HasPrefix(got, "start ") || !strings.HasSuffix(got, " end") {
			t.Fatalf("clipped %q", got)
		}
		if len(msg) <= MaxMessage && got != msg {
			t.Fatalf("short message changed: %q", got)
		}
	})
}
