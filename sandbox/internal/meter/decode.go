package meter

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// This file walks a module's binary encoding. It mirrors the decoder of
// wazero v1.12 (github.com/tetratelabs/wazero/internal/wasm/binary and the
// immediates read by internal/wasm/func_validation.go) so that an instruction
// boundary found here is one wazero finds too: a fuel check inserted at a
// boundary wazero does not see would corrupt the module. Where the two might
// differ on odd encodings this decoder is the stricter one and fails.

const maxU32 = math.MaxUint32

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// sectionRank is the position a non-custom section takes in a module: ranks
// strictly increase from one non-custom section to the next. The tag section
// (exception handling) sits between memory and global, the data count
// section between element and code.
func sectionRank(id byte) int {
	switch id {
	case secType, secImport, secFunction, secTable, secMemory:
		return int(id)
	case secTag:
		return 6
	case secGlobal, secExport, secStart, secElement:
		return int(id) + 1
	case secDataCount:
		return 11
	case secCode:
		return 12
	case secData:
		return 13
	}
	return -1
}

// Opcodes and type bytes used by the decoder and the injected check.
const (
	opUnreachable   = 0x00
	opBlock         = 0x02
	opLoop          = 0x03
	opIf            = 0x04
	opEnd           = 0x0b
	opGlobalGet     = 0x23
	opGlobalSet     = 0x24
	opI64Const      = 0x42
	opI64LtS        = 0x53
	opI64Sub        = 0x7d
	opI64Add        = 0x7c
	opI64ShrU       = 0x88
	opI64ExtendI32U = 0xad
	opI32Const      = 0x41
	opLocalGet      = 0x20
	opLocalSet      = 0x21
	opLocalTee      = 0x22

	blockTypeEmpty = 0x40
	valI64         = 0x7e
	valI32         = 0x7f
	externGlobal   = 0x03

	refNullable    = 0x63 // (ref null ht)
	refNonNullable = 0x64 // (ref ht)
	heapFunc       = -16  // abstract heap types, as s33
	heapExtern     = -17
	heapExn        = -23
)

// section is one section of the input: the header starts at start, the
// content runs from content to end.
type section struct {
	id                  byte
	start, content, end int
	dwarf               bool // a custom section named ".debug_*"
}

// module is what Instrument needs to know about its input.
type module struct {
	buf      []byte
	sections []section

	importedGlobals uint32
	definedGlobals  uint32
	exportCount     uint32
	types           uint32   // entries in the type section, rec groups flattened
	funcCount       uint32   // entries in the function section
	params          []uint32 // parameter count of each type
	funcTypes       []uint32 // type index of each defined function
	bodyCount       uint32   // entries in the code section

	globalSec, exportSec, codeSec int // indexes in sections, or -1
	globalEntries, exportEntries  int // offsets of the first entry (after the count)

	code          []byte  // the instrumented content of the code section
	codeInputSize int     // the size of the original content
	points        []point // scratch: metering points of the current function
	fuelIdx       uint32  // the index the fuel global gets (the scratch one follows)
	scratch       []byte  // the function body being instrumented
	info          Info
}

// point is where code goes in a function body, at pos, and which.
type point struct {
	pos  int
	kind pointKind
}

type pointKind uint8

const (
	atLoop      pointKind = iota // the top of a loop body: one unit
	atSave                       // before a call, return or exit: store the fuel
	atRestore                    // after a call: load the fuel
	atBulkBytes                  // before memory.fill/copy/init: 1 + len>>bulkMemoryShift
	atBulkElems                  // before table.grow/fill/copy/init: 1 + len
)

// reader reads the input from pos up to end; offsets are from the start of
// the whole input, so errors name the right place.
type reader struct {
	buf      []byte
	pos, end int
	// types is the number of types (tags must name one: wazero v1.12
	// panics on a try_table catching a tag whose type does not exist).
	types uint32
	// globals is the size of the global index space that references may use
	// here. A reference beyond it is invalid in the input, but would become
	// valid in the output, where the fuel global takes the next index, so
	// it is refused.
	globals uint32
}

// globalIndex reads a global index.
func (r *reader) globalIndex() error {
	at := r.pos
	idx, err := r.u32()
	if err != nil {
		return err
	}
	if idx >= r.globals {
		return &FormatError{Offset: at, Reason: fmt.Sprintf("global index %d out of range (%d globals)", idx, r.globals)}
	}
	return nil
}

func (r *reader) errf(format string, args ...any) error {
	return &FormatError{Offset: r.pos, Reason: fmt.Sprintf(format, args...)}
}

