package meter

import "testing"

// FuzzInstrument checks that Instrument never panics, fails only with its
// documented errors, and, whenever it succeeds, that wazero (with its default
// features and with every feature it has) accepts the output exactly when it
// accepts the input. The seeds are the hand-built test modules.
func FuzzInstrument(f *testing.F) {
	for _, tm := range testModules() {
		f.Add(tm.wasm)
		if out, err := InstrumentWithOptions(tm.wasm, tm.opts); err == nil {
			f.Add(out)
		}
	}
	f.Add(envModule())
	f.Add([]byte{})
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00"))
	f.Add(withBody(op(0), loop(tVoid), br(0), end_, end_))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkProperty(t, in)
	})
}
