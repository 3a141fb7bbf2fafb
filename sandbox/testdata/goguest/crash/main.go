// Command crash is a hostile Rewind filter module, built by the sandbox's
// tests, that crashes the Go runtime on chosen records and keeps the rest:
//
//   - key "oom": asks for a 4 GiB block, which a 32-bit memory cannot
//     hold; the Go runtime prints why on stderr, then a goroutine dump,
//     then traps (wasm "unreachable").
//   - key "panic": panics with the record's value.
//   - key "late": panics only once this instance has seen more than 100
//     records, so the crash depends on earlier calls, not on the record.
package main

import "github.com/rewind-io/rewind/sdk/guest/filter"

var (
	sink []byte
	seen int
	// big is a variable, so that the compiler does not refuse the size.
	big = 1 << 32
)

func init() {
	filter.Filter(func(r filter.Record) bool {
		seen++
		switch string(r.Key) {
		case "oom":
			sink = make([]byte, big)
		case "panic":
			panic(string(r.Value))
		case "late":
			if seen > 100 {
				panic("late")
			}
		}
		return true
	})
}

func main() {}