func unsupported(off int, format string, args ...any) error {
	return &UnsupportedError{Offset: off, Feature: fmt.Sprintf(format, args...)}
}

func (r *reader) remaining() int { return r.end - r.pos }

func (r *reader) byte() (byte, error) {
	if r.pos >= r.end {
		return 0, r.errf("unexpected end")
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

// expect reads one byte that must be want.
func (r *reader) expect(want byte, what string) error {
	at := r.pos
	b, err := r.byte()
	if err != nil {
		return err
	}
	if b != want {
		return &FormatError{Offset: at, Reason: fmt.Sprintf("%s: got %#x, want %#x", what, b, want)}
	}
	return nil
}

func (r *reader) skip(n int) error {
	if n < 0 || n > r.remaining() {
		return r.errf("unexpected end (%d bytes needed, %d left)", n, r.remaining())
	}
	r.pos += n
	return nil
}

// sub returns a reader for the next n bytes and skips them in r.
func (r *reader) sub(n int) (reader, error) {
	s := *r
	s.end = r.pos + n
	if err := r.skip(n); err != nil {
		return reader{}, err
	}
	return s, nil
}

// u32 reads an unsigned LEB128 integer of at most 32 bits.
func (r *reader) u32() (uint32, error) {
	start := r.pos
	var v uint32
	for i := 0; i < 5; i++ {
		b, err := r.byte()
		if err != nil {
			return 0, err
		}
		if i == 4 && b&0xf0 != 0 {
			return 0, &FormatError{Offset: start, Reason: "u32 LEB128 overflows 32 bits"}
		}
		v |= uint32(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			return v, nil
		}
	}
	return 0, &FormatError{Offset: start, Reason: "u32 LEB128 longer than 5 bytes"}
}

// signed reads a signed LEB128 integer of at most bits bits (32, 33 or 64),
// checking that the unused bits of a maximal-length encoding are sign
// extension, as the specification requires.
func (r *reader) signed(bits int) (int64, error) {
	start := r.pos
	maxLen := (bits + 6) / 7
	var v int64
	for i := 0; i < maxLen; i++ {
		b, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= int64(b&0x7f) << (7 * i)
		if b&0x80 != 0 {
			continue
		}
		shift := 7 * (i + 1)
		if i == maxLen-1 {
			// Bits (bits-1-7*i) .. 6 of the last byte must all equal the sign.
			used := bits - 7*i
			mask := byte(0x7f) &^ (1<<(used-1) - 1)
			if u := b & mask; u != 0 && u != mask {
				return 0, &FormatError{Offset: start, Reason: fmt.Sprintf("s%d LEB128 overflows %d bits", bits, bits)}
			}
		}
		if shift < 64 && b&0x40 != 0 {
			v |= -1 << shift
		}
		return v, nil
	}
	return 0, &FormatError{Offset: start, Reason: fmt.Sprintf("s%d LEB128 longer than %d bytes", bits, maxLen)}
}

// count reads a vector length, which cannot exceed the bytes that remain
// (every element takes at least one byte).
func (r *reader) count(what string) (uint32, error) {
	at := r.pos
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if int64(n) > int64(r.remaining()) {
		return 0, &FormatError{Offset: at, Reason: fmt.Sprintf("%d %s declared but only %d bytes follow", n, what, r.remaining())}
	}
	return n, nil
}

// name reads a length-prefixed UTF-8 string.
func (r *reader) name(what string) ([]byte, error) {
	n, err := r.count("bytes of " + what)
	if err != nil {
		return nil, err
	}
	b := r.buf[r.pos : r.pos+int(n)]
	if !utf8.Valid(b) {
		return nil, r.errf("%s is not valid UTF-8", what)
	}
	r.pos += int(n)
	return b, nil
}

// heapType reads the heap type of a (ref null? ht) value type.
func (r *reader) heapType() error {
	at := r.pos
	ht, err := r.signed(33)
	if err != nil {
		return err
	}
	if ht < 0 && ht != heapFunc && ht != heapExtern && ht != heapExn {
		return unsupported(at, "heap type %d", ht)
	}
	return nil
}

// valType reads a value type.
func (r *reader) valType() error {
	at := r.pos
	b, err := r.byte()
	if err != nil {
		return err
	}
	switch b {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69: // i32 i64 f32 f64 v128 funcref externref exnref
		return nil
	case refNullable, refNonNullable:
		return r.heapType()
	}
	return &FormatError{Offset: at, Reason: fmt.Sprintf("invalid value type %#x", b)}
}

// refType reads the reference type of a table or an element segment.
func (r *reader) refType() error {
	at := r.pos
	b, err := r.byte()
	if err != nil {
		return err
	}
	switch b {
	case 0x70, 0x6f:
		return nil
	case refNullable, refNonNullable:
		return r.heapType()
	}
	return &FormatError{Offset: at, Reason: fmt.Sprintf("invalid reference type %#x", b)}
}

// limits reads the limits of a table or memory.
func (r *reader) limits(memory bool) (Limits, error) {
	at := r.pos
	var l Limits
	flag, err := r.byte()
	if err != nil {
		return l, err
	}
	switch {
	case flag > 0x07:
		return l, &FormatError{Offset: at, Reason: fmt.Sprintf("invalid limits flag %#x", flag)}
	case flag >= 0x04:
		return l, unsupported(at, "memory64 (limits flag %#x)", flag)
	case flag >= 0x02 && !memory:
		return l, &FormatError{Offset: at, Reason: "tables cannot be shared"}
	}
	if l.Min, err = r.u32(); err != nil {
		return l, err
	}
	if flag&1 != 0 {
		l.HasMax = true
		if l.Max, err = r.u32(); err != nil {
			return l, err
		}
	}
	return l, nil
}

// tableType reads a table type, optionally prefixed by 0x40 0x00 and
// followed by an initialiser expression (typed function references).
func (r *reader) tableType() (Limits, error) {
	init := r.pos < r.end && r.buf[r.pos] == 0x40
	if init {
		r.pos++
		if err := r.expect(0x00, "reserved byte of table with initialiser"); err != nil {
			return Limits{}, err
		}
	}
	if err := r.refType(); err != nil {
		return Limits{}, err
	}
	l, err := r.limits(false)
	if err != nil {
		return l, err
	}
	if init {
		return l, r.constExpr()
	}
	return l, nil
}

// globalType reads a value type and a mutability flag.
func (r *reader) globalType() error {
	if err := r.valType(); err != nil {
		return err
	}
	at := r.pos
	mut, err := r.byte()
	if err != nil {
		return err
	}
	if mut > 1 {
		return &FormatError{Offset: at, Reason: fmt.Sprintf("invalid mutability %#x", mut)}
	}
	return nil
}

// refNullType reads the heap type immediate of ref.null as wazero does: one
// of the bytes for func, extern and exn, or else a type index.
func (r *reader) refNullType() error {
	if r.pos < r.end {
		switch r.buf[r.pos] {
		case 0x70, 0x6f, 0x69:
			r.pos++
			return nil
		}
	}
	_, err := r.u32()
	return err
}

// constExpr reads a constant expression up to and including its end.
func (r *reader) constExpr() error {
	for {
		at := r.pos
		op, err := r.byte()
		if err != nil {
			return err
		}
		switch op {
		case 0x41: // i32.const
			_, err = r.signed(32)
		case 0x42: // i64.const
			_, err = r.signed(64)
		case 0x43: // f32.const
			err = r.skip(4)
		case 0x44: // f64.const
			err = r.skip(8)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended-const add, sub, mul
		case opGlobalGet:
			err = r.globalIndex()
		case 0xd2: // ref.func
			_, err = r.u32()
		case 0xd0: // ref.null
			err = r.refNullType()
		case 0xfd: // v128.const
			if err = r.expect(0x0c, "vector opcode in constant expression"); err == nil {
				err = r.skip(16)
			}
		case opEnd:
			return nil
		default:
			return &FormatError{Offset: at, Reason: fmt.Sprintf("opcode %#x in constant expression", op)}
		}
		if err != nil {
			return err
		}
	}
}

// parseModule checks the structure of the whole module and instruments its
// code section.
func parseModule(in []byte) (*module, error) {
	if len(in) < 8 || !bytes.Equal(in[:4], []byte("\x00asm")) {
		return nil, &FormatError{Offset: 0, Reason: "not a WebAssembly binary (bad magic number)"}
	}
	if !bytes.Equal(in[4:8], []byte{1, 0, 0, 0}) {
		return nil, &FormatError{Offset: 4, Reason: fmt.Sprintf("unsupported binary version % x (a component?)", in[4:8])}
	}
	m := &module{buf: in, globalSec: -1, exportSec: -1, codeSec: -1}
	r := reader{buf: in, pos: 8, end: len(in)}
	lastRank := 0
	sawName := false
	for r.pos < r.end {
		s := section{start: r.pos}
		s.id, _ = r.byte()
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		if int64(size) > int64(r.remaining()) {
			return nil, r.errf("section %d claims %d bytes, %d left", s.id, size, r.remaining())
		}
		s.content, s.end = r.pos, r.pos+int(size)
		sr := reader{buf: in, pos: s.content, end: s.end, types: m.types, globals: m.importedGlobals + m.definedGlobals}
		r.pos = s.end

		if s.id != secCustom {
			rank := sectionRank(s.id)
			if rank < 0 {
				return nil, &FormatError{Offset: s.start, Reason: fmt.Sprintf("unknown section id %d", s.id)}
			}
			if rank <= lastRank {
				return nil, &FormatError{Offset: s.start, Reason: fmt.Sprintf("section %d out of order or repeated", s.id)}
			}
			lastRank = rank
		}
		idx := len(m.sections)
		switch s.id {
		case secCustom:
			var name []byte
			if name, err = sr.name("custom section name"); err != nil {
				return nil, err
			}
			switch n := string(name); {
			case n == "name":
				if sawName {
					return nil, &FormatError{Offset: s.start, Reason: "second name section"}
				}
				sawName = true
				err = sr.nameSection()
			case strings.HasPrefix(n, ".debug_"):
				s.dwarf = true
			}
			sr.pos = sr.end // the content of other custom sections is opaque
		case secType:
			m.types, err = sr.typeSection(&m.params)
		case secImport:
			m.importedGlobals, err = sr.importSection(&m.info)
		case secFunction:
			m.funcCount, err = sr.vector("functions", func() error {
				at := sr.pos
				t, err := sr.u32()
				if err == nil && t >= uint32(len(m.params)) {
					err = &FormatError{Offset: at, Reason: fmt.Sprintf("function type index %d out of range (%d types)", t, len(m.params))}
				}
				m.funcTypes = append(m.funcTypes, t)
				return err
			})
		case secTable:
			_, err = sr.vector("tables", func() error {
				l, err := sr.tableType()
				m.info.Tables = append(m.info.Tables, l)
				return err
			})
		case secMemory:
			err = sr.memorySection(&m.info)
		case secTag:
			_, err = sr.vector("tags", sr.tagType)
		case secGlobal:
			m.globalSec = idx
			if m.definedGlobals, err = sr.count("globals"); err != nil {
				return nil, err
			}
			sr.globals += m.definedGlobals
			m.globalEntries = sr.pos
			for i := uint32(0); i < m.definedGlobals && err == nil; i++ {
				if err = sr.globalType(); err == nil {
					err = sr.constExpr()
				}
			}
		case secExport:
			m.exportSec = idx
			if m.exportCount, err = sr.count("exports"); err != nil {
				return nil, err
			}
			m.exportEntries = sr.pos
			for i := uint32(0); i < m.exportCount && err == nil; i++ {
				err = sr.export()
			}
		case secStart, secDataCount:
			_, err = sr.u32()
		case secElement:
			_, err = sr.vector("element segments", sr.elementSegment)
		case secCode:
			m.codeSec = idx
			if uint64(m.importedGlobals)+uint64(m.definedGlobals)+newGlobals > maxGlobals {
				return nil, unsupported(s.start, "more than %d globals", maxGlobals-newGlobals)
			}
			m.fuelIdx = m.importedGlobals + m.definedGlobals
			err = m.codeSection(&sr)
		case secData:
			_, err = sr.vector("data segments", sr.dataSegment)
		}
		if err != nil {
			return nil, err
		}
		if sr.pos != sr.end {
			return nil, &FormatError{Offset: sr.pos, Reason: fmt.Sprintf("section %d has %d bytes left over", s.id, sr.end-sr.pos)}
		}
		m.sections = append(m.sections, s)
	}
	if uint64(m.importedGlobals)+uint64(m.definedGlobals)+newGlobals > maxGlobals {
		return nil, unsupported(len(in), "more than %d globals", maxGlobals-newGlobals)
	}
	if m.bodyCount != m.funcCount {
		return nil, &FormatError{Offset: len(in), Reason: fmt.Sprintf("%d functions declared but %d bodies", m.funcCount, m.bodyCount)}
	}
	return m, nil
}

// vector reads a count and then count elements with elem.
func (r *reader) vector(what string, elem func() error) (uint32, error) {
	n, err := r.count(what)
	if err != nil {
		return 0, err
	}
	for i := uint32(0); i < n; i++ {
		if err := elem(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// funcTypeBody reads a function type after its 0x60 tag.
func (r *reader) funcTypeBody() (params uint32, err error) {
	for i := range 2 { // parameters, results
		n, err := r.vector("value types", r.valType)
		if err != nil {
			return 0, err
		}
		if i == 0 {
			params = n
		}
	}
	return params, nil
}

// funcType reads a function type.
func (r *reader) funcType(params *[]uint32) error {
	at := r.pos
	b, err := r.byte()
	if err != nil {
		return err
	}
	if b != 0x60 {
		return unsupportedType(at, b)
	}
	n, err := r.funcTypeBody()
	*params = append(*params, n)
	return err
}

func unsupportedType(at int, b byte) error {
	switch b {
	case 0x50, 0x4f, 0x5f, 0x5e: // sub, sub final, struct, array
		return unsupported(at, "garbage collection type %#x", b)
	}
	return &FormatError{Offset: at, Reason: fmt.Sprintf("invalid type form %#x", b)}
}

// typeSection reads the type section and returns the number of types.
// It appends each type's parameter count to params.
func (r *reader) typeSection(params *[]uint32) (uint32, error) {
	var types uint32
	_, err := r.vector("types", func() error {
		at := r.pos
		b, err := r.byte()
		if err != nil {
			return err
		}
		switch b {
		case 0x60:
			types++
			n, err := r.funcTypeBody()
			*params = append(*params, n)
			return err
		case 0x4e: // rec group
			n, err := r.vector("types in rec group", func() error { return r.funcType(params) })
			types += n
			return err
		}
		return unsupportedType(at, b)
	})
	return types, err
}

// tagType reads the attribute and type index of a tag.
func (r *reader) tagType() error {
	if err := r.expect(0x00, "tag attribute"); err != nil {
		return err
	}
	at := r.pos
	idx, err := r.u32()
	if err != nil {
		return err
	}
	if idx >= r.types {
		return &FormatError{Offset: at, Reason: fmt.Sprintf("tag type index %d out of range (%d types)", idx, r.types)}
	}
	return nil
}

// importSection reads the imports and returns how many are globals.
func (r *reader) importSection(info *Info) (uint32, error) {
	var globals uint32
	_, err := r.vector("imports", func() error {
		mod, err := r.name("import module name")
		if err != nil {
			return err
		}
		name, err := r.name("import name")
		if err != nil {
			return err
		}
		at := r.pos
		kind, err := r.byte()
		if err != nil {
			return err
		}
		if kind <= 0x04 {
			info.Imports = append(info.Imports, Import{Module: string(mod), Name: string(name), Kind: ImportKind(kind)})
		}
		var l Limits
		switch kind {
		case 0x00: // func
			_, err = r.u32()
		case 0x01:
			l, err = r.tableType()
			info.Tables = append(info.Tables, l)
		case 0x02:
			l, err = r.limits(true)
			info.Memories = append(info.Memories, l)
		case 0x03:
			globals++
			err = r.globalType()
		case 0x04:
			err = r.tagType()
		default:
			err = &FormatError{Offset: at, Reason: fmt.Sprintf("invalid import kind %#x", kind)}
		}
		return err
	})
	return globals, err
}

func (r *reader) memorySection(info *Info) error {
	at := r.pos
	n, err := r.count("memories")
	if err != nil {
		return err
	}
	if n+uint32(len(info.Memories)) > 1 {
		return unsupported(at, "multi-memory (%d memories)", n+uint32(len(info.Memories)))
	}
	if n == 1 {
		l, err := r.limits(true)
		info.Memories = append(info.Memories, l)
		return err
	}
	return nil
}

func (r *reader) export() error {
	name, err := r.name("export name")
	if err != nil {
		return err
	}
	if string(name) == FuelExport {
		return ErrFuelExportExists
	}
	at := r.pos
	kind, err := r.byte()
	if err != nil {
		return err
	}
	switch {
	case kind > 0x04:
		return &FormatError{Offset: at, Reason: fmt.Sprintf("invalid export kind %#x", kind)}
	case kind == externGlobal:
		return r.globalIndex()
	}
	_, err = r.u32()
	return err
}

func (r *reader) elementSegment() error {
	at := r.pos
	flags, err := r.u32()
	if err != nil {
		return err
	}
	if flags > 7 {
		return &FormatError{Offset: at, Reason: fmt.Sprintf("invalid element segment flags %d", flags)}
	}
	if flags&2 != 0 && flags&1 == 0 { // active, with a table index
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	if flags&1 == 0 { // active: offset
		if err := r.constExpr(); err != nil {
			return err
		}
	}
	exprs := flags&4 != 0
	if flags&3 != 0 { // element kind or reference type
		if exprs {
			err = r.refType()
		} else {
			err = r.expect(0x00, "element kind")
		}
		if err != nil {
			return err
		}
	}
	if exprs {
		_, err = r.vector("element expressions", r.constExpr)
	} else {
		_, err = r.vector("function indexes", func() error { _, err := r.u32(); return err })
	}
	return err
}

func (r *reader) dataSegment() error {
	at := r.pos
	flags, err := r.u32()
	if err != nil {
		return err
	}
	switch flags {
	case 0:
	case 1:
	case 2:
		mi := r.pos
		idx, err := r.u32()
		if err != nil {
			return err
		}
		if idx != 0 {
			return unsupported(mi, "multi-memory (data segment for memory %d)", idx)
		}
	default:
		return &FormatError{Offset: at, Reason: fmt.Sprintf("invalid data segment flags %d", flags)}
	}
	if flags != 1 {
		if err := r.constExpr(); err != nil {
			return err
		}
	}
	n, err := r.count("data bytes")
	if err != nil {
		return err
	}
	return r.skip(int(n))
}

// nameSection checks the "name" custom section the way wazero reads it: the
// module name, function names and local names subsections are decoded
// (wazero allocates by their declared counts), the others skipped.
func (r *reader) nameSection() error {
	for r.pos < r.end {
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return err
		}
		s, err := r.sub(int(min(size, maxU32>>1)))
		if err != nil {
			return err
		}
		nameMap := func() error {
			_, err := s.vector("names", func() error {
				if _, err := s.u32(); err != nil {
					return err
				}
				_, err := s.name("name")
				return err
			})
			return err
		}
		switch id {
		case 0:
			_, err = s.name("module name")
		case 1:
			err = nameMap()
		case 2:
			_, err = s.vector("functions", func() error {
				if _, err := s.u32(); err != nil {
					return err
				}
				return nameMap()
			})
		default:
			s.pos = s.end
		}
		if err != nil {
			return err
		}
		if s.pos != s.end {
			return s.errf("name subsection %d has %d bytes left over", id, s.end-s.pos)
		}
	}
	return nil
}

// codeSection instruments every function body into m.code.
func (m *module) codeSection(r *reader) error {
	m.codeInputSize = r.remaining()
	n, err := r.count("function bodies")
	if err != nil {
		return err
	}
	if n != m.funcCount {
		return &FormatError{Offset: r.pos, Reason: fmt.Sprintf("%d functions declared but %d bodies", m.funcCount, n)}
	}
	m.code = make([]byte, 0, r.remaining()+r.remaining()/4+64*int(n)+5)
	m.code = appendU32(m.code, n)
	m.bodyCount = n
	for i := uint32(0); i < n; i++ {
		size, err := r.u32()
		if err != nil {
			return err
		}
		body, err := r.sub(int(min(size, maxU32>>1)))
		if err != nil {
			return err
		}
		if err := m.body(&body, m.params[m.funcTypes[i]]); err != nil {
			return err
		}
	}
	return nil
}

// body instruments one function body (locals and code) into m.code. The
// function keeps its fuel in a new i64 local (a register, where the global
// is a memory access): loaded from the global on entry and after every
// call, stored back before every call, return and trap.
func (m *module) body(r *reader, params uint32) error {
	decls, err := r.count("local declarations")
	if err != nil {
		return err
	}
	entries := r.pos
	var locals uint64
	for range decls {
		at := r.pos
		n, err := r.u32()
		if err != nil {
			return err
		}
		if locals += uint64(n); locals > MaxLocals {
			return unsupported(at, "function with more than %d locals", MaxLocals)
		}
		if err := r.valType(); err != nil {
			return err
		}
	}
	if uint64(params)+locals >= maxU32 {
		return unsupported(entries, "function with %d parameters and locals", uint64(params)+locals)
	}
	codeStart := r.pos
	m.points = m.points[:0]
	if err := m.scanCode(r); err != nil {
		return err
	}
	sn := newSnippets(m.fuelIdx, uint32(uint64(params)+locals))
	b := m.scratch[:0]
	b = appendU32(b, decls+1)
	b = append(b, r.buf[entries:codeStart]...)
	b = append(b, 1, valI64)
	b = append(b, sn.entry...)
	last := codeStart
	for _, p := range m.points {
		b = append(b, r.buf[last:p.pos]...)
		b = append(b, sn.at(p)...)
		last = p.pos
	}
	b = append(b, r.buf[last:r.end]...)
	m.scratch = b
	if uint64(len(b)) > maxU32 {
		return unsupported(codeStart, "instrumented function body larger than 4 GiB")
	}
	m.code = appendU32(m.code, uint32(len(b)))
	m.code = append(m.code, b...)
	return nil
}

// blockType reads the block type of block, loop, if and try_table: an s33
// that is 0x40 (empty), a value type or a type index, with a heap type after
// the (ref null? ht) prefixes.
func (r *reader) blockType() error {
	bt, err := r.signed(33)
	if err != nil {
		return err
	}
	if bt == refNullable-0x80 || bt == refNonNullable-0x80 {
		return r.heapType()
	}
	return nil
}

// memArg reads the alignment and offset of a memory access.
func (r *reader) memArg() error {
	at := r.pos
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align >= 64 {
		return unsupported(at, "multi-memory (memory index flag in alignment %#x)", align)
	}
	if align >= 32 {
		return &FormatError{Offset: at, Reason: fmt.Sprintf("invalid alignment %d", align)}
	}
	_, err = r.u32()
	return err
}

// memIndex reads the memory index immediate of memory.size, memory.grow
// and the bulk memory instructions, which must be a single zero byte.
func (r *reader) memIndex() error {
	at := r.pos
	b, err := r.byte()
	if err != nil {
		return err
	}
	if b != 0 {
		if b < 0x80 {
			return unsupported(at, "multi-memory (memory index %d)", b)
		}
		return &FormatError{Offset: at, Reason: "memory index must be a single zero byte"}
	}
	return nil
}

// scanCode walks the instructions of a function body up to its final end,
// which must be its last byte, and records in m.points where each loop body
// starts.
func (m *module) scanCode(r *reader) error {
	u32 := func() error { _, err := r.u32(); return err }
	depth := 1
	for depth > 0 {
		at := r.pos
		op, err := r.byte()
		if err != nil {
			return r.errf("function body ends inside a block")
		}
		switch {
		case op <= 0x01 || op == 0x05 || op == 0x1a || op == 0x1b ||
			(op >= 0x45 && op <= 0xc4) || op == 0xd1 || op == 0xd4:
			// unreachable, nop, else, drop, select, numeric instructions,
			// ref.is_null, ref.as_non_null: no immediates.
		case op == 0x0f: // return
			m.points = append(m.points, point{pos: at, kind: atSave})
		case op == 0x08 || op == 0x0a || op == 0x1f:
			// A throw leaves functions without the store before a return,
			// so a callee's spending would be lost to a catching caller.
			return unsupported(at, "exception handling (opcode %#x)", op)
		case op == opBlock || op == opIf:
			err = r.blockType()
			depth++
		case op == opLoop:
			err = r.blockType()
			depth++
			m.points = append(m.points, point{pos: r.pos, kind: atLoop})
		case op == opEnd:
			depth--
			if depth == 0 {
				m.points = append(m.points, point{pos: at, kind: atSave})
			}
		case op == 0x0c || op == 0x0d || op == 0xd5 || op == 0xd6:
			// br, br_if, br_on_null, br_on_non_null: a branch to the
			// function's own label returns.
			var l uint32
			if l, err = r.u32(); err == nil && l == uint32(depth-1) {
				m.points = append(m.points, point{pos: at, kind: atSave})
			}
		case op == 0x10 || op == 0x14: // call, call_ref
			m.points = append(m.points, point{pos: at, kind: atSave})
			if err = u32(); err == nil {
				m.points = append(m.points, point{pos: r.pos, kind: atRestore})
			}
		case op == 0x12 || op == 0x15: // return_call, return_call_ref
			m.points = append(m.points, point{pos: at, kind: atSave})
			err = u32()
		case (op >= 0x20 && op <= 0x22) || op == 0x25 || op == 0x26 || op == 0xd2:
			// local.*, table.get/set, ref.func.
			err = u32()
		case op == opGlobalGet || op == opGlobalSet:
			err = r.globalIndex()
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			m.points = append(m.points, point{pos: at, kind: atSave})
			if err = u32(); err == nil {
				err = u32()
			}
			if err == nil && op == 0x11 {
				m.points = append(m.points, point{pos: r.pos, kind: atRestore})
			}
		case op == 0x0e: // br_table
			var n, l uint32
			toFunc := false
			if n, err = r.count("br_table labels"); err == nil {
				for i := uint32(0); i <= n && err == nil; i++ { // n labels and the default
					l, err = r.u32()
					toFunc = toFunc || l == uint32(depth-1)
				}
			}
			if toFunc {
				m.points = append(m.points, point{pos: at, kind: atSave})
			}
		case op == 0x1c: // select t*
			err = r.expect(1, "number of select types")
			if err == nil {
				err = r.valType()
			}
		case op >= 0x28 && op <= 0x3e:
			err = r.memArg()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			err = r.memIndex()
		case op == 0x41:
			_, err = r.signed(32)
		case op == 0x42:
			_, err = r.signed(64)
		case op == 0x43:
			err = r.skip(4)
		case op == 0x44:
			err = r.skip(8)
		case op == 0xd0: // ref.null
			err = r.refNullType()
		case op == 0xfc:
			var sub uint32
			if sub, err = r.miscInstr(); err == nil {
				switch sub {
				case 8, 10, 11: // memory.init, memory.copy, memory.fill: bytes
					m.points = append(m.points, point{pos: at, kind: atBulkBytes})
				case 12, 14, 15, 17: // table.init, table.copy, table.grow, table.fill: elements
					m.points = append(m.points, point{pos: at, kind: atBulkElems})
					m.info.TableGrow = m.info.TableGrow || sub == 15
				}
			}
		case op == 0xfd:
			err = r.vectorInstr()
		case op == 0xfe:
			err = r.atomicInstr()
		case op == 0xfb:
			return unsupported(at, "garbage collection instruction")
		case op == 0x06 || op == 0x07 || op == 0x09 || op == 0x18 || op == 0x19:
			return unsupported(at, "legacy exception handling (opcode %#x); recompile with exnref (try_table)", op)
		default:
			return &FormatError{Offset: at, Reason: fmt.Sprintf("unknown opcode %#x", op)}
		}
		if err != nil {
			return err
		}
	}
	if r.pos != r.end {
		return r.errf("%d bytes after the end of the function body", r.end-r.pos)
	}
	return nil
}

// miscInstr reads an 0xFC-prefixed instruction after the prefix.
func (r *reader) miscInstr() (uint32, error) {
	at := r.pos
	sub, err := r.u32()
	if err != nil {
		return 0, err
	}
	u32 := func() error { _, err := r.u32(); return err }
	switch sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // *.trunc_sat_*
		return sub, nil
	case 8: // memory.init data 0
		if err := u32(); err != nil {
			return 0, err
		}
		return sub, r.memIndex()
	case 9, 13, 15, 16, 17: // data.drop, elem.drop, table.grow, table.size, table.fill
		return sub, u32()
	case 10: // memory.copy 0 0
		if err := r.memIndex(); err != nil {
			return 0, err
		}
		return sub, r.memIndex()
	case 11: // memory.fill 0
		return sub, r.memIndex()
	case 12, 14: // table.init elem table, table.copy dst src
		if err := u32(); err != nil {
			return 0, err
		}
		return sub, u32()
	}
	return 0, unsupported(at, "instruction 0xfc %d", sub)
}

// simdInvalid marks the opcodes under 0xFD (all below 0x100) that wazero
// does not define.
var simdInvalid = func() (t [256]bool) {
	for _, op := range []byte{0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb,
		0xc2, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee} {
		t[op] = true
	}
	return t
}()

// vectorInstr reads an 0xFD-prefixed (SIMD) instruction after the prefix.
// The sub-opcode is a u32 LEB128; wazero reads it as one byte, which gives
// the same instruction boundaries for the canonical encodings (an opcode
// 0x80-0xFF is encoded as op, 0x01, and wazero decodes the 0x01 as a nop), so
// other encodings are refused.
func (r *reader) vectorInstr() error {
	at := r.pos
	op, err := r.byte()
	if err != nil {
		return err
	}
	if op >= 0x80 {
		if r.pos >= r.end || r.buf[r.pos] != 0x01 {
			return unsupported(at, "SIMD opcode encoding starting % x (relaxed SIMD or non-canonical)", r.buf[at:min(at+2, r.end)])
		}
		r.pos++
	}
	switch {
	case op <= 0x0b || op == 0x5c || op == 0x5d: // loads, store, load_zero
		return r.memArg()
	case op == 0x0c || op == 0x0d: // v128.const, i8x16.shuffle
		return r.skip(16)
	case op >= 0x15 && op <= 0x22: // extract_lane, replace_lane
		return r.skip(1)
	case op >= 0x54 && op <= 0x5b: // load_lane, store_lane
		if err := r.memArg(); err != nil {
			return err
		}
		return r.skip(1)
	case simdInvalid[op]:
		return &FormatError{Offset: at, Reason: fmt.Sprintf("unknown SIMD opcode %#x", op)}
	}
	return nil
}

// atomicInstr reads an 0xFE-prefixed (threads) instruction after the prefix.
func (r *reader) atomicInstr() error {
	at := r.pos
	op, err := r.byte()
	if err != nil {
		return err
	}
	switch {
	case op == 0x00 || (op >= 0x10 && op <= 0x4e): // notify, loads, stores, rmw
		return r.memArg()
	case op == 0x01 || op == 0x02:
		return unsupported(at, "memory.atomic.wait (it can block without spending fuel)")
	case op == 0x03: // atomic.fence
		return r.expect(0x00, "atomic.fence reserved byte")
	}
	return unsupported(at, "atomic opcode %#x", op)
}

// appendU32 appends v as an unsigned LEB128.
func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendS64 appends v as a signed LEB128.
func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
