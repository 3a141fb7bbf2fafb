package stream

import (
	"bytes"

	"github.com/rewind-io/rewind/engine/internal/record"
)

// MaxContains is the longest Options.Contains a stream accepts (bytes).
const MaxContains = 1024

// contains reports whether r's key, value, or a header's key or value
// holds sub. It is the built-in substring search of Options.Contains: no
// module, no copy, evaluated on the record as the reader decoded it.
func contains(r *record.Record, sub []byte) bool {
	if bytes.Contains(r.Key, sub) || bytes.Contains(r.Value, sub) {
		return true
	}
	for _, h := range r.Headers {
		if bytes.Contains(h.Key, sub) || bytes.Contains(h.Value, sub) {
			return true
		}
	}
	return false
}
