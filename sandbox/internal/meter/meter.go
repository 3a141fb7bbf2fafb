// Package meter adds fuel metering to WebAssembly binary modules, so that the
// host can bound how long any call into an untrusted guest runs.
//
// Wasm code compiled by wazero cannot be preempted by Go's scheduler, so a
// guest that never returns would stall the garbage collector and, with it,
// the whole process. Instrument rewrites a module so that it keeps a budget
// in a new exported, mutable i64 global named [FuelExport]: every function
// body, on entry, and every loop body, at the top of each iteration,
// subtracts one unit and traps (executes `unreachable`) once the budget goes
// negative. Straight-line code between two checks is bounded by the size of
// the function body, and every backward jump in WebAssembly targets a loop,
// so a call that starts with F units runs at most about F function entries
// plus loop iterations before it traps.
//
// Bulk instructions do work in proportion to an operand: memory.fill,
// memory.copy and memory.init cost one unit plus one per 16 bytes, and
// table.grow, table.fill, table.copy and table.init one unit plus one per
// element, charged before the instruction runs (a second new global, a
// private i32, holds the length while it is priced).
//
// The host sets the budget before each call and, after a trap, reads the
// global back: a negative value means the call ran out of fuel, anything
// else means another trap (an explicit `unreachable`, a bad memory access,
// ...):
//
//	fuel := mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal)
//	fuel.Set(uint64(budget))
//	_, err := fn.Call(ctx, args...)
//	if err != nil && int64(fuel.Get()) < 0 {
//		// out of fuel
//	}
//
// # What the rewrite does
//
// The new globals are appended at the end of the global index space (after the
// imported and the defined globals), so no existing global index moves; no
// function, table, memory, tag, type, element or data index moves either. The
// global, export and code sections are re-encoded (section and body sizes are
// recomputed); the type, import, function, table, memory, tag, start,
// element, data count and data sections are copied byte for byte after being
// checked. Custom sections are copied byte for byte too, except the DWARF
// ones (names starting with ".debug_"), which are dropped: their code offsets
// would be stale after the rewrite and wazero would print wrong source lines
// in trap backtraces. (A DWARF section that is the last section of the
// module is kept, stale, for a wazero quirk explained in assemble.) The
// "name" section stays correct, since no index moves. A global or export
// section the module lacks is added where the standard order puts it.
//
// Each function keeps its fuel in a new i64 local, which wazero's
// compiler holds in a register, instead of reading and writing the global
// (a memory access) at every check: the local is loaded from the global on
// entry and after every call, and stored back before every call, return,
// tail call, branch out of the function and fuel trap. The check at each
// metering point is then (see snippets for every sequence):
//
//	local.get $l  i64.const 1  i64.sub  local.tee $l
//	i64.const 0  i64.lt_s
//	if  local.get $l  global.set $fuel  unreachable  end
//
// It is stack-neutral, so it is valid at the start of any function body
// and at the top of any loop body, whatever the loop's parameters. On
// every path out of a function the global is current, except a trap that
// is not fuel's: the global then holds the value of the last store (not
// negative, at most the budget), which is all the host needs to tell the
// two apart. Measured with real filters (sandbox's BenchmarkFilter), the
// local halved the metering cost of an AssemblyScript JSON filter (700 to
// 365 ns per record; 320 unmetered); on the tight loop of
// BenchmarkCountBytes it is no better than the global.
//
// # Supported input
//
// Every instruction that wazero v1.12 accepts with any of its feature flags
// is decoded: WebAssembly 1.0 and 2.0 (sign extension, non-trapping
// float-to-int, bulk memory, reference types, multi-value, SIMD), tail calls,
// typed function references, extended constant expressions and threads
// (atomics). Refused with an [UnsupportedError]: exception handling, both
// the current (try_table, throw, throw_ref: a throw leaves a function
// without storing its fuel local, so a caller that catches would not be
// charged for what its callees spent) and the legacy one, multi-memory, memory64, relaxed SIMD and other
// proposals wazero does not implement, memory.atomic.wait32/wait64 (which can
// block forever without spending fuel), and functions declaring more than
// [MaxLocals] locals. Input that is not a well-formed module is refused with
// a [FormatError]; a module that already exports [FuelExport] is refused
// with [ErrFuelExportExists].
//
// Instrument checks the structure of every section, bounds every declared
// count by the bytes that remain, and never allocates more than a small
// multiple of the input size, so it is also a cheap first filter in front of
// wazero's decoder for untrusted uploads. It does not type-check function
// bodies: wazero's CompileModule does that, and accepts an instrumented
// module exactly when it accepts the original.
package meter

