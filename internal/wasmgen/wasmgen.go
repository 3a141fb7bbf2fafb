// Package wasmgen builds small WebAssembly binaries by hand, for tests.
//
// It knows the binary layout of a module (sections, vectors, names, LEB128)
// and nothing about validity: it writes what it is told, so a test can build a
// hostile module as easily as a correct one. A typical use:
//
//	var m wasmgen.Module
//	t := m.Type([]wasmgen.ValType{wasmgen.I32}, []wasmgen.ValType{wasmgen.I32})
//	m.ImportFunc("wasi_snapshot_preview1", "sched_yield", m.Type(nil, nil))
//	m.Memory(1, 2, true)
//	f := m.Func(t, nil, wasmgen.Body(
//		wasmgen.OpLocalGet, 0, wasmgen.I32Const(1), wasmgen.OpI32Add, wasmgen.OpEnd))
//	m.ExportFunc("inc", f)
//	m.ExportMemory("memory", 0)
//	wasm := m.Bytes()
//
// Indexes returned by the builder are positions in the module's index spaces
// (imports first), so all imports must be added before any definition of the
// same kind; the builder panics otherwise, since that is a bug in the test.
// For shapes the Module cannot express (sections out of order, wrong sizes,
// truncated input) use Header, Section and the LEB128 helpers directly.
//
// A Module is not safe for concurrent use.
package wasmgen

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ValType is a value type as encoded in the binary format.
type ValType byte

// The value types of WebAssembly 2.0.
const (
	I32       ValType = 0x7f
	I64       ValType = 0x7e
	F32       ValType = 0x7d
	F64       ValType = 0x7c
	V128      ValType = 0x7b
	FuncRef   ValType = 0x70
	ExternRef ValType = 0x6f
)

// Section ids.
const (
	SecCustom    byte = 0
	SecType      byte = 1
	SecImport    byte = 2
	SecFunction  byte = 3
	SecTable     byte = 4
	SecMemory    byte = 5
	SecGlobal    byte = 6
	SecExport    byte = 7
	SecStart     byte = 8
	SecElement   byte = 9
	SecCode      byte = 10
	SecData      byte = 11
	SecDataCount byte = 12
	SecTag       byte = 13
)

// External kinds, as used by imports and exports.
const (
	KindFunc   byte = 0
	KindTable  byte = 1
	KindMemory byte = 2
	KindGlobal byte = 3
	KindTag    byte = 4
)

// Local declares Count locals of one type in a function body.
type Local struct {
	Count uint32
	Type  ValType
}

// Module accumulates the parts of a module; Bytes encodes it. The zero value
// is an empty module.
type Module struct {
	types   [][]byte
	imports [][]byte
	funcs   []uint32
	codes   [][]byte
	tables  [][]byte
	mems    [][]byte
	globals [][]byte
	exports [][]byte
	elems   [][]byte
	datas   [][]byte
	customs [][]byte

	importedFuncs, importedTables, importedMems, importedGlobals uint32

	hasStart bool
	start    uint32

	// OmitDataCount leaves out the data count section, which Bytes writes
	// whenever the module has data segments.
	OmitDataCount bool
}

// Type adds a function type and returns its index. Types are not
// deduplicated.
func (m *Module) Type(params, results []ValType) uint32 {
	b := []byte{0x60}
	b = appendValTypes(b, params)
	b = appendValTypes(b, results)
	m.types = append(m.types, b)
	return uint32(len(m.types) - 1)
}

func appendValTypes(b []byte, ts []ValType) []byte {
	b = AppendULEB(b, uint64(len(ts)))
	for _, t := range ts {
		b = append(b, byte(t))
	}
	return b
}

func (m *Module) addImport(module, name string, kind byte, desc []byte) {
	b := AppendName(nil, module)
	b = AppendName(b, name)
	b = append(b, kind)
	m.imports = append(m.imports, append(b, desc...))
}

