package meter

// A tiny WebAssembly binary encoder for the tests, and the hand-assembled
// modules they run.

import (
	"bytes"
	"math"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Value types and other type bytes.
const (
	tI32     = 0x7f
	tI64     = 0x7e
	tF32     = 0x7d
	tF64     = 0x7c
	tV128    = 0x7b
	tFuncref = 0x70
	tVoid    = 0x40 // empty block type
)

// allFeatures enables everything wazero implements, for the modules that use
// tail calls, exceptions, threads or typed function references.
const allFeatures = api.CoreFeaturesV2 | experimental.CoreFeaturesThreads | experimental.CoreFeaturesTailCall |
	experimental.CoreFeaturesExtendedConst | experimental.CoreFeaturesExceptionHandling |
	experimental.CoreFeaturesTypedFunctionReferences

// cat concatenates byte slices.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// op returns its bytes as a slice.
func op(b ...byte) []byte { return b }

func u(v uint32) []byte { return appendU32(nil, v) }
func s(v int64) []byte  { return appendS64(nil, v) }

func str(v string) []byte { return cat(u(uint32(len(v))), []byte(v)) }

// vec encodes a vector of already-encoded entries.
func vec(entries [][]byte) []byte { return cat(u(uint32(len(entries))), cat(entries...)) }

// Instruction helpers.
func i32c(v int32) []byte { return cat(op(0x41), s(int64(v))) }
func i64c(v int64) []byte { return cat(op(0x42), s(v)) }
func f32c(v float32) []byte {
	b := math.Float32bits(v)
	return op(0x43, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
}
func f64c(v float64) []byte   { return cat(op(0x44), le64(math.Float64bits(v))) }
func lget(i uint32) []byte    { return cat(op(0x20), u(i)) }
func lset(i uint32) []byte    { return cat(op(0x21), u(i)) }
func ltee(i uint32) []byte    { return cat(op(0x22), u(i)) }
func gget(i uint32) []byte    { return cat(op(0x23), u(i)) }
func gset(i uint32) []byte    { return cat(op(0x24), u(i)) }
func call(f uint32) []byte    { return cat(op(0x10), u(f)) }
func br(l uint32) []byte      { return cat(op(0x0c), u(l)) }
func brIf(l uint32) []byte    { return cat(op(0x0d), u(l)) }
func block(bt ...byte) []byte { return cat(op(0x02), bt) }
func loop(bt ...byte) []byte  { return cat(op(0x03), bt) }
func if_(bt ...byte) []byte   { return cat(op(0x04), bt) }
func mem(opc byte, align, offset uint32) []byte {
	return cat(op(opc), u(align), u(offset))
}
func simd(sub uint32, imm ...byte) []byte { return cat(op(0xfd), u(sub), imm) }
func misc(sub uint32, imm ...byte) []byte { return cat(op(0xfc), u(sub), imm) }

var (
	end_  = op(0x0b)
	else_ = op(0x05)
)

func le64(v uint64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

// wmod accumulates the sections of a module.
type wmod struct {
	types, imports, tables, mems, tags, globals, exports, elems, datas [][]byte
	funcTypes                                                          []uint32
	codes                                                              [][]byte
	start                                                              int
	dataCount                                                          bool
	customs                                                            [][]byte
	importedFuncs, importedGlobals                                     uint32
}

func newMod() *wmod { return &wmod{start: -1} }

// typ returns the index of the function type params -> results.
func (m *wmod) typ(params, results []byte) uint32 {
	enc := cat(op(0x60), u(uint32(len(params))), params, u(uint32(len(results))), results)
	for i, t := range m.types {
		if bytes.Equal(t, enc) {
			return uint32(i)
		}
	}
	m.types = append(m.types, enc)
	return uint32(len(m.types) - 1)
}

func (m *wmod) importFunc(module, name string, typ uint32) uint32 {
	m.imports = append(m.imports, cat(str(module), str(name), op(0x00), u(typ)))
	m.importedFuncs++
	return m.importedFuncs - 1
}

func (m *wmod) importGlobal(module, name string, vt byte, mut bool) uint32 {
	m.imports = append(m.imports, cat(str(module), str(name), op(0x03, vt, b2u(mut))))
	m.importedGlobals++
	return m.importedGlobals - 1
}

func b2u(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// fn adds a function with the given locals (one declaration each) and code
// (the final end is added) and returns its index.
func (m *wmod) fn(typ uint32, locals []byte, code ...[]byte) uint32 {
	decls := make([][]byte, len(locals))
	for i, l := range locals {
		decls[i] = op(1, l)
	}
	body := cat(vec(decls), cat(code...), end_)
	m.funcTypes = append(m.funcTypes, typ)
	m.codes = append(m.codes, cat(u(uint32(len(body))), body))
	return m.importedFuncs + uint32(len(m.codes)) - 1
}

func (m *wmod) global(vt byte, mut bool, init ...[]byte) uint32 {
	m.globals = append(m.globals, cat(op(vt, b2u(mut)), cat(init...), end_))
	return m.importedGlobals + uint32(len(m.globals)) - 1
}

func (m *wmod) export(name string, kind byte, idx uint32) {
	m.exports = append(m.exports, cat(str(name), op(kind), u(idx)))
}

func (m *wmod) exportFn(name string, f uint32) { m.export(name, 0x00, f) }

func (m *wmod) custom(name string, data []byte) {
	m.customs = append(m.customs, cat(str(name), data))
}

func (m *wmod) encode() []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	sec := func(id byte, content []byte) {
		out = append(out, id)
		out = append(out, u(uint32(len(content)))...)
		out = append(out, content...)
	}
	vsec := func(id byte, entries [][]byte) {
		if len(entries) > 0 {
			sec(id, vec(entries))
		}
	}
	vsec(1, m.types)
	vsec(2, m.imports)
	funcs := make([][]byte, len(m.funcTypes))
	for i, t := range m.funcTypes {
		funcs[i] = u(t)
	}
	vsec(3, funcs)
	vsec(4, m.tables)
	vsec(5, m.mems)
	vsec(13, m.tags)
	vsec(6, m.globals)
	vsec(7, m.exports)
	if m.start >= 0 {
		sec(8, u(uint32(m.start)))
	}
	vsec(9, m.elems)
	if m.dataCount {
		sec(12, u(uint32(len(m.datas))))
	}
	vsec(10, m.codes)
	vsec(11, m.datas)
	for _, c := range m.customs {
		sec(0, c)
	}
	return out
}

// testCall is one call of an exported function.
type testCall struct {
	fn    string
	args  []uint64
	traps bool // the original traps too
}

// c is a call that returns; ct one that traps.
func c(fn string, a ...int64) testCall  { return testCall{fn: fn, args: args(a...)} }
func ct(fn string, a ...int64) testCall { return testCall{fn: fn, args: args(a...), traps: true} }

// testModule is a hand-assembled module and calls that exercise it.
type testModule struct {
	name     string
	wasm     []byte
	features api.CoreFeatures // 0: wazero's defaults
	env      bool             // imports globals from the env module
	opts     Options          // for instrumenting it (start functions need fuel)
	calls    []testCall
}

func args(v ...int64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = uint64(x)
	}
	return out
}

// loopsModule: an endless loop, a counted loop, recursion and nested loops.
func loopsModule() []byte {
	m := newMod()
	v := m.typ(nil, nil)
	ii := m.typ(op(tI32), op(tI32))
	iii := m.typ(op(tI32, tI32), op(tI32))
	m.exportFn("spin", m.fn(v, nil, loop(tVoid), br(0), end_))
	// count(n): i = 0; if n > 0 { loop { i++; br_if i < n } }; return i
	m.exportFn("count", m.fn(ii, op(tI32),
		block(tVoid), lget(0), op(0x45), brIf(0), // i32.eqz
		loop(tVoid), lget(1), i32c(1), op(0x6a), ltee(1), lget(0), op(0x49), brIf(0), end_, // i32.lt_u
		end_, lget(1)))
	// depth(n): n == 0 ? 0 : depth(n-1) + 1
	depth := m.importedFuncs + uint32(len(m.codes))
	m.exportFn("depth", m.fn(ii, nil,
		lget(0), op(0x45), if_(tI32), i32c(0), else_,
		lget(0), i32c(1), op(0x6b), call(depth), i32c(1), op(0x6a), end_))
	// nested(n, k): for i < n { for j < k { c++ } }, both loops entered at least once.
	m.exportFn("nested", m.fn(iii, op(tI32, tI32, tI32),
		loop(tVoid),
		i32c(0), lset(3),
		loop(tVoid),
		lget(4), i32c(1), op(0x6a), lset(4),
		lget(3), i32c(1), op(0x6a), ltee(3), lget(1), op(0x49), brIf(0),
		end_,
		lget(2), i32c(1), op(0x6a), ltee(2), lget(0), op(0x49), brIf(0),
		end_, lget(4)))
	return m.encode()
}

// controlModule: br_table, blocks, if/else, select, br with values, a trap.
func controlModule() []byte {
	m := newMod()
	ii := m.typ(op(tI32), op(tI32))
	m.exportFn("switch", m.fn(ii, nil,
		block(tVoid), block(tVoid), block(tVoid), block(tVoid),
		lget(0), op(0x0e), u(3), u(0), u(1), u(2), u(3),
		end_, i32c(10), op(0x0f),
		end_, i32c(20), op(0x0f),
		end_, i32c(30), op(0x0f),
		end_, i32c(40)))
	m.exportFn("ifelse", m.fn(ii, nil,
		block(tI32),
		lget(0), i32c(10), op(0x48), // i32.lt_s
		if_(tI32),
		lget(0), i32c(5), op(0x48), if_(tI32), i32c(1), else_, i32c(2), end_,
		else_,
		i32c(100), br(1),
		end_,
		i32c(3), lget(0), i32c(1), op(0x71), op(0x1b), // i32.and, select
		end_))
	m.exportFn("trap", m.fn(ii, nil,
		lget(0), i32c(99), op(0x46), if_(tVoid), op(0x00), end_, lget(0)))
	return m.encode()
}

// memoryModule: loads and stores of every width, memory.size and grow, a
// byte-counting loop and an out-of-bounds access.
func memoryModule() []byte {
	m := newMod()
	m.mems = append(m.mems, op(0x01, 1, 2))
	m.datas = append(m.datas, cat(u(0), i32c(0), end_, str("hello world, hello wasm")))
	ii := m.typ(op(tI32), op(tI64))
	m.exportFn("rw", m.fn(ii, nil,
		lget(0), i32c(0x12345678), mem(0x36, 2, 0),
		lget(0), i64c(-2), mem(0x3e, 2, 4),
		lget(0), i32c(0xab), mem(0x3a, 0, 9),
		lget(0), i32c(0xbeef), mem(0x3b, 1, 10),
		lget(0), f64c(1.5), mem(0x39, 3, 16),
		lget(0), f32c(2.5), mem(0x38, 2, 24),
		lget(0), i64c(0x0102030405060708), mem(0x37, 3, 32),
		lget(0), i64c(-3), mem(0x3c, 0, 40),
		lget(0), i64c(-4), mem(0x3d, 1, 42),
		lget(0), mem(0x29, 3, 0),
		lget(0), mem(0x34, 2, 4), op(0x7c),
		lget(0), mem(0x30, 0, 9), op(0x7c),
		lget(0), mem(0x2f, 1, 10), op(0xad), op(0x7c),
		lget(0), mem(0x2b, 3, 16), op(0xb0), op(0x7c), // i64.trunc_f64_s
		lget(0), mem(0x2a, 2, 24), op(0xa8), op(0xac), op(0x7c), // i32.trunc_f32_s, i64.extend_i32_s
		lget(0), mem(0x2d, 0, 0), op(0xad), op(0x7c),
		lget(0), mem(0x2c, 0, 9), op(0xac), op(0x7c),
		lget(0), mem(0x2e, 1, 10), op(0xac), op(0x7c),
		lget(0), mem(0x28, 2, 0), op(0xad), op(0x7c),
		lget(0), mem(0x31, 0, 40), op(0x7c),
		lget(0), mem(0x32, 1, 42), op(0x7c),
		lget(0), mem(0x33, 1, 42), op(0x7c),
		lget(0), mem(0x35, 2, 32), op(0x7c)))
	vi := m.typ(nil, op(tI32))
	m.exportFn("grow", m.fn(vi, nil,
		op(0x3f, 0x00), i32c(1), op(0x40, 0x00), op(0x6a), op(0x3f, 0x00), op(0x6a),
		i32c(5), op(0x40, 0x00), op(0x6a))) // growing past the maximum gives -1
	m.exportFn("countbytes", m.fn(m.typ(op(tI32, tI32, tI32), op(tI32)), op(tI32, tI32), countBytesCode...))
	m.exportFn("oob", m.fn(vi, nil, i32c(-1), mem(0x28, 2, 0)))
	return m.encode()
}

// countBytesCode is countbytes(ptr, len, b): the number of bytes equal to b
// in memory[ptr:ptr+len], in a loop.
var countBytesCode = [][]byte{
	lget(0), lget(1), op(0x6a), lset(3), // end = ptr + len
	block(tVoid), lget(0), lget(3), op(0x4f), brIf(0), // i32.ge_u
	loop(tVoid),
	lget(0), mem(0x2d, 0, 0), lget(2), op(0x46), lget(4), op(0x6a), lset(4),
	lget(0), i32c(1), op(0x6a), ltee(0), lget(3), op(0x49), brIf(0),
	end_, end_, lget(4),
}

// globalsModule: imported and defined globals, exported ones and a start
// function that writes them. The env module provides the imports.
func globalsModule() []byte {
	m := newMod()
	twice := m.importFunc("env", "twice", m.typ(op(tI32), op(tI32)))
	gi32 := m.importGlobal("env", "gi32", tI32, false)
	gi64 := m.importGlobal("env", "gi64", tI64, true)
	g2 := m.global(tI32, false, gget(gi32))
	g3 := m.global(tF64, true, f64c(0.5))
	g4 := m.global(tI32, true, i32c(0))
	m.export("g3", 0x03, g3)
	m.export("g4", 0x03, g4)
	v := m.typ(nil, nil)
	m.start = int(m.fn(v, nil,
		i32c(42), gset(g4),
		gget(gi64), i64c(1), op(0x7c), gset(gi64)))
	m.exportFn("read", m.fn(m.typ(nil, op(tI64)), nil,
		gget(gi32), op(0xac), gget(gi64), op(0x7c), gget(g2), op(0xac), op(0x7c),
		gget(g3), op(0xb0), op(0x7c), gget(g4), op(0xac), op(0x7c),
		i32c(1), call(twice), op(0xac), op(0x7c)))
	m.exportFn("bump", m.fn(m.typ(op(tF64), nil), nil,
		gget(g3), lget(0), op(0xa0), gset(g3), // f64.add
		gget(gi64), i64c(1), op(0x7c), gset(gi64),
		gget(g4), i32c(1), op(0x6a), gset(g4)))
	return m.encode()
}

// envModule exports the globals and the function globalsModule imports.
func envModule() []byte {
	m := newMod()
	m.exportFn("twice", m.fn(m.typ(op(tI32), op(tI32)), nil, lget(0), lget(0), op(0x6a)))
	m.export("gi32", 0x03, m.global(tI32, false, i32c(5)))
	m.export("gi64", 0x03, m.global(tI64, true, i64c(100)))
	return m.encode()
}

// simdModule: v128.const and i8x16.shuffle whose immediates contain the
// bytes of loop and end, lane and memory instructions, two-byte opcodes.
func simdModule() []byte {
	m := newMod()
	m.mems = append(m.mems, op(0x00, 1))
	constBytes := []byte{0x03, 0x03, 0x03, 0x0b, 0x00, 0x01, 0x02, 0x03, 0x0b, 0x0b, 0x0b, 0x0b, 0x44, 0x43, 0x42, 0x41}
	lanes := []byte{0x03, 0x0b, 0x10, 0x1f, 0x00, 0x01, 0x02, 0x03, 0x0b, 0x0b, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09}
	const vl, il = 1, 2 // locals
	m.exportFn("simd", m.fn(m.typ(op(tI32), op(tI32)), op(tV128, tI32),
		simd(0x0c, constBytes...), lset(vl),
		block(tVoid), lget(0), op(0x45), brIf(0),
		loop(tVoid),
		lget(vl), lget(vl), simd(0xae), lset(vl), // i32x4.add
		lget(vl), simd(0x80), simd(0x62), lget(vl), simd(0xba), lset(vl), // i16x8.abs, i8x16.popcnt, i32x4.dot_i16x8_s
		lget(il), i32c(1), op(0x6a), ltee(il), lget(0), op(0x49), brIf(0),
		end_, end_,
		i32c(16), lget(vl), simd(0x0b, 4, 0), // v128.store
		i32c(16), simd(0x00, 4, 0), lget(vl), simd(0x0d, lanes...), simd(0x1b, 1), // shuffle, i32x4.extract_lane 1
		i32c(16), lget(vl), simd(0x54, 0, 0, 5), simd(0x15, 3), op(0x6a), // v128.load8_lane, i8x16.extract_lane_s
		lget(vl), simd(0x64), op(0x6a), // i8x16.bitmask
		lget(vl), simd(0x53), op(0x6a), // v128.any_true
		lget(vl), i32c(9), simd(0x1c, 2), simd(0x1b, 2), op(0x6a), // replace_lane, extract_lane
		i32c(48), lget(vl), simd(0x5a, 2, 0, 3), // v128.store32_lane
		i32c(48), mem(0x28, 2, 0), op(0x6a),
		i32c(7), simd(0x0f), i32c(9), simd(0x0f), simd(0x6e), simd(0x16, 0), op(0x6a), // i8x16.splat, i8x16.add, extract_lane_u
	))
	return m.encode()
}

// bulkRefModule: bulk memory, tables and references, saturating truncation,
// sign extension and typed select.
func bulkRefModule() []byte {
	m := newMod()
	vi := m.typ(nil, op(tI32))
	m.mems = append(m.mems, op(0x00, 1))
	m.tables = append(m.tables, op(tFuncref, 0x01, 4, 10))
	m.datas = append(m.datas, cat(u(1), str("abcdef")))
	m.dataCount = true
	fa := m.fn(vi, nil, i32c(1))
	fb := m.fn(vi, nil, i32c(2))
	fc := m.fn(vi, nil, i32c(3))
	m.elems = append(m.elems,
		cat(u(0), i32c(0), end_, vec([][]byte{u(fa), u(fb)})), // active, table 0
		cat(u(1), op(0x00), vec([][]byte{u(fc)})),             // passive
		cat(u(3), op(0x00), vec([][]byte{u(fa)})),             // declarative
	)
	m.exportFn("bulk", m.fn(vi, nil,
		i32c(100), i32c(0), i32c(6), misc(8, 0, 0), misc(9, 0), // memory.init 0 0, data.drop 0
		i32c(200), i32c(100), i32c(6), misc(10, 0, 0), // memory.copy
		i32c(300), i32c('z'), i32c(4), misc(11, 0), // memory.fill
		i32c(202), mem(0x2d, 0, 0), i32c(301), mem(0x2d, 0, 0), op(0x6a)))
	m.exportFn("tables", m.fn(vi, nil,
		misc(16, 0),                              // table.size 0 = 4
		op(0xd0, tFuncref), i32c(2), misc(15, 0), // table.grow 0 by 2 = 4
		op(0x6a),                                  // 8
		i32c(2), i32c(0), i32c(1), misc(12, 1, 0), // table.init elem 1 table 0
		misc(13, 1),                              // elem.drop 1
		i32c(2), op(0x11), u(vi), u(0), op(0x6a), // call_indirect -> fc = 3; 11
		i32c(3), op(0x25, 0), op(0xd1), op(0x6a), // table.get 3, ref.is_null = 1; 12
		i32c(3), op(0xd2), u(fa), op(0x26, 0), // table.set 3 = fa
		i32c(4), op(0xd2), u(fb), i32c(2), misc(17, 0), // table.fill 4..6 = fb
		i32c(4), i32c(2), i32c(2), misc(14, 0, 0), // table.copy 4..6 = [fc, fa]
		i32c(4), op(0x11), u(vi), u(0), op(0x6a), // fc = 3; 15
		i32c(5), op(0x11), u(vi), u(0), op(0x6a), // fa = 1; 16
	))
	m.exportFn("numeric", m.fn(m.typ(op(tF32), op(tI32)), nil,
		lget(0), misc(0), // i32.trunc_sat_f32_s
		i32c(0x80), op(0xc0), op(0x6a), // i32.extend8_s
		i64c(0x7fffffff), op(0xc4), op(0xa7), op(0x6a), // i64.extend32_s, i32.wrap_i64
		i32c(7), i32c(8), lget(0), misc(1), op(0x1c, 1, tI32), op(0x6a), // i32.trunc_sat_f32_u, select i32
	))
	return m.encode()
}

// multiValueModule: block and loop types by type index, loop parameters,
// several results.
func multiValueModule() []byte {
	m := newMod()
	iiii := m.typ(op(tI32, tI32), op(tI32, tI32))
	iii := m.typ(op(tI32, tI32), op(tI32))
	m.exportFn("swap", m.fn(iiii, nil, lget(1), lget(0)))
	// sum(n) = n + (n-1) + ... + 1 with a loop carrying [acc, i].
	m.exportFn("sum", m.fn(m.typ(op(tI32), op(tI32)), op(tI32),
		i32c(0), lget(0),
		loop(byte(iiii)),
		lset(1), lget(1), op(0x6a),
		lget(1), i32c(1), op(0x6b),
		lget(1), i32c(1), op(0x4a), brIf(0), // i32.gt_s
		end_, op(0x1a)))
	m.exportFn("add", m.fn(iii, nil, lget(0), lget(1), block(byte(iii)), op(0x6a), end_))
	return m.encode()
}

// tailCallModule: return_call and return_call_indirect (needs allFeatures).
func tailCallModule() []byte {
	m := newMod()
	iii := m.typ(op(tI32, tI32), op(tI32))
	m.tables = append(m.tables, op(tFuncref, 0x00, 1))
	self := m.importedFuncs + uint32(len(m.codes))
	// tc(n, acc) = n == 0 ? acc : tc(n-1, acc+1)
	m.exportFn("tc", m.fn(iii, nil,
		lget(0), op(0x45), if_(tI32), lget(1), else_,
		lget(0), i32c(1), op(0x6b), lget(1), i32c(1), op(0x6a), op(0x12), u(self),
		end_))
	m.exportFn("tci", m.fn(iii, nil, lget(0), lget(1), i32c(0), op(0x13), u(iii), u(0)))
	m.elems = append(m.elems, cat(u(0), i32c(0), end_, vec([][]byte{u(self)})))
	return m.encode()
}

// exceptionModule: a tag, throw and try_table with a loop inside (needs
// allFeatures).
func exceptionModule() []byte {
	m := newMod()
	ii := m.typ(op(tI32), op(tI32))
	tagType := m.typ(op(tI32), nil)
	m.tags = append(m.tags, cat(op(0x00), u(tagType)))
	// f(n): count up to n in a loop inside try_table; throw i when i == 5.
	m.exportFn("f", m.fn(ii, op(tI32),
		block(tI32),
		op(0x1f, tI32), vec([][]byte{cat(op(0x00), u(0), u(0))}), // try_table (result i32) (catch 0 0)
		loop(tVoid),
		lget(1), i32c(1), op(0x6a), ltee(1), i32c(5), op(0x46), if_(tVoid), lget(1), op(0x08), u(0), end_,
		lget(1), lget(0), op(0x49), brIf(0),
		end_,
		lget(1), i32c(1000), op(0x6a),
		end_,
		end_))
	return m.encode()
}

// atomicsModule: shared memory and atomic instructions (needs allFeatures).
func atomicsModule() []byte {
	m := newMod()
	m.mems = append(m.mems, op(0x03, 1, 1))
	m.exportFn("atomics", m.fn(m.typ(op(tI32), op(tI32)), nil,
		op(0xfe, 0x03, 0x00),                   // atomic.fence
		i32c(8), lget(0), op(0xfe, 0x17, 2, 0), // i32.atomic.store
		i32c(8), i32c(3), op(0xfe, 0x1e, 2, 0), // i32.atomic.rmw.add (returns old)
		i32c(8), op(0xfe, 0x10, 2, 0), op(0x6a), // i32.atomic.load
		i32c(8), i32c(0), op(0xfe, 0x00, 2, 0), op(0x6a), // memory.atomic.notify
	))
	return m.encode()
}

// testModules are the hand-assembled modules, with calls to compare.
func testModules() []testModule {
	return []testModule{
		{name: "loops", wasm: loopsModule(), calls: []testCall{
			c("count", 0), c("count", 1), c("count", 1000),
			c("depth", 0), c("depth", 50), c("nested", 3, 4),
		}},
		{name: "control", wasm: controlModule(), calls: []testCall{
			c("switch", 0), c("switch", 1), c("switch", 2), c("switch", 3), c("switch", 77),
			c("ifelse", 2), c("ifelse", 7), c("ifelse", 8), c("ifelse", 50),
			c("trap", 1), ct("trap", 99),
		}},
		{name: "memory", wasm: memoryModule(), calls: []testCall{
			c("rw", 0), c("rw", 1000), c("grow"), c("countbytes", 0, 23, 'l'),
			c("countbytes", 0, 23, 'o'), ct("oob"),
		}},
		{name: "globals", wasm: globalsModule(), env: true, opts: Options{InitialFuel: 100}, calls: []testCall{
			c("read"), {fn: "bump", args: []uint64{math.Float64bits(2.25)}}, c("read"),
		}},
		{name: "simd", wasm: simdModule(), calls: []testCall{c("simd", 0), c("simd", 3)}},
		{name: "bulkref", wasm: bulkRefModule(), calls: []testCall{
			c("bulk"), c("tables"),
			{fn: "numeric", args: []uint64{uint64(math.Float32bits(3.7))}},
			{fn: "numeric", args: []uint64{uint64(math.Float32bits(-1e20))}},
		}},
		{name: "multivalue", wasm: multiValueModule(), calls: []testCall{
			c("swap", 1, 2), c("sum", 0), c("sum", 1), c("sum", 10), c("add", 3, 4),
		}},
		{name: "tailcall", wasm: tailCallModule(), features: allFeatures, calls: []testCall{
			c("tc", 0, 0), c("tc", 100000, 1), c("tci", 10, 5),
		}},
		{name: "atomics", wasm: atomicsModule(), features: allFeatures, calls: []testCall{c("atomics", 11)}},
	}
}