import (
	"errors"
	"fmt"
)

// FuelExport is the name under which an instrumented module exports its fuel
// global: a mutable i64 the host sets before each call and reads back after
// a trap (negative: the call ran out of fuel).
const FuelExport = "rewind_fuel"

// MaxLocals is the most locals (parameters excluded) that one function may
// declare. The binary format lets a few bytes declare four billion locals,
// and wazero allocates per declared local before it validates anything, so
// an upload could exhaust the host's memory; 50000 is the limit web engines
// enforce, so every module that runs in a browser is within it.
const MaxLocals = 50000

// maxGlobals is wazero's limit on the size of the global index space.
const maxGlobals = 1 << 27

// ErrFuelExportExists is returned for a module that already exports a name
// equal to FuelExport, such as a module that was instrumented already.
var ErrFuelExportExists = errors.New("meter: module already exports " + FuelExport)

// FormatError reports input that is not a well-formed WebAssembly binary
// module: bad magic number, truncated or oversized sections, unknown section
// or opcode, malformed LEB128, a count larger than the bytes that follow, and
// so on.
type FormatError struct {
	Offset int    // byte offset in the input where the problem was found
	Reason string // what is wrong
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("meter: malformed module at offset %#x: %s", e.Offset, e.Reason)
}

// UnsupportedError reports a module that uses a feature the meter refuses
// to instrument (see the package documentation for the list).
type UnsupportedError struct {
	Offset  int    // byte offset in the input of the construct
	Feature string // what is not supported
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("meter: unsupported at offset %#x: %s", e.Offset, e.Feature)
}

// Options tunes InstrumentWithOptions. The zero value gives what Instrument
// does.
type Options struct {
	// InitialFuel is the value the fuel global starts with when the module
	// is instantiated. It is the budget of the module's start function (the
	// one named by the start section), which runs during instantiation,
	// before the host can set the global; with the default of 0 a module
	// that has a start function traps on instantiation. Functions the host
	// calls after instantiation (including WASI's _initialize) get whatever
	// the host sets.
	InitialFuel int64
}

// Instrument returns a copy of the wasm binary module with fuel metering: a
// new mutable exported i64 global named FuelExport, initialised to 0,
// decremented by one at the entry of every function body and at the start of
// every loop body; when the result is negative the code executes
// `unreachable` (a trap). The input is not modified. The returned error is a
// *FormatError, an *UnsupportedError or ErrFuelExportExists. Instrument is
// safe for concurrent use.
func Instrument(wasm []byte) ([]byte, error) {
	return InstrumentWithOptions(wasm, Options{})
}

// InstrumentWithOptions is Instrument with options.
func InstrumentWithOptions(wasm []byte, opts Options) ([]byte, error) {
	res, err := InstrumentModule(wasm, opts)
	if err != nil {
		return nil, err
	}
	return res.Wasm, nil
}

// Info is what Instrument learned about a module's imports, tables and
// memories, for the host's admission checks.
type Info struct {
	Imports  []Import
	Tables   []Limits // imported tables first, then defined ones
	Memories []Limits // imported memory first, then the defined one
	// TableGrow is set when some function executes table.grow: a table
	// without a maximum could then grow to 2^32 elements.
	TableGrow bool
	// Functions is the number of functions the module defines.
	Functions int
}