// ImportFunc imports a function of type typ and returns its function index.
func (m *Module) ImportFunc(module, name string, typ uint32) uint32 {
	if len(m.funcs) > 0 {
		panic("wasmgen: ImportFunc after Func")
	}
	m.addImport(module, name, KindFunc, ULEB(uint64(typ)))
	m.importedFuncs++
	return m.importedFuncs - 1
}

// ImportTable imports a table and returns its table index.
func (m *Module) ImportTable(module, name string, elem ValType, min, max uint32, hasMax bool) uint32 {
	if len(m.tables) > 0 {
		panic("wasmgen: ImportTable after Table")
	}
	m.addImport(module, name, KindTable, append([]byte{byte(elem)}, Limits(min, max, hasMax)...))
	m.importedTables++
	return m.importedTables - 1
}

// ImportMemory imports a memory (sizes in 64 KiB pages) and returns its
// memory index.
func (m *Module) ImportMemory(module, name string, min, max uint32, hasMax bool) uint32 {
	if len(m.mems) > 0 {
		panic("wasmgen: ImportMemory after Memory")
	}
	m.addImport(module, name, KindMemory, Limits(min, max, hasMax))
	m.importedMems++
	return m.importedMems - 1
}

// ImportGlobal imports a global and returns its global index.
func (m *Module) ImportGlobal(module, name string, t ValType, mutable bool) uint32 {
	if len(m.globals) > 0 {
		panic("wasmgen: ImportGlobal after Global")
	}
	m.addImport(module, name, KindGlobal, []byte{byte(t), boolByte(mutable)})
	m.importedGlobals++
	return m.importedGlobals - 1
}

// Func defines a function of type typ and returns its function index. body
// is the raw instruction bytes, ending with OpEnd; the builder adds the
// local declarations and the size.
func (m *Module) Func(typ uint32, locals []Local, body []byte) uint32 {
	b := AppendULEB(nil, uint64(len(locals)))
	for _, l := range locals {
		b = AppendULEB(b, uint64(l.Count))
		b = append(b, byte(l.Type))
	}
	b = append(b, body...)
	m.funcs = append(m.funcs, typ)
	m.codes = append(m.codes, b)
	return m.importedFuncs + uint32(len(m.funcs)-1)
}

// Table defines a table and returns its table index.
func (m *Module) Table(elem ValType, min, max uint32, hasMax bool) uint32 {
	m.tables = append(m.tables, append([]byte{byte(elem)}, Limits(min, max, hasMax)...))
	return m.importedTables + uint32(len(m.tables)-1)
}

// Memory defines a memory (sizes in 64 KiB pages) and returns its index.
func (m *Module) Memory(min, max uint32, hasMax bool) uint32 {
	m.mems = append(m.mems, Limits(min, max, hasMax))
	return m.importedMems + uint32(len(m.mems)-1)
}

// Global defines a global and returns its global index. init is a constant
// expression ending with OpEnd, e.g. Body(I32Const(7), OpEnd).
func (m *Module) Global(t ValType, mutable bool, init []byte) uint32 {
	b := []byte{byte(t), boolByte(mutable)}
	m.globals = append(m.globals, append(b, init...))
	return m.importedGlobals + uint32(len(m.globals)-1)
}

// Export exports index idx of the given kind (KindFunc, ...) as name.
func (m *Module) Export(name string, kind byte, idx uint32) {
	b := AppendName(nil, name)
	b = append(b, kind)
	m.exports = append(m.exports, AppendULEB(b, uint64(idx)))
}

// ExportFunc exports function f as name.
func (m *Module) ExportFunc(name string, f uint32) { m.Export(name, KindFunc, f) }

// ExportTable exports table t as name.
func (m *Module) ExportTable(name string, t uint32) { m.Export(name, KindTable, t) }

// ExportMemory exports memory mem as name.
func (m *Module) ExportMemory(name string, mem uint32) { m.Export(name, KindMemory, mem) }

// ExportGlobal exports global g as name.
func (m *Module) ExportGlobal(name string, g uint32) { m.Export(name, KindGlobal, g) }

