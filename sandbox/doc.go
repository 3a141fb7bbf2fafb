// Package sandbox runs untrusted WebAssembly filter and transform modules
// (ABI v1, sdk/guest/ABI.md) under wazero, the only package that imports
// it. A Runtime is safe for concurrent use; one serves a whole process.
//
// Using it:
//
//  1. New starts a Runtime with Limits (zero fields take defaults) and an
//     optional disk cache of compiled code.
//  2. Validate checks a module without compiling it (size, parse, limits,
//     imports): what an upload must pass before it is stored.
//  3. Prepare starts compiling a module in the background and returns at
//     once; State reports how it goes (not compiled, compiling, compiled,
//     failed and why). Compiles run one at a time, each within
//     CompileTimeoutMillis, so a slow compile holds back other compiles,
//     never a request. A module that does not compile is remembered, so
//     asking again costs nothing; Forget drops it. A compile still
//     waiting for its turn when every Compile waiting for it has gone
//     (and Prepare did not ask for it) is dropped, never run.
//  4. Compile returns the compiled module, starting its compile if needed
//     and waiting for it up to CompileWaitMillis and ctx (then
//     *CompilingError, ErrCompiling: the compile goes on). Release the
//     module when done.
//  5. Module.NewFilter binds a config; Filter.Run filters a Batch,
//     splitting it into guest calls and returning the outputs in input
//     order. Instances are kept for reuse between runs, bounded in count
//     and in memory (MaxIdleInstances, MaxIdleMemoryBytes; pool.go).
//  6. Close stops the runtime once calls in progress end.
//
// Every guest call is bounded by fuel, not by a context or a deadline:
// the meter (internal/meter) rewrites each module to count down a global
// at every function entry and loop iteration, and a call that runs out
// traps. A call's outcome thus depends on its input only, never on the
// machine's load, and wazero need not check a context on every call
// (WithCloseOnContextDone is off). Guest calls at once are capped by
// MaxConcurrentCalls.
//
// Failures concerning a module are *Error with a Kind, and Error() is one
// line; those the guest reports itself (KindGuest, KindConfig) end with
// the guest's last log line, its explanation, and a trap gives the guest
// runtime's crash line when it printed one (a Go guest out of memory).
// A failure of Filter.Run names the record it happened on when it can
// (Error.Located). The runtime keeps working after any of them.
package sandbox
