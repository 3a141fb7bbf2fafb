package filter

import (
	"errors"
	"strconv"
)

// Buffer sizes, in bytes.
const (
	// DefaultBufferSize is the size of the input and of the output buffer
	// unless SetBufferSizes says otherwise.
	DefaultBufferSize = 2 << 20
	// MinBufferSize and MaxBufferSize bound what SetBufferSizes accepts.
	MinBufferSize = 64
	MaxBufferSize = 1 << 30
)

// Return codes of rewind_filter (sdk/guest/ABI.md, "Return codes and
// errors"); n >= 0 is a count of output bytes.
const (
	codeFailed = -1
	codeFull   = -2
)

// guest is the module's one registration and its buffers. WebAssembly
// modules are single-threaded and the host calls one export at a time, so
// nothing here is locked; natively the same holds by contract (see
// Harness).
var guest module

type module struct {
	filter    func(Record) bool
	transform func(Record) (Record, bool)
	onInit    func(config []byte) error
	// inSize and outSize are the sizes SetBufferSizes chose; 0 means
	// DefaultBufferSize.
	inSize, outSize int
	// in and out are allocated by buffers on the host's first use and
	// never replaced (the host reads their addresses once). Registration
	// is closed once they exist.
	in, out []byte
	// ready is set by a successful rewind_init.
	ready bool
}

// Filter registers fn as the module's filter: it is called once per record
// and the record is delivered, unchanged, when fn returns true. Call it
// once, from an init function. It panics if fn is nil, if a filter or
// transform is already registered, or if the host has started.
//
// fn must not retain r's slices or modify their bytes (see Record), and
// should not allocate: it runs once per record.
func Filter(fn func(r Record) bool) {
	checkRegister("Filter", fn == nil)
	guest.filter = fn
}

// Transform registers fn as the module's transform: it is called once per
// record; when it returns false the record is dropped, when it returns true
// the returned record is delivered in its place. Returning r itself (Key,
// Value and Headers the very slices passed in) delivers the stored record
// unchanged, without copying. Otherwise the returned Key, Value and Headers
// are copied out as soon as fn returns, so fn may build them in a buffer it
// reuses from call to call; Offset and Time are ignored (the host keeps the
// input's). Call it once, from an init function; it panics as Filter does.
func Transform(fn func(r Record) (Record, bool)) {
	checkRegister("Transform", fn == nil)
	guest.transform = fn
}

func checkRegister(what string, isNil bool) {
	switch {
	case isNil:
		panic("filter: " + what + " with a nil function")
	case guest.in != nil:
		panic("filter: " + what + " after the host started; call it from an init function")
	case guest.filter != nil || guest.transform != nil:
		panic("filter: " + what + ": a filter or transform is already registered; a module has one")
	}
}

// OnInit registers fn to receive the replay's configuration (the bytes the
// subscriber supplied, JSON by convention; empty if none) before any
// record. fn may keep config. A non-nil error fails the replay; its text
// goes to the server log. Call it at most once, from an init function; it
// panics if fn is nil, on a second call, or if the host has started.
func OnInit(fn func(config []byte) error) {
	switch {
	case fn == nil:
		panic("filter: OnInit with a nil function")
	case guest.in != nil:
		panic("filter: OnInit after the host started; call it from an init function")
	case guest.onInit != nil:
		panic("filter: OnInit called twice")
	}
	guest.onInit = fn
}

// SetBufferSizes sets the sizes in bytes of the input buffer (which bounds
// the records of one call, and the config) and of the output buffer (which
// bounds what one call emits; when full, the host retries with fewer
// records). Both default to DefaultBufferSize and must lie in
// [MinBufferSize, MaxBufferSize]. Call it from an init function: the
// buffers are allocated when the host first asks for their addresses, and
// it panics after that or on a size out of range.
func SetBufferSizes(input, output int) {
	switch {
	case input < MinBufferSize || input > MaxBufferSize || output < MinBufferSize || output > MaxBufferSize:
		panic("filter: SetBufferSizes: sizes must be in [" + strconv.Itoa(MinBufferSize) + ", " + strconv.Itoa(MaxBufferSize) + "]")
	case guest.in != nil:
		panic("filter: SetBufferSizes after the host started; call it from an init function")
	}
	guest.inSize, guest.outSize = input, output
}

