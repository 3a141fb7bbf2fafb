package wasmgen

// ABIModule is a minimal hand-built module of Rewind's filter ABI v1: one
// exported memory of pages pages (input at 0, output at 64 KiB, 64 KiB
// each), rewind_init returning 0 and rewind_filter with filterBody (locals
// 0 = count, 1 = len). extra, run first, may add to the module (imports
// must come first). The sandbox's hostile-module tests and the scenario
// runner's upload bombs start from it.
func ABIModule(pages uint32, filterBody []byte, extra func(m *Module)) []byte {
	m := new(Module)
	if extra != nil {
		extra(m)
	}
	mem := m.Memory(pages, 0, false)
	m.ExportMemory("memory", mem)
	void := m.Type(nil, nil)
	ret := m.Type(nil, []ValType{I32})
	initT := m.Type([]ValType{I32}, []ValType{I32})
	filterT := m.Type([]ValType{I32, I32}, []ValType{I32})
	m.ExportFunc("rewind_abi_v1", m.Func(void, nil, []byte{OpEnd}))
	for _, e := range []struct {
		name string
		v    int32
	}{{"rewind_input", 0}, {"rewind_input_cap", 65536}, {"rewind_output", 65536}, {"rewind_output_cap", 65536}} {
		m.ExportFunc(e.name, m.Func(ret, nil, Body(I32Const(e.v), OpEnd)))
	}
	m.ExportFunc("rewind_init", m.Func(initT, nil, Body(I32Const(0), OpEnd)))
	m.ExportFunc("rewind_filter", m.Func(filterT, nil, filterBody))
	return m.Bytes()
}