// Start makes f the start function.
func (m *Module) Start(f uint32) { m.hasStart, m.start = true, f }

// Data adds an active data segment that copies data into memory mem at
// offset when the module is instantiated, and returns its index.
func (m *Module) Data(mem uint32, offset int32, data []byte) uint32 {
	var b []byte
	if mem == 0 {
		b = []byte{0}
	} else {
		b = AppendULEB([]byte{2}, uint64(mem))
	}
	b = append(b, I32Const(offset)...)
	b = append(b, OpEnd)
	b = AppendULEB(b, uint64(len(data)))
	m.datas = append(m.datas, append(b, data...))
	return uint32(len(m.datas) - 1)
}

// PassiveData adds a passive data segment (for memory.init) and returns its
// index.
func (m *Module) PassiveData(data []byte) uint32 {
	b := AppendULEB([]byte{1}, uint64(len(data)))
	m.datas = append(m.datas, append(b, data...))
	return uint32(len(m.datas) - 1)
}

// Elem adds an active funcref element segment that stores funcs into table
// at offset, and returns its index.
func (m *Module) Elem(table uint32, offset int32, funcs ...uint32) uint32 {
	var b []byte
	if table == 0 {
		b = []byte{0}
	} else {
		b = AppendULEB([]byte{2}, uint64(table))
	}
	b = append(b, I32Const(offset)...)
	b = append(b, OpEnd)
	if table != 0 {
		b = append(b, 0x00) // elemkind funcref
	}
	return m.addElem(b, funcs)
}

// PassiveElem adds a passive funcref element segment (for table.init) and
// returns its index.
func (m *Module) PassiveElem(funcs ...uint32) uint32 {
	return m.addElem([]byte{1, 0x00}, funcs)
}

// DeclareElem adds a declarative element segment, which makes funcs
// referable by ref.func, and returns its index.
func (m *Module) DeclareElem(funcs ...uint32) uint32 {
	return m.addElem([]byte{3, 0x00}, funcs)
}

func (m *Module) addElem(b []byte, funcs []uint32) uint32 {
	b = AppendULEB(b, uint64(len(funcs)))
	for _, f := range funcs {
		b = AppendULEB(b, uint64(f))
	}
	m.elems = append(m.elems, b)
	return uint32(len(m.elems) - 1)
}

// Custom adds a custom section; custom sections are written after all
// others, in the order added.
func (m *Module) Custom(name string, payload []byte) {
	m.customs = append(m.customs, append(AppendName(nil, name), payload...))
}

// Bytes encodes the module. Empty sections are left out, except that a
// module with functions always has function and code sections.
func (m *Module) Bytes() []byte {
	b := Header()
	b = appendVecSection(b, SecType, m.types)
	b = appendVecSection(b, SecImport, m.imports)
	if len(m.funcs) > 0 {
		var p []byte
		p = AppendULEB(p, uint64(len(m.funcs)))
		for _, t := range m.funcs {
			p = AppendULEB(p, uint64(t))
		}
		b = AppendSection(b, SecFunction, p)
	}
	b = appendVecSection(b, SecTable, m.tables)
	b = appendVecSection(b, SecMemory, m.mems)
	b = appendVecSection(b, SecGlobal, m.globals)
	b = appendVecSection(b, SecExport, m.exports)
	if m.hasStart {
		b = AppendSection(b, SecStart, ULEB(uint64(m.start)))
	}
	b = appendVecSection(b, SecElement, m.elems)
	if len(m.datas) > 0 && !m.OmitDataCount {
		b = AppendSection(b, SecDataCount, ULEB(uint64(len(m.datas))))
	}
	if len(m.funcs) > 0 {
		var p []byte
		p = AppendULEB(p, uint64(len(m.codes)))
		for _, c := range m.codes {
			p = AppendULEB(p, uint64(len(c)))
			p = append(p, c...)
		}
		b = AppendSection(b, SecCode, p)
	}
	b = appendVecSection(b, SecData, m.datas)
	for _, c := range m.customs {
		b = AppendSection(b, SecCustom, c)
	}
	return b
}

