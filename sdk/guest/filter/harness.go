package filter

import (
	"errors"
	"strconv"
)

// Host limits that a Harness applies as the server does by default.
const (
	// DefaultMaxRecordsPerCall is the server's default max_records_per_call.
	DefaultMaxRecordsPerCall = 256
	// MaxOutputsPerInput is the server's default max_outputs_per_input.
	MaxOutputsPerInput = 16
)

// Harness runs the module's registered function natively, the way the
// server runs the built module: records are encoded into the input buffer,
// rewind_filter's code path processes them (the same Go code the wasm
// exports call), and the outputs are decoded and validated as the host
// does. It lets a filter's own package `go test` it without WebAssembly:
//
//	func TestKeepsOrders(t *testing.T) {
//		h, err := filter.NewHarness([]byte(`{"type":"order"}`))
//		if err != nil {
//			t.Fatal(err)
//		}
//		out, err := h.Run([]filter.Record{{Value: []byte(`{"type":"order"}`)}})
//		...
//	}
//
// The module's state is global, as it is in WebAssembly: one Harness is in
// effect at a time (the latest NewHarness's config), and a Harness must not
// be used from several goroutines or by parallel tests.
type Harness struct {
	// MaxRecordsPerCall bounds the records of one call, as the server's
	// max_records_per_call; 0 means DefaultMaxRecordsPerCall.
	MaxRecordsPerCall int

	logs []string
}

// NewHarness calls rewind_init with config as the host would and returns
// the OnInit callback's error, if any. From then on Log lines go to the
// Harness (see Logs) instead of standard error.
func NewHarness(config []byte) (*Harness, error) {
	h := &Harness{}
	logHook = func(msg string) { h.logs = append(h.logs, msg) }
	in, _ := buffers()
	if len(config) > len(in) {
		return nil, errors.New("filter: harness: config of " + strconv.Itoa(len(config)) + " bytes is larger than the input buffer")
	}
	copy(in, config)
	if err := initialize(len(config)); err != nil {
		return nil, err
	}
	return h, nil
}

// Logs returns the lines logged since NewHarness.
func (h *Harness) Logs() []string { return h.logs }

// Output is one record the subscriber receives, as decoded from the
// module's output.
type Output struct {
	// Index is the delivered record's index in the slice given to Run.
	Index int
	// Replaced is false for action 0 (the input delivered unchanged) and
	// true for action 1 (a replacement).
	Replaced bool
	// Record is what is delivered: a copy of the input for action 0, the
	// replacement with the input's Offset and Time for action 1. Its bytes
	// belong to the caller.
	Record Record
}

// Run processes records as the server would: in calls of at most
// MaxRecordsPerCall records that fit the input buffer, halving a call when
// the module reports its output buffer full. It returns the outputs in
// order, or an error if the module fails (with its last log line), emits
// a malformed output, or cannot fit a single record's input or output.
func (h *Harness) Run(records []Record) ([]Output, error) {
	var outs []Output
	for start := 0; start < len(records); {
		count, err := h.fit(records[start:], start)
		if err != nil {
			return outs, err
		}
		for {
			b, err := h.call(records[start : start+count])
			if errors.Is(err, errFull) && count > 1 {
				count /= 2
				continue
			}
			if err != nil {
				return outs, errors.New("filter: harness: records " + strconv.Itoa(start) + ".." + strconv.Itoa(start+count-1) + ": " + err.Error())
			}
			if outs, err = decodeOutputs(outs, b, records, start, count); err != nil {
				return outs, err
			}
			break
		}
		start += count
	}
	return outs, nil
}

// Prepare encodes records as one call and returns a function that runs
// that call again each time, without encoding or decoding anything: for
// benchmarks and allocation tests of the function itself. The records must
// fit one call; run reports the module's failure or a full output buffer.
func (h *Harness) Prepare(records []Record) (run func() error, err error) {
	count, err := h.fit(records, 0)
	if err != nil {
		return nil, err
	}
	if count < len(records) {
		return nil, errors.New("filter: harness: " + strconv.Itoa(len(records)) + " records do not fit one call")
	}
	n := encode(records)
	return func() error {
		_, err := h.result(filterCall(len(records), n))
		return err
	}, nil
}

