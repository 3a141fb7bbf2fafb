package wasmgen

// Block types without a type index.
const (
	BlockEmpty byte = 0x40 // no parameters, no results
	BlockI32   byte = 0x7f // one i32 result
	BlockI64   byte = 0x7e // one i64 result
)

// Single-byte opcodes: control, parametric, variable, memory and the common
// numeric instructions. Other numeric opcodes can be written as byte
// literals; prefixed instructions start with OpPrefixFC or OpPrefixSIMD (see
// FC and SIMD).
const (
	OpUnreachable  byte = 0x00
	OpNop          byte = 0x01
	OpBlock        byte = 0x02
	OpLoop         byte = 0x03
	OpIf           byte = 0x04
	OpElse         byte = 0x05
	OpEnd          byte = 0x0b
	OpBr           byte = 0x0c
	OpBrIf         byte = 0x0d
	OpBrTable      byte = 0x0e
	OpReturn       byte = 0x0f
	OpCall         byte = 0x10
	OpCallIndirect byte = 0x11
	OpDrop         byte = 0x1a
	OpSelect       byte = 0x1b
	OpSelectT      byte = 0x1c

	OpLocalGet  byte = 0x20
	OpLocalSet  byte = 0x21
	OpLocalTee  byte = 0x22
	OpGlobalGet byte = 0x23
	OpGlobalSet byte = 0x24
	OpTableGet  byte = 0x25
	OpTableSet  byte = 0x26

	OpI32Load    byte = 0x28
	OpI64Load    byte = 0x29
	OpF32Load    byte = 0x2a
	OpF64Load    byte = 0x2b
	OpI32Load8U  byte = 0x2d
	OpI32Store   byte = 0x36
	OpI64Store   byte = 0x37
	OpI32Store8  byte = 0x3a
	OpMemorySize byte = 0x3f
	OpMemoryGrow byte = 0x40

	OpI32Const byte = 0x41
	OpI64Const byte = 0x42
	OpF32Const byte = 0x43
	OpF64Const byte = 0x44

	OpI32Eqz  byte = 0x45
	OpI32Eq   byte = 0x46
	OpI32Ne   byte = 0x47
	OpI32LtS  byte = 0x48
	OpI32LtU  byte = 0x49
	OpI32GtS  byte = 0x4a
	OpI32GtU  byte = 0x4b
	OpI32LeS  byte = 0x4c
	OpI32LeU  byte = 0x4d
	OpI32GeS  byte = 0x4e
	OpI32GeU  byte = 0x4f
	OpI64Eqz  byte = 0x50
	OpI64Eq   byte = 0x51
	OpI64LtS  byte = 0x53
	OpI32Add  byte = 0x6a
	OpI32Sub  byte = 0x6b
	OpI32Mul  byte = 0x6c
	OpI32DivS byte = 0x6d
	OpI32DivU byte = 0x6e
	OpI32RemU byte = 0x70
	OpI32And  byte = 0x71
	OpI32Or   byte = 0x72
	OpI32Xor  byte = 0x73
	OpI32Shl  byte = 0x74
	OpI32ShrU byte = 0x76
	OpI64Add  byte = 0x7c
	OpI64Sub  byte = 0x7d
	OpI64Mul  byte = 0x7e
	OpF32Add  byte = 0x92
	OpF64Add  byte = 0xa0

	OpI32WrapI64    byte = 0xa7
	OpI64ExtendI32S byte = 0xac
	OpI64ExtendI32U byte = 0xad
	OpI32Extend8S   byte = 0xc0

	OpRefNull   byte = 0xd0
	OpRefIsNull byte = 0xd1
	OpRefFunc   byte = 0xd2

	OpPrefixFC   byte = 0xfc
	OpPrefixSIMD byte = 0xfd
	OpPrefixAtom byte = 0xfe
)

// Sub-opcodes of OpPrefixFC.
const (
	FCI32TruncSatF32S uint32 = 0
	FCMemoryInit      uint32 = 8
	FCDataDrop        uint32 = 9
	FCMemoryCopy      uint32 = 10
	FCMemoryFill      uint32 = 11
	FCTableInit       uint32 = 12
	FCElemDrop        uint32 = 13
	FCTableCopy       uint32 = 14
	FCTableGrow       uint32 = 15
	FCTableSize       uint32 = 16
	FCTableFill       uint32 = 17
)