// Import is one entry of the import section.
type Import struct {
	Module, Name string
	Kind         ImportKind
}

// ImportKind is the kind of an import.
type ImportKind byte

// The import kinds.
const (
	ImportFunc ImportKind = iota
	ImportTable
	ImportMemory
	ImportGlobal
	ImportTag
)

func (k ImportKind) String() string {
	switch k {
	case ImportFunc:
		return "func"
	case ImportTable:
		return "table"
	case ImportMemory:
		return "memory"
	case ImportGlobal:
		return "global"
	case ImportTag:
		return "tag"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// Limits are the declared limits of a table (in elements) or a memory (in
// 64 KiB pages).
type Limits struct {
	Min, Max uint32
	HasMax   bool
}

func (l Limits) String() string {
	if !l.HasMax {
		return fmt.Sprintf("[%d, unbounded)", l.Min)
	}
	return fmt.Sprintf("[%d, %d]", l.Min, l.Max)
}

// Result is an instrumented module and what was learned about it.
type Result struct {
	Wasm []byte
	Info Info
}

// InstrumentModule is InstrumentWithOptions that also returns the module's
// Info.
func InstrumentModule(wasm []byte, opts Options) (*Result, error) {
	m, err := parseModule(wasm)
	if err != nil {
		return nil, err
	}
	out, err := m.assemble(opts)
	if err != nil {
		return nil, err
	}
	m.info.Functions = int(m.funcCount)
	return &Result{Wasm: out, Info: m.info}, nil
}

// newGlobals is how many globals the rewrite adds: the fuel and a scratch
// i32 that holds the length operand of a bulk instruction while its cost is
// charged.
const newGlobals = 2

// bulkMemoryShift sets the price of bulk memory instructions (memory.fill,
// memory.copy, memory.init): one unit plus one per 2^bulkMemoryShift bytes,
// so that a loop of 64 MiB fills burns fuel in proportion to the work it
// does, about as fast as a loop of plain stores. Table instructions cost one
// unit per element.
const bulkMemoryShift = 4

// snippets are the code sequences injected into one function, whose fuel
// local has index local ($l below; $fuel is the global, $len the scratch
// global):
//
//	entry:   global.get $fuel  local.set $l  (check)
//	check:   local.get $l  i64.const 1  i64.sub  local.tee $l
//	         i64.const 0  i64.lt_s  if  local.get $l  global.set $fuel
//	         unreachable  end
//	save:    local.get $l  global.set $fuel
//	restore: global.get $fuel  local.set $l
//	bulk:    global.set $len  global.get $len  local.get $l  global.get $len
//	         i64.extend_i32_u  i64.const shift  i64.shr_u  i64.const 1
//	         i64.add  i64.sub  local.tee $l  (the test of check)
//
// Each is stack-neutral, so valid wherever it goes.
type snippets struct {
	entry, check, save, restore, bulkBytes, bulkElems []byte
}

func newSnippets(fuel, local uint32) snippets {
	lget := func(b []byte) []byte { return appendU32(append(b, opLocalGet), local) }
	test := func(b []byte) []byte {
		b = appendU32(append(b, opLocalTee), local)
		b = append(b, opI64Const, 0, opI64LtS, opIf, blockTypeEmpty)
		b = appendU32(append(lget(b), opGlobalSet), fuel)
		return append(b, opUnreachable, opEnd)
	}
	var sn snippets
	sn.save = appendU32(append(lget(nil), opGlobalSet), fuel)
	sn.restore = appendU32(append(appendU32([]byte{opGlobalGet}, fuel), opLocalSet), local)
	sn.check = test(append(lget(nil), opI64Const, 1, opI64Sub))
	sn.entry = append(append([]byte(nil), sn.restore...), sn.check...)
	bulk := func(shift byte) []byte {
		scratch := fuel + 1
		b := appendU32([]byte{opGlobalSet}, scratch)
		b = appendU32(append(b, opGlobalGet), scratch)
		b = lget(b)
		b = appendU32(append(b, opGlobalGet), scratch)
		b = append(b, opI64ExtendI32U, opI64Const, shift, opI64ShrU, opI64Const, 1, opI64Add, opI64Sub)
		return test(b)
	}
	sn.bulkBytes, sn.bulkElems = bulk(bulkMemoryShift), bulk(0)
	return sn
}

func (sn *snippets) at(p point) []byte {
	switch p.kind {
	case atLoop:
		return sn.check
	case atSave:
		return sn.save
	case atRestore:
		return sn.restore
	case atBulkBytes:
		return sn.bulkBytes
	}
	return sn.bulkElems
}

// assemble writes the instrumented module.
func (m *module) assemble(opts Options) ([]byte, error) {
	in := m.buf
	out := make([]byte, 0, len(in)+len(m.code)-m.codeInputSize+64)
	out = append(out, in[:8]...) // magic and version

	globalIdx := m.importedGlobals + m.definedGlobals
	newGlobal := []byte{valI64, 1, opI64Const}
	newGlobal = appendS64(newGlobal, opts.InitialFuel)
	newGlobal = append(newGlobal, opEnd, valI32, 1, opI32Const, 0, opEnd)
	newExport := appendU32(nil, uint32(len(FuelExport)))
	newExport = append(newExport, FuelExport...)
	newExport = append(newExport, externGlobal)
	newExport = appendU32(newExport, globalIdx)

	globalSection := func() []byte {
		c := appendU32(nil, m.definedGlobals+newGlobals)
		if m.globalSec >= 0 {
			c = append(c, in[m.globalEntries:m.sections[m.globalSec].end]...)
		}
		return append(c, newGlobal...)
	}
	exportSection := func() []byte {
		c := appendU32(nil, m.exportCount+1)
		if m.exportSec >= 0 {
			c = append(c, in[m.exportEntries:m.sections[m.exportSec].end]...)
		}
		return append(c, newExport...)
	}

	var err error
	emit := func(id byte, content []byte) {
		if err != nil {
			return
		}
		if uint64(len(content)) > maxU32 {
			err = &UnsupportedError{Offset: len(in), Feature: "instrumented section larger than 4 GiB"}
			return
		}
		out = append(out, id)
		out = appendU32(out, uint32(len(content)))
		out = append(out, content...)
	}
	// A missing global or export section goes right after the last
	// non-custom section that precedes it in the standard order, so that the
	// module still ends with the section it ended with: wazero v1.12 rejects
	// a module whose last section is a custom section with an empty payload
	// (and only then), so moving such a section to or from the end would
	// change whether wazero accepts the module.
	insertAt := func(id byte) int {
		at := -1
		if m.globalSec >= 0 && id == secGlobal || m.exportSec >= 0 && id == secExport {
			return at
		}
		at = 0
		for i, s := range m.sections {
			if s.id != secCustom && sectionRank(s.id) < sectionRank(id) {
				at = i + 1
			}
		}
		return at
	}
	globalAt, exportAt := insertAt(secGlobal), insertAt(secExport)
	last := len(m.sections) - 1
	for i := 0; i <= len(m.sections); i++ {
		if i == globalAt {
			emit(secGlobal, globalSection())
		}
		if i == exportAt {
			emit(secExport, exportSection())
		}
		if i > last {
			break
		}
		switch s := m.sections[i]; {
		case i == m.globalSec:
			emit(secGlobal, globalSection())
		case i == m.exportSec:
			emit(secExport, exportSection())
		case i == m.codeSec:
			emit(secCode, m.code)
		case s.dwarf && i != last:
			// Dropped (see the package documentation); the last section is
			// kept whatever it is, for the reason above.
		default:
			out = append(out, in[s.start:s.end]...)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
