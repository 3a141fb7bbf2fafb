// Command redact is a Rewind transform module that replaces a top-level
// field of JSON values with a fixed string.
//
// Config (JSON): {"field":"email","with":"***"}. "field" is a required
// string, "with" an optional one that defaults to "***"; the config is read
// as keyprefix reads its (null counts as absent).
//
// For each record: a value that is not a valid JSON object drops the
// record. When the object has the field, the raw value of every top-level
// member with that raw key (duplicates included: readers of duplicate keys
// usually take the last, so leaving one would leak it), whatever its JSON
// type, is replaced by "with" encoded as a JSON string: in quotes, with '"'
// and '\' escaped by a backslash and nothing else escaped. Every other byte
// of the value is kept, and the record is delivered as a replacement
// (action 1). When the object lacks the field, the record is delivered
// unchanged (action 0). Key and headers are never changed.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o redact.wasm .
package main

import (
	"errors"

	"github.com/rewind-io/rewind/sdk/guest/filter"
	"github.com/rewind-io/rewind/sdk/guest/filter/jsonscan"
)

var (
	field string
	// replacement is "with" as a JSON string, quotes included.
	replacement []byte
	// scratch holds the last output value; the SDK copies it out before
	// the next record.
	scratch []byte
)

func init() {
	filter.OnInit(configure)
	filter.Transform(redact)
}

func configure(config []byte) error {
	haveField, with := false, "***"
	it := jsonscan.Fields(config)
	for it.Next() {
		key, v := string(it.Key()), it.Value()
		if key != "field" && key != "with" {
			continue
		}
		s, present := "", string(v) != "null"
		if present {
			var err error
			if s, err = jsonscan.String(v); err != nil {
				return errors.New(`redact: "` + key + `" must be a JSON string`)
			}
		}
		switch {
		case key == "field":
			field, haveField = s, present
		case present:
			with = s
		default:
			with = "***"
		}
	}
	if it.Err() != nil {
		return errors.New(`redact: config must be a JSON object like {"field":"email","with":"***"}`)
	}
	if !haveField {
		return errors.New(`redact: config needs "field"`)
	}
	replacement = quote(with)
	return nil
}

// quote encodes s as a JSON string, escaping only '"' and '\'.
func quote(s string) []byte {
	b := []byte{'"'}
	for i := range len(s) {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

func redact(r filter.Record) (filter.Record, bool) {
	v := r.Value
	scratch = scratch[:0]
	from, hits := 0, 0
	it := jsonscan.Fields(v)
	for it.Next() {
		if string(it.Key()) != field {
			continue
		}
		hits++
		scratch = append(scratch, v[from:it.ValueOffset()]...)
		scratch = append(scratch, replacement...)
		from = it.ValueOffset() + len(it.Value())
	}
	switch {
	case it.Err() != nil:
		return r, false
	case hits == 0:
		return r, true // r itself: delivered unchanged
	}
	scratch = append(scratch, v[from:]...)
	r.Value = scratch
	return r, true
}

func main() {}
