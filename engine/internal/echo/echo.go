// Package echo bounds the user input that error messages repeat. An error
// names what was wrong with a request by quoting it, but a request may
// carry a megabyte-long topic name: the answer would be a megabyte too, and
// the log line with it. Every error that quotes a client's string passes it
// through Quote; the API edge passes every message through Clip as well,
// for the errors built elsewhere.
package echo

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxQuoted is how many bytes of a string Quote keeps.
const MaxQuoted = 64

// Quote returns s quoted as with %q. A string longer than MaxQuoted bytes
// is cut after at most MaxQuoted bytes (at a character boundary) and says
// how long it was: "aaaa…" (1000000 bytes).
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(cut(s, MaxQuoted)+"…") + fmt.Sprintf(" (%d bytes)", len(s))
}

// QuoteBytes is Quote of a byte string (a key, an idempotency key),
// without copying more than it keeps.
func QuoteBytes(b []byte) string {
	if len(b) <= MaxQuoted {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(cut(string(b[:MaxQuoted+1]), MaxQuoted)+"…") + fmt.Sprintf(" (%d bytes)", len(b))
}

// MaxMessage is the longest message Clip lets through, in bytes.
const MaxMessage = 1024

// Clip bounds an error message to about MaxMessage bytes. A longer one
// keeps its beginning (what failed) and its end (usually what to do
// instead), with the number of bytes left out between them.
func Clip(msg string) string {
	if len(msg) <= MaxMessage {
		return msg
	}
	head := cut(msg, MaxMessage/2)
	tail := msg[len(msg)-MaxMessage/4:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s … [%d bytes left out] … %s", head, len(msg)-len(head)-len(tail), tail)
}

// cut returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
