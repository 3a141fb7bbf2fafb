package route

import (
	"errors"
	"fmt"

	"github.com/rewind-io/rewind/engine/internal/partition"
)

var (
	// ErrUnavailable marks a request that may succeed if retried later (the
	// broker's ErrUnavailable is this error).
	ErrUnavailable = errors.New("temporarily unavailable")
	// ErrNotStored marks a failed request that certainly stored nothing
	// (it was refused before it was queued, or raft discarded it), so
	// retrying it cannot duplicate records.
	ErrNotStored = errors.New("not stored")
)

// Why a call to another member was cut short (attempt).
var (
	errCutShort       = errors.New("cut short")
	errForwardTimeout = errors.New("timed out")
	errLeaderMoved    = errors.New("raft on this node no longer sees that node as the leader")
)

// NotLeaderError is the answer of a node that was asked (by another node)
// to serve a partition it does not lead. Leader is its best guess at the
// leader (0: unknown). Nothing was stored.
type NotLeaderError struct {
	Topic     string
	Partition uint32
	Node      uint64
	Leader    uint64
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("node %d does not lead partition %d of %q (leader: %d)", e.Node, e.Partition, e.Topic, e.Leader)
}

// Is makes a NotLeaderError ErrUnavailable and ErrNotStored.
func (e *NotLeaderError) Is(target error) bool {
	return target == ErrUnavailable || target == ErrNotStored
}

// LeaderHintError is the answer of a node that could not get a request to
// a partition's leader (it cannot reach it, or lost it while waiting), for
// a client to send it to the leader itself: Leader is the node that leads
// the partition or led it last as far as this node knows, Addr where
// clients reach it. Err says what happened (ErrUnavailable, and
// ErrNotStored when nothing was stored).
type LeaderHintError struct {
	Partition uint32
	Leader    uint64
	Addr      string
	Err       error
}

func (e *LeaderHintError) Error() string {
	return fmt.Sprintf("%v (partition %d: try node %d at %s)", e.Err, e.Partition, e.Leader, e.Addr)
}

func (e *LeaderHintError) Unwrap() error { return e.Err }

// Refusal is why a member refused a request for a reason of the request's
// own, not of routing: the caller names it in its own errors.
type Refusal int

// The refusals a member's answer can carry.
const (
	// RefusedInvalid: the request can never succeed as given.
	RefusedInvalid Refusal = iota + 1
	// RefusedNotFound: the topic does not exist (any more).
	RefusedNotFound
	// RefusedPrecondition: the cluster's state refuses it now.
	RefusedPrecondition
	// RefusedConflict: an idempotency key is bound to other contents
	// (Conflict says where).
	RefusedConflict
	// RefusedCondition: a conditional append's condition failed
	// (Condition says which).
	RefusedCondition
)

// RefusedError is a member's refusal of a request (Refusal says why). The
// broker maps it to its own errors; it is neither ErrUnavailable nor
// ErrNotStored.
type RefusedError struct {
	Node      uint64
	Refusal   Refusal
	Msg       string
	Conflict  *Conflict                 // with RefusedConflict
	Condition *partition.ConditionError // with RefusedCondition
}

func (e *RefusedError) Error() string { return fmt.Sprintf("node %d: %s", e.Node, e.Msg) }

// Conflict is an idempotency conflict as the leader reported it.
type Conflict struct {
	Index         int
	Key           string
	Partition     uint32
	Offset        uint64
	OffsetUnknown bool
}

// NotStored says a request was given up before anything was stored,
// because of last: an error that is ErrUnavailable and ErrNotStored, and
// names each once.
func NotStored(last error) error {
	switch {
	case errors.Is(last, ErrNotStored):
		if errors.Is(last, ErrUnavailable) {
			return last
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, last)
	case errors.Is(last, ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrNotStored, last)
	}
	return fmt.Errorf("%w: %w: %w", ErrUnavailable, ErrNotStored, last)
}
