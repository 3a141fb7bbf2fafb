// Command header is a Rewind filter module that keeps the records carrying
// a given header value.
//
// Config (JSON): {"header":"source","equals":"web"}, both required strings (read as
// keyprefix reads its config).
// A record is kept when some header (any of them, if the key repeats) has
// exactly that key and exactly that value, byte for byte.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o header.wasm .
package main

import (
	"errors"

	"github.com/rewind-io/rewind/sdk/guest/filter"
	"github.com/rewind-io/rewind/sdk/guest/filter/jsonscan"
)

var header, equals string

func init() {
	filter.OnInit(configure)
	filter.Filter(keep)
}

func configure(config []byte) error {
	var haveHeader, haveEquals bool
	it := jsonscan.Fields(config)
	for it.Next() {
		var dst *string
		var have *bool
		switch string(it.Key()) {
		case "header":
			dst, have = &header, &haveHeader
		case "equals":
			dst, have = &equals, &haveEquals
		default:
			continue
		}
		if *have = !null(it.Value()); *have {
			s, err := jsonscan.String(it.Value())
			if err != nil {
				return errors.New(`header: "` + string(it.Key()) + `" must be a JSON string`)
			}
			*dst = s
		}
	}
	if it.Err() != nil {
		return errors.New(`header: config must be a JSON object like {"header":"source","equals":"web"}`)
	}
	if !haveHeader || !haveEquals {
		return errors.New(`header: config needs "header" and "equals"`)
	}
	return nil
}

func null(v []byte) bool { return string(v) == "null" }

func keep(r filter.Record) bool {
	for k, v := range r.Headers.All() {
		if string(k) == header && string(v) == equals {
			return true
		}
	}
	return false
}

func main() {}
