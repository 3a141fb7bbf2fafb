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
	"errors"

	"github.com/rewind-io/rewind/sdk/guest/filter"
	"github.com/rewind-io/rewind/sdk/guest/filter/jsonscan"
)

var field, equals string

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
	return nil
}

func null(v []byte) bool { return string(v) == "null" }

func keep(r filter.Record) bool {
	start, end, err := jsonscan.Find(r.Value, field)
	return err == nil && start >= 0 && jsonscan.StringEquals(r.Value[start:end], equals)
}

func main() {}
