// Command sample is a Rewind filter module that keeps one record in n by
// offset: those whose offset % n == 0. Being a function of the offset
// alone, the sample is the same however the host batches records and
// wherever a replay starts.
//
// Config (JSON): {"n":10}. "n" is required, an integer from 1 to 2^63-1
// written without sign, fraction or exponent (the AssemblyScript twin reads
// an i64); the config is read as keyprefix reads its.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sample.wasm .
package main

import (
	"errors"
	"math"

	"github.com/rewind-io/rewind/sdk/guest/filter"
	"github.com/rewind-io/rewind/sdk/guest/filter/jsonscan"
)

// n is the sampling period. Invariant after init: n >= 1.
var n uint64

func init() {
	filter.OnInit(configure)
	filter.Filter(keep)
}

func configure(config []byte) error {
	n = 0
	it := jsonscan.Fields(config)
	for it.Next() {
		if string(it.Key()) != "n" {
			continue
		}
		if n = 0; string(it.Value()) != "null" {
			v, err := jsonscan.Uint(it.Value())
			if err != nil || v == 0 || v > math.MaxInt64 {
				return errors.New(`sample: "n" must be an integer from 1 to 2^63-1`)
			}
			n = v
		}
	}
	if it.Err() != nil {
		return errors.New(`sample: config must be a JSON object like {"n":10}`)
	}
	if n == 0 {
		return errors.New(`sample: config needs "n"`)
	}
	return nil
}

func keep(r filter.Record) bool { return r.Offset%n == 0 }

func main() {}