var errFull = errors.New("output buffer full")

// fit returns how many of records, from index base of Run's slice, fit one
// call.
func (h *Harness) fit(records []Record, base int) (int, error) {
	in, _ := buffers()
	limit := h.MaxRecordsPerCall
	if limit <= 0 {
		limit = DefaultMaxRecordsPerCall
	}
	size, count := 0, 0
	for count < len(records) && count < limit {
		size += encodedSize(records[count])
		if size > len(in) {
			break
		}
		count++
	}
	if count == 0 && len(records) > 0 {
		return 0, errors.New("filter: harness: record " + strconv.Itoa(base) + " does not fit the input buffer")
	}
	return count, nil
}

// call encodes records into the input buffer and runs rewind_filter.
func (h *Harness) call(records []Record) ([]byte, error) {
	return h.result(filterCall(len(records), encode(records)))
}

func encode(records []Record) int {
	in, _ := buffers()
	b := in[:0]
	for _, r := range records {
		b = appendRecord(b, r)
	}
	return len(b) // fit checked that b stayed within in
}

// result interprets a return code as the host does.
func (h *Harness) result(code int32) ([]byte, error) {
	_, out := buffers()
	switch {
	case code == codeFull:
		return nil, errFull
	case code < 0:
		msg := "module failed (rewind_filter returned " + strconv.Itoa(int(code)) + ")"
		if len(h.logs) > 0 {
			msg += ": " + h.logs[len(h.logs)-1]
		}
		return nil, errors.New(msg)
	case int(code) > len(out):
		return nil, errors.New("module reported " + strconv.Itoa(int(code)) + " output bytes, more than its buffer")
	}
	return out[:code], nil
}

// decodeOutputs validates and decodes the outputs b of the call that held
// records[base:base+count], appending them to outs.
func decodeOutputs(outs []Output, b []byte, records []Record, base, count int) ([]Output, error) {
	last, perInput := -1, 0
	for p := 0; p < len(b); {
		at := p
		bad := func(what string) ([]Output, error) {
			return outs, errors.New("filter: harness: malformed output at byte " + strconv.Itoa(at) + ": " + what)
		}
		if len(b)-p < outputFixed {
			return bad("truncated")
		}
		idx, action := le32(b[p:]), b[p+4]
		p += outputFixed
		switch {
		case uint64(idx) >= uint64(count):
			return bad("input index " + strconv.FormatUint(uint64(idx), 10) + " out of range")
		case int(idx) < last:
			return bad("input index decreases")
		case int(idx) == last:
			perInput++
		default:
			last, perInput = int(idx), 1
		}
		if perInput > MaxOutputsPerInput {
			return bad("more than " + strconv.Itoa(MaxOutputsPerInput) + " outputs for one input")
		}
		in := records[base+int(idx)]
		o := Output{Index: base + int(idx)}
		switch action {
		case actionKeep:
			o.Record = clone(in)
		case actionReplace:
			var r Record
			var ok bool
			if r.Key, p, ok = cut(b, p); !ok {
				return bad("key length")
			}
			if r.Value, p, ok = cut(b, p); !ok {
				return bad("value length")
			}
			if r.Headers, p, ok = cutHeaders(b, p); !ok {
				return bad("headers")
			}
			r.Offset, r.Time = in.Offset, in.Time
			o.Record, o.Replaced = clone(r), true
		default:
			return bad("action " + strconv.Itoa(int(action)))
		}
		outs = append(outs, o)
	}
	return outs, nil
}

// clone copies r's bytes.
func clone(r Record) Record {
	r.Key = append([]byte{}, r.Key...)
	r.Value = append([]byte{}, r.Value...)
	r.Headers.enc = append([]byte(nil), r.Headers.enc...)
	return r
}
