package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// Kind classifies a sandbox failure.
type Kind uint8

const (
	// KindInvalid: the module was refused before it ran (it does not parse
	// or compile within bounds, lacks the ABI, imports what it may not,
	// declares too much memory or table).
	KindInvalid Kind = iota + 1
	// KindTrap: the guest trapped (unreachable, abort, out-of-bounds
	// memory access, stack overflow, proc_exit, memory exhausted).
	KindTrap
	// KindFuel: the guest ran out of fuel (an endless or too slow call).
	KindFuel
	// KindOutput: the guest's output is malformed (an index out of range or
	// out of order, a length past the buffer, an unknown action).
	KindOutput
	// KindLimit: a limit other than fuel was hit (too many outputs for one
	// input, a record too large for the input buffer, output too large).
	KindLimit
	// KindGuest: the guest reported a failure: rewind_filter returned a
	// negative code. Reason carries the guest's last log line.
	KindGuest
	// KindConfig: the guest refused its config (rewind_init returned
	// non-zero). Reason carries the guest's last log line, which says why:
	// the config must be fixed; retrying with it fails the same way.
	KindConfig
)

func (k Kind) String() string {
	switch k {
	case KindInvalid:
		return "invalid module"
	case KindTrap:
		return "trap"
	case KindFuel:
		return "out of fuel"
	case KindOutput:
		return "malformed output"
	case KindLimit:
		return "limit exceeded"
	case KindGuest:
		return "guest failure"
	case KindConfig:
		return "config refused"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error is every failure of the sandbox that concerns a module. The engine
// adds the partition and offset of the batch when it reports it.
type Error struct {
	Kind Kind
	// Module is the module's sha256 (hex), when known.
	Module string
	// Reason says what happened, for people.
	Reason string
	// Index is, for a failure of Filter.Run, the index in the Batch of the
	// first record of the failing call: everything before it was filtered.
	Index int
	// Located says that Record, the index in the Batch, and Offset, its
	// offset, are the record the guest failed on: set by Filter.Run when
	// it can tell which record of the failing call it was (Filter.Run).
	Located bool
	Record  int
	Offset  uint64
	// Err is the underlying error, if any. Only its first line is part of
	// Error(): a trap's wasm stack trace stays here, for the server log.
	Err error
}

func (e *Error) Error() string {
	mod := ""
	if e.Module != "" {
		mod = " sha256:" + e.Module
	}
	return fmt.Sprintf("sandbox: module%s: %s", mod, e.Message())
}

// Message is Error() without the module: the kind, the reason and the
// first line of Err, on one line.
func (e *Error) Message() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %s", e.Kind, e.Reason, firstLine(e.Err.Error()))
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Reason)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of a sandbox error in err's chain, or 0.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// ErrClosed is returned by a closed Runtime.
var ErrClosed = errors.New("sandbox: runtime closed")

func errorf(kind Kind, module string, format string, args ...any) *Error {
	return &Error{Kind: kind, Module: module, Reason: fmt.Sprintf(format, args...)}
}
