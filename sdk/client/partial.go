package client

import (
	"fmt"
	"strings"

	"connectrpc.com/connect"
)

// PartialError is returned by Publish, with the results, when some of the
// partitions a request's messages went to failed while the others stored
// theirs: the messages listed in Failed were not acknowledged (their
// Result is zero but for Partition), every other one was. Re-send the
// failed messages (with idempotency keys a re-send never stores a record
// twice). When every partition fails, Publish returns the error itself
// instead.
type PartialError struct {
	Failed []FailedMessage
}

// FailedMessage is one message of a publish that was not acknowledged.
type FailedMessage struct {
	// Index is the message's position in the Publish call.
	Index int
	// Partition is the partition it was routed to.
	Partition uint32
	// Err is the error the whole call would have failed with (a
	// *connect.Error: Unavailable, ResourceExhausted, DeadlineExceeded...).
	Err error
	// NotStored: the message was certainly not stored, so re-sending it
	// cannot duplicate it even without an idempotency key.
	NotStored bool
}

func (e *PartialError) Error() string {
	parts := map[uint32]bool{}
	var list []string
	for _, f := range e.Failed {
		if !parts[f.Partition] {
			parts[f.Partition] = true
			list = append(list, fmt.Sprintf("partition %d: %v", f.Partition, f.Err))
		}
	}
	return fmt.Sprintf("publish partly failed: %d message(s) not acknowledged (%s); the others were stored", len(e.Failed), strings.Join(list, "; "))
}

func codeError(code uint32, msg string) error {
	return connect.NewError(connect.Code(code), fmt.Errorf("%s", msg))
}
