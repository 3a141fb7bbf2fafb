package sandbox

import (
	"errors"
	"fmt"
	"runtime"
)

// Limits bound what a module may take. The zero value of every field
// selects its default; Validate reports impossible values.
type Limits struct {
	// MaxModuleBytes bounds an uploaded (or inline) module. Default 16 MiB
	// (a Go module is about 2 MiB, an AssemblyScript one a few KiB).
	MaxModuleBytes int
	// MaxMemoryPages bounds a module's linear memory, in 64 KiB pages,
	// declared and grown. Default 1024 (64 MiB).
	MaxMemoryPages uint32
	// MaxTableElements bounds every table's declared size. Default 100 000.
	MaxTableElements uint32
	// MaxFunctions bounds the functions a module defines. Default 100 000.
	MaxFunctions int
	// CompileTimeoutMillis bounds validating and compiling one module, a
	// backstop for what MaxModuleBytes and MaxFunctions let through:
	// compiles run in the background, one at a time, so a slow one delays
	// other compiles, not requests. Default 300 000 (5 min): a busy node
	// compiles a 2 MiB Go module in well under a minute.
	CompileTimeoutMillis int
	// CompileWaitMillis bounds how long Compile (a replay naming a module
	// not compiled yet) waits for the module's compile, queue included,
	// before it answers ErrCompiling. Default 300 000 (5 min).
	CompileWaitMillis int
	// MaxRecordsPerCall bounds the records of one guest call. Default 256:
	// a guest call cannot be preempted (a garbage collection waits for it),
	// so calls stay short; per-record cost is flat from about 16 records.
	MaxRecordsPerCall int
	// MaxInputBytes bounds the encoded records of one call; the guest's
	// input buffer may lower it. Default 4 MiB.
	MaxInputBytes int
	// MaxOutputBytes bounds the output bytes of one call; the guest's
	// output buffer may lower it. Default 4 MiB.
	MaxOutputBytes int
	// MaxOutputsPerInput bounds how many records one input may become.
	// Default 16.
	MaxOutputsPerInput int
	// FuelPerCall is the fuel one guest call may burn (one unit per
	// function entry and loop iteration, bulk instructions by length; see
	// docs/design.md). A call that runs out traps. Default 10 000 000:
	// an endless loop stops after 15–22 ms on the reference machine (the
	// longest a hostile call can delay a garbage collection), and it is
	// about 150× the 68 000 units that 256 matching records cost the
	// slowest example (Go, JSON field).
	FuelPerCall int64
	// FuelPerInit is the fuel of an instance's initialisation (start
	// function, _initialize, buffer exports, rewind_init), each. Default
	// 50 000 000 (a Go module's runtime starts on less than 1 000 000).
	FuelPerInit int64
	// MaxConcurrentCalls bounds guest calls running at once in the whole
	// process, so raft ticks and live delivery always have a processor.
	// Default max(1, GOMAXPROCS-1).
	MaxConcurrentCalls int
	// MaxIdleInstances bounds initialised instances kept for reuse across
	// all modules. Default 32.
	MaxIdleInstances int
	// MaxIdleMemoryBytes bounds the linear memory of those idle instances,
	// summed over all modules: memory never shrinks, so an idle instance
	// holds the most its guest ever grew to. When keeping an instance would
	// exceed it, the least recently used idle instances are closed; an
	// instance larger than the bound on its own is closed when its run
	// ends. Instances in use (at most MaxConcurrentCalls) are not counted.
	// Default 256 MiB (four instances at the default MaxMemoryPages, or
	// the 32 of MaxIdleInstances at 8 MiB each).
	MaxIdleMemoryBytes int64
	// LogLinesPerSecond is the steady rate of guest log lines per module
	// that reach the server log (bursts of 10× pass); the rest are counted
	// and reported as dropped. Default 10.
	LogLinesPerSecond int
	// MaxLogLineBytes truncates guest log lines. Default 512.
	MaxLogLineBytes int
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	set(&l.MaxModuleBytes, 16<<20)
	if l.MaxMemoryPages == 0 {
		l.MaxMemoryPages = 1024
	}
	if l.MaxTableElements == 0 {
		l.MaxTableElements = 100_000
	}
	set(&l.MaxFunctions, 100_000)
	set(&l.CompileTimeoutMillis, 300_000)
	set(&l.CompileWaitMillis, 300_000)
	set(&l.MaxRecordsPerCall, 256)
	set(&l.MaxInputBytes, 4<<20)
	set(&l.MaxOutputBytes, 4<<20)
	set(&l.MaxOutputsPerInput, 16)
	if l.FuelPerCall == 0 {
		l.FuelPerCall = 10_000_000
	}
	if l.FuelPerInit == 0 {
		l.FuelPerInit = 50_000_000
	}
	set(&l.MaxConcurrentCalls, max(1, runtime.GOMAXPROCS(0)-1))
	set(&l.MaxIdleInstances, 32)
	if l.MaxIdleMemoryBytes == 0 {
		l.MaxIdleMemoryBytes = 256 << 20
	}
	set(&l.LogLinesPerSecond, 10)
	set(&l.MaxLogLineBytes, 512)
	return l
}

// Validate reports every impossible value at once.
func (l Limits) Validate() error {
	var errs []error
	neg := func(name string, v int64) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("sandbox: %s must not be negative (got %d)", name, v))
		}
	}
	neg("MaxModuleBytes", int64(l.MaxModuleBytes))
	neg("MaxFunctions", int64(l.MaxFunctions))
	neg("CompileTimeoutMillis", int64(l.CompileTimeoutMillis))
	neg("CompileWaitMillis", int64(l.CompileWaitMillis))
	neg("MaxRecordsPerCall", int64(l.MaxRecordsPerCall))
	neg("MaxInputBytes", int64(l.MaxInputBytes))
	neg("MaxOutputBytes", int64(l.MaxOutputBytes))
	neg("MaxOutputsPerInput", int64(l.MaxOutputsPerInput))
	neg("FuelPerCall", l.FuelPerCall)
	neg("FuelPerInit", l.FuelPerInit)
	neg("MaxConcurrentCalls", int64(l.MaxConcurrentCalls))
	neg("MaxIdleInstances", int64(l.MaxIdleInstances))
	neg("MaxIdleMemoryBytes", l.MaxIdleMemoryBytes)
	neg("LogLinesPerSecond", int64(l.LogLinesPerSecond))
	neg("MaxLogLineBytes", int64(l.MaxLogLineBytes))
	if l.MaxMemoryPages > 65536 {
		errs = append(errs, fmt.Errorf("sandbox: MaxMemoryPages %d exceeds 65536 (4 GiB)", l.MaxMemoryPages))
	}
	if l.MaxInputBytes > 1<<30 || l.MaxOutputBytes > 1<<30 {
		errs = append(errs, errors.New("sandbox: MaxInputBytes and MaxOutputBytes must stay under 1 GiB"))
	}
	return errors.Join(errs...)
}