func appendVecSection(b []byte, id byte, items [][]byte) []byte {
	if len(items) == 0 {
		return b
	}
	return AppendSection(b, id, Vec(items...))
}

// Header returns the 8-byte module header: magic and version 1.
func Header() []byte { return []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00} }

// Section returns a section: its id, the payload size and the payload.
func Section(id byte, payload []byte) []byte { return AppendSection(nil, id, payload) }

// AppendSection appends a section to b.
func AppendSection(b []byte, id byte, payload []byte) []byte {
	b = append(b, id)
	b = AppendULEB(b, uint64(len(payload)))
	return append(b, payload...)
}

// Vec returns a vector: the item count followed by the items.
func Vec(items ...[]byte) []byte {
	b := AppendULEB(nil, uint64(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

// AppendName appends a name: its byte length and its bytes.
func AppendName(b []byte, s string) []byte {
	b = AppendULEB(b, uint64(len(s)))
	return append(b, s...)
}

// Limits returns encoded limits (min and, if hasMax, max).
func Limits(min, max uint32, hasMax bool) []byte {
	if !hasMax {
		return AppendULEB([]byte{0x00}, uint64(min))
	}
	return AppendULEB(AppendULEB([]byte{0x01}, uint64(min)), uint64(max))
}

// AppendULEB appends v as unsigned LEB128.
func AppendULEB(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendSLEB appends v as signed LEB128.
func AppendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// ULEB returns v as unsigned LEB128.
func ULEB(v uint64) []byte { return AppendULEB(nil, v) }

// SLEB returns v as signed LEB128.
func SLEB(v int64) []byte { return AppendSLEB(nil, v) }

// I32Const returns the instruction i32.const v.
func I32Const(v int32) []byte { return AppendSLEB([]byte{OpI32Const}, int64(v)) }

// I64Const returns the instruction i64.const v.
func I64Const(v int64) []byte { return AppendSLEB([]byte{OpI64Const}, v) }

// F32Const returns the instruction f32.const v.
func F32Const(v float32) []byte {
	return binary.LittleEndian.AppendUint32([]byte{OpF32Const}, math.Float32bits(v))
}

// F64Const returns the instruction f64.const v.
func F64Const(v float64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{OpF64Const}, math.Float64bits(v))
}

// MemArg returns a memory immediate: alignment exponent and offset.
func MemArg(align, offset uint32) []byte {
	return AppendULEB(ULEB(uint64(align)), uint64(offset))
}

// FC returns the opcode of a 0xFC-prefixed instruction (saturating
// truncation, bulk memory, table operations), without its immediates.
func FC(sub uint32) []byte { return AppendULEB([]byte{OpPrefixFC}, uint64(sub)) }

// SIMD returns the opcode of a 0xFD-prefixed (vector) instruction, without
// its immediates.
func SIMD(sub uint32) []byte { return AppendULEB([]byte{OpPrefixSIMD}, uint64(sub)) }

// Body concatenates instruction parts:
//   - byte (every Op and Block constant) and ValType: that one byte;
//   - int and uint32: unsigned LEB128 (indexes, label depths, counts);
//   - int32 and int64: signed LEB128;
//   - []byte: as is (I32Const, MemArg, another Body, ...).
//
// It panics on any other type or a negative int: both are bugs in the test.
func Body(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case byte:
			b = append(b, v)
		case ValType:
			b = append(b, byte(v))
		case int:
			if v < 0 {
				panic(fmt.Sprintf("wasmgen: negative int %d in Body; use int32 or int64 for signed", v))
			}
			b = AppendULEB(b, uint64(v))
		case uint32:
			b = AppendULEB(b, uint64(v))
		case int32:
			b = AppendSLEB(b, int64(v))
		case int64:
			b = AppendSLEB(b, v)
		case []byte:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("wasmgen: unsupported Body part %T", p))
		}
	}
	return b
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