// buffers returns the input and output buffers, allocating them on first
// use.
func buffers() (in, out []byte) {
	if guest.in == nil {
		guest.in = make([]byte, sizeOr(guest.inSize))
		guest.out = make([]byte, sizeOr(guest.outSize))
	}
	return guest.in, guest.out
}

func sizeOr(n int) int {
	if n == 0 {
		return DefaultBufferSize
	}
	return n
}

// initCall is rewind_init: 0 on success, 1 (with a log line) on failure.
func initCall(configLen int) int32 {
	if err := initialize(configLen); err != nil {
		Log(err.Error())
		return 1
	}
	return 0
}

// initialize runs the OnInit callback on a copy of input[:configLen].
func initialize(configLen int) (err error) {
	in, _ := buffers()
	guest.ready = false
	defer func() {
		if p := recover(); p != nil {
			err = errors.New("filter: panic in OnInit: " + describe(p))
		}
	}()
	switch {
	case configLen < 0 || configLen > len(in):
		return errors.New("filter: rewind_init: config length " + strconv.Itoa(configLen) + " outside the input buffer")
	case guest.filter == nil && guest.transform == nil:
		return errors.New("filter: no function registered: call filter.Filter or filter.Transform from an init function")
	}
	if guest.onInit != nil {
		config := append([]byte{}, in[:configLen]...)
		if err := guest.onInit(config); err != nil {
			return errors.New("filter: init: " + err.Error())
		}
	}
	guest.ready = true
	return nil
}

// filterCall is rewind_filter: it runs the registered function over the
// count records in input[:n] and returns the number of output bytes, or
// codeFailed (after a log line) or codeFull.
func filterCall(count, n int) (code int32) {
	in, out := buffers()
	defer func() {
		if p := recover(); p != nil {
			Log("filter: panic: " + describe(p))
			code = codeFailed
		}
	}()
	switch {
	case !guest.ready:
		Log("filter: rewind_filter before a successful rewind_init")
		return codeFailed
	case count < 0 || n < 0 || n > len(in):
		Log("filter: rewind_filter: count " + strconv.Itoa(count) + " or length " + strconv.Itoa(n) + " out of range")
		return codeFailed
	}
	w := output{b: out}
	var p int
	var ok bool
	if guest.filter != nil {
		p, ok = runFilter(guest.filter, in[:n], count, &w)
	} else {
		p, ok = runTransform(guest.transform, in[:n], count, &w)
	}
	switch {
	case !ok:
		return codeFull
	case p < 0:
		Log("filter: rewind_filter: malformed record at input byte " + strconv.Itoa(-p-1))
		return codeFailed
	case p != n:
		Log("filter: rewind_filter: " + strconv.Itoa(n-p) + " bytes after the last of " + strconv.Itoa(count) + " records")
		return codeFailed
	}
	return int32(w.n)
}

// runFilter and runTransform are the per-record loops. They return the
// input offset after the last record, or -1-offset of a malformed record,
// and false if the output buffer filled up.
func runFilter(fn func(Record) bool, in []byte, count int, w *output) (int, bool) {
	p := 0
	for i := range count {
		r, next, ok := nextRecord(in, p)
		if !ok {
			return -1 - p, true
		}
		p = next
		if fn(r) && !w.keep(i) {
			return p, false
		}
	}
	return p, true
}

func runTransform(fn func(Record) (Record, bool), in []byte, count int, w *output) (int, bool) {
	p := 0
	for i := range count {
		r, next, ok := nextRecord(in, p)
		if !ok {
			return -1 - p, true
		}
		p = next
		out, deliver := fn(r)
		if !deliver {
			continue
		}
		if unchanged(r, out) {
			ok = w.keep(i)
		} else {
			ok = w.replace(i, out)
		}
		if !ok {
			return p, false
		}
	}
	return p, true
}

// describe renders a recovered panic value without fmt (which would pull
// os, and with it WASI file imports, into every module).
func describe(p any) string {
	switch v := p.(type) {
	case error:
		return v.Error()
	case string:
		return v
	case interface{ String() string }:
		return v.String()
	case int:
		return strconv.Itoa(v)
	}
	return "a panic value of a type without a text form"
}
