// Command jsonfield is a Rewind filter module that keeps the records whose
// value is a JSON object with a given top-level string field.
//
// Config (JSON): {"field":"type","equals":"order.created"}, both required
// strings. A record is kept when its value is a valid JSON object whose
// first top-level field with the raw key "field" is a JSON string whose raw
// content between the quotes (escapes not processed) equals "equals" byte
// for byte. A value that is not a valid JSON object, lacks the field, or
// has it with another type is dropped. See package jsonscan for what valid
// means.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o jsonfield.wasm .
package main

import (
	"bytes"
	"errors"
	"strings"

	"github.com/rewind-io/rewind/sdk/guest/filter"
	"github.com/rewind-io/rewind/sdk/guest/filter/jsonscan"
)

var field, equals string

// quoted is equals between quotes: a record can match only if its value
// holds these bytes, so a substring search drops most records before the
// full scan. It changes no outcome: the full scan still decides every
// record the search finds. The search looks for quoted's rarest byte
// (pivot) with bytes.IndexByte, which runs on the Go runtime's assembly:
// byte loops written in Go are slow in WebAssembly.
var (
	quoted []byte
	pivot  int
)

// rarity orders bytes from common to rare in JSON text (unlisted bytes
// are rarest: punctuation inside strings, upper case, ...).
const rarity = "\" ,:etaoinsrhldcumfpgwybvkxjqz0123456789{}[]"

// choosePivot returns the index in q (past the opening quote) of its
// rarest byte.
func choosePivot(q []byte) int {
	best, bestRank := 1, -1
	for i := 1; i < len(q)-1; i++ {
		rank := strings.IndexByte(rarity, q[i])
		if rank < 0 {
			rank = len(rarity)
		}
		if rank > bestRank {
			best, bestRank = i, rank
		}
	}
	return best
}

// mayMatch reports whether v contains quoted.
func mayMatch(v []byte) bool {
	c := quoted[pivot]
	for i := pivot; i < len(v); {
		j := bytes.IndexByte(v[i:], c)
		if j < 0 {
			return false
		}
		i += j
		if start := i - pivot; start+len(quoted) <= len(v) && bytes.Equal(v[start:start+len(quoted)], quoted) {
			return true
		}
		i++
	}
	return false
}

func init() {
	filter.OnInit(configure)
	filter.Filter(keep)
}

func configure(config []byte) error {
	var haveField, haveEquals bool
	it := jsonscan.Fields(config)
	for it.Next() {
		var dst *string
		var have *bool
		switch string(it.Key()) {
		case "field":
			dst, have = &field, &haveField
		case "equals":
			dst, have = &equals, &haveEquals
		default:
			continue
		}
		if *have = !null(it.Value()); *have {
			s, err := jsonscan.String(it.Value())
			if err != nil {
				return errors.New(`jsonfield: "` + string(it.Key()) + `" must be a JSON string`)
			}
			*dst = s
		}
	}
	if it.Err() != nil {
		return errors.New(`jsonfield: config must be a JSON object like {"field":"type","equals":"order.created"}`)
	}
	if !haveField || !haveEquals {
		return errors.New(`jsonfield: config needs "field" and "equals"`)
	}
	quoted = append(append(append(quoted[:0], '"'), equals...), '"')
	pivot = choosePivot(quoted)
	return nil
}

func null(v []byte) bool { return string(v) == "null" }

func keep(r filter.Record) bool {
	if !mayMatch(r.Value) {
		return false
	}
	start, end, err := jsonscan.Find(r.Value, field)
	return err == nil && start >= 0 && jsonscan.StringEquals(r.Value[start:end], equals)
}

func main() {}
