// Command keyprefix is a Rewind filter module that keeps the records whose
// key starts with a prefix, compared byte for byte.
//
// Config (JSON): {"prefix":"user-1"}. "prefix" is a required string; an
// empty prefix keeps every record. The config is read as encoding/json
// decodes an object into a struct (the rule of every example, shared with
// the AssemblyScript twins): unknown fields are ignored, the last of
// repeated fields wins, null counts as absent, and a field of the wrong
// type fails rewind_init; keys match by their raw bytes.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o keyprefix.wasm .
package main

import (
	"bytes"
	"errors"

	"github.com/rewind-io/rewind/sdk/guest/filter"
	"github.com/rewind-io/rewind/sdk/guest/filter/jsonscan"
)

var prefix []byte

func init() {
	filter.OnInit(configure)
	filter.Filter(keep)
}

func configure(config []byte) error {
	set := false
	it := jsonscan.Fields(config)
	for it.Next() {
		if string(it.Key()) != "prefix" {
			continue
		}
		if set = !null(it.Value()); set {
			s, err := jsonscan.String(it.Value())
			if err != nil {
				return errors.New(`keyprefix: "prefix" must be a JSON string`)
			}
			prefix = []byte(s)
		}
	}
	if it.Err() != nil {
		return errors.New(`keyprefix: config must be a JSON object like {"prefix":"user-1"}`)
	}
	if !set {
		return errors.New(`keyprefix: config needs "prefix"`)
	}
	return nil
}

func null(v []byte) bool { return string(v) == "null" }

func keep(r filter.Record) bool { return bytes.HasPrefix(r.Key, prefix) }

func main() {}
