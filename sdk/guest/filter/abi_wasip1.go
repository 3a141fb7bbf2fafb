//go:build wasip1

package filter

import "unsafe"

// The ABI v1 exports (sdk/guest/ABI.md). They are thin: every
// decision is in portable code (dispatch.go), tested natively. Being in
// this package, they are part of any module that imports it; a module's
// main package only needs an empty func main.

//go:wasmexport rewind_abi_v1
func rewindABIv1() {}

//go:wasmexport rewind_input
func rewindInput() uint32 {
	in, _ := buffers()
	return address(in)
}

//go:wasmexport rewind_input_cap
func rewindInputCap() uint32 {
	in, _ := buffers()
	return uint32(len(in))
}

//go:wasmexport rewind_output
func rewindOutput() uint32 {
	_, out := buffers()
	return address(out)
}

//go:wasmexport rewind_output_cap
func rewindOutputCap() uint32 {
	_, out := buffers()
	return uint32(len(out))
}

//go:wasmexport rewind_init
func rewindInit(configLen int32) int32 {
	return initCall(int(configLen))
}

//go:wasmexport rewind_filter
func rewindFilter(count, n int32) int32 {
	return filterCall(int(count), int(n))
}

// address is b's address in linear memory. Go's heap does not move
// objects, and guest keeps the buffers reachable, so it stays valid.
func address(b []byte) uint32 {
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// hostLog is rewind.log(ptr i32, len i32): a string parameter of a
// wasmimport is passed as its address and length.
//
//go:wasmimport rewind log
//go:noescape
func hostLog(msg string)

func writeLog(msg string) { hostLog(msg) }
