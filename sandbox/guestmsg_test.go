package sandbox_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/rewind-io/rewind/internal/wasmgen"
	"github.com/rewind-io/rewind/sandbox"
)

// failingModule is an ABI v1 module whose rewind_init (when init) or
// rewind_filter logs 20 lines of noise through rewind.log, then last
// (from memory at 70000), then fails.
func failingModule(init bool, last string) []byte {
	m := new(Module)
	logF := m.ImportFunc("rewind", "log", m.Type([]ValType{I32, I32}, nil))
	mem := m.Memory(2, 0, false)
	m.ExportMemory("memory", mem)
	m.Data(mem, 69000, []byte("noise"))
	m.Data(mem, 70000, []byte(last))
	var fail []byte
	for range 20 {
		fail = Body(fail, I32Const(69000), I32Const(5), OpCall, logF)
	}
	fail = Body(fail, I32Const(70000), I32Const(int32(len(last))), OpCall, logF)
	void := m.Type(nil, nil)
	ret := m.Type(nil, []ValType{I32})
	initT := m.Type([]ValType{I32}, []ValType{I32})
	filterT := m.Type([]ValType{I32, I32}, []ValType{I32})
	m.ExportFunc("rewind_abi_v1", m.Func(void, nil, []byte{OpEnd}))
	for name, v := range map[string]int32{"rewind_input": 0, "rewind_input_cap": 65536, "rewind_output": 65536, "rewind_output_cap": 3000} {
		m.ExportFunc(name, m.Func(ret, nil, Body(I32Const(v), OpEnd)))
	}
	if init {
		m.ExportFunc("rewind_init", m.Func(initT, nil, Body(fail, I32Const(1), OpEnd)))
		m.ExportFunc("rewind_filter", m.Func(filterT, nil, Body(I32Const(0), OpEnd)))
	} else {
		m.ExportFunc("rewind_init", m.Func(initT, nil, Body(I32Const(0), OpEnd)))
		m.ExportFunc("rewind_filter", m.Func(filterT, nil, Body(fail, I32Const(-1), OpEnd)))
	}
	return m.Bytes()
}

// TestGuestMessage checks that a guest's failure carries its last log
// line (even past the log's rate limit), printable and bounded.
func TestGuestMessage(t *testing.T) {
	// One line per second, a burst of 10: the 21st line is dropped from
	// the server log but still the error's message.
	r := newRuntime(t, sandbox.Limits{LogLinesPerSecond: 1})
	long := strings.Repeat("é", 400) // 800 bytes, cut at a character
	for _, c := range []struct {
		name       string
		init       bool
		last, want string
		kind       sandbox.Kind
	}{
		{"init", true, `"prefix" must be a JSON string`, `rewind_init returned 1: the module refused its config: "prefix" must be a JSON string`, sandbox.KindConfig},
		{"filter", false, "bad\nrecord\x01", `rewind_filter returned -1: bad\nrecord\x01`, sandbox.KindGuest},
		{"long", true, long, "refused its config: " + long[:sandbox.MaxGuestMessageBytes] + "…", sandbox.KindConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := compile(t, r, failingModule(c.init, c.last))
			_, err := m.NewFilter([]byte(`{}`)).Run(context.Background(), batchOf([]rec{{key: "k"}}), nil)
			if sandbox.KindOf(err) != c.kind || !strings.HasSuffix(err.Error(), c.want) {
				t.Fatalf("Run: %v\nwant a %v error ending in %q", err, c.kind, c.want)
			}
			if !utf8.ValidString(err.Error()) {
				t.Errorf("message is not valid UTF-8: %q", err)
			}
		})
	}
}
