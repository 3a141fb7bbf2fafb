// Command project is a Rewind transform module that keeps only some
// top-level fields of JSON values.
//
// Config (JSON): {"fields":["id","type"]}, a required array of strings
// (possibly empty), read as keyprefix reads its config.
//
// For each record: a value that is not a valid JSON object drops the
// record. Otherwise the record is delivered as a replacement (action 1)
// whose value is '{', then the top-level fields whose raw key is listed,
// in the order they appear in the input, each written "key":value with the
// key's and the value's raw bytes exactly as in the input, joined by ',',
// then '}', with no whitespace. A listed key that occurs more than once is
// written each time. Key and headers are unchanged.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o project.wasm .
package main

import (
	"errors"

	"github.com/rewind-io/rewind/sdk/guest/filter"
	"github.com/rewind-io/rewind/sdk/guest/filter/jsonscan"
)

var (
	fields []string
	// scratch holds the last output value; the SDK copies it out before
	// the next record.
	scratch []byte
)

func init() {
	filter.OnInit(configure)
	filter.Transform(project)
}

func configure(config []byte) error {
	have := false
	it := jsonscan.Fields(config)
	for it.Next() {
		if string(it.Key()) != "fields" {
			continue
		}
		if have = string(it.Value()) != "null"; have {
			list, err := jsonscan.Strings(it.Value())
			if err != nil {
				return errors.New(`project: "fields" must be a JSON array of strings`)
			}
			fields = list
		}
	}
	if it.Err() != nil {
		return errors.New(`project: config must be a JSON object like {"fields":["id","type"]}`)
	}
	if !have {
		return errors.New(`project: config needs "fields"`)
	}
	return nil
}

func project(r filter.Record) (filter.Record, bool) {
	scratch = append(scratch[:0], '{')
	it := jsonscan.Fields(r.Value)
	for it.Next() {
		if !listed(it.Key()) {
			continue
		}
		if len(scratch) > 1 {
			scratch = append(scratch, ',')
		}
		scratch = append(scratch, '"')
		scratch = append(scratch, it.Key()...)
		scratch = append(scratch, '"', ':')
		scratch = append(scratch, it.Value()...)
	}
	if it.Err() != nil {
		return r, false
	}
	scratch = append(scratch, '}')
	r.Value = scratch
	return r, true
}

// listed reports whether key is one of fields.
func listed(key []byte) bool {
	for _, f := range fields {
		if f == string(key) {
			return true
		}
	}
	return false
}

func main() {}
