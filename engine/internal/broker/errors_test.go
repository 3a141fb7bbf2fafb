package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/sandbox"
)

// TestNotStoredNamesEachCauseOnce: a publish given up before anything was
// stored is both Unavailable and not stored, whatever its cause, and its
// message says "temporarily unavailable" at most once.
func TestNotStoredNamesEachCauseOnce(t *testing.T) {
	for _, last := range []error{
		errors.New("no leader known for partition 0"),
		&NotLeaderError{Topic: "t", Partition: 1, Node: 2, Leader: 3},
		fmt.Errorf("forward to node 2: %w", &NotLeaderError{Topic: "t", Partition: 1, Node: 2}),
		fmt.Errorf("%w: forward to node 2: connection refused", ErrUnavailable),
		fmt.Errorf("%w: %w: earlier", ErrUnavailable, ErrNotStored),
	} {
		for _, err := range []error{notStored(last), unavailable(notStored(last)), UnavailableUnlessTyped(notStored(last))} {
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrNotStored) {
				t.Errorf("%v: not both unavailable and not stored", err)
			}
			if n := strings.Count(err.Error(), ErrUnavailable.Error()); n > 1 {
				t.Errorf("%q names %q %d times", err, ErrUnavailable, n)
			}
			if !strings.Contains(err.Error(), strings.TrimPrefix(last.Error(), ErrUnavailable.Error()+": ")) {
				t.Errorf("%q lost its cause %q", err, last)
			}
		}
	}
}

// TestMetadataCommandRaftRefusedIsNotStored: a topic, plugin or member
// command that raft dropped before appending it (no leader known) is
// Unavailable and not stored, so that a client may send again even a call
// it makes only once; one whose wait ended is Unavailable with its outcome
// unknown (not marked).
func TestMetadataCommandRaftRefusedIsNotStored(t *testing.T) {
	dropped := fmt.Errorf("%w: raft dropped it: raft proposal dropped", meta.ErrNotProposed)
	for _, err := range []error{unavailable(dropped), pluginError(dropped), unavailable(fmt.Errorf("%w: %w", meta.ErrNotProposed, meta.ErrStopped))} {
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrNotStored) {
			t.Errorf("%v: want unavailable and not stored", err)
		}
	}
	unknown := fmt.Errorf("%w: %w", meta.ErrOutcomeUnknown, context.DeadlineExceeded)
	for _, err := range []error{unavailable(unknown), pluginError(unknown)} {
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNotStored) {
			t.Errorf("%v: want unavailable (or the deadline) and not marked not stored", err)
		}
	}
}

// TestPluginErrorCompiling: a module still compiling when a replay's wait
// ends is Unavailable (worth a retry), saying so; a module that does not
// compile stays the sandbox's own error (InvalidArgument at the edge).
func TestPluginErrorCompiling(t *testing.T) {
	err := pluginError(&sandbox.CompilingError{Module: strings.Repeat("ab", 32), For: 3 * time.Second})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, sandbox.ErrCompiling) || !strings.Contains(err.Error(), "still compiling (for 3s)") {
		t.Errorf("still compiling: %v", err)
	}
	invalid := &sandbox.Error{Kind: sandbox.KindInvalid, Reason: "does not compile"}
	if err := pluginError(invalid); err != error(invalid) {
		t.Errorf("a module that does not compile: %v, want the sandbox's error as is", err)
	}
}

// TestLeaderHintSurvivesThePublishPath: the hint of a node that could not
// reach a partition's leader reaches the edge through the publish path's
// wrapping, and keeps what it says about storage.
func TestLeaderHintSurvivesThePublishPath(t *testing.T) {
	b := &Broker{}
	for _, tc := range []struct {
		cause     error
		notStored bool
	}{
		{fmt.Errorf("%w: %w: node 2 cannot reach node 3", ErrUnavailable, ErrNotStored), true},
		{fmt.Errorf("%w: call to node 3 cut short: %w", ErrUnavailable, partition.ErrOutcomeUnknown), false},
	} {
		hinted := &LeaderHintError{Partition: 1, Leader: 3, Addr: "h3:7070", Err: tc.cause}
		err := b.publishError("t", hinted)
		var lh *LeaderHintError
		if !errors.As(err, &lh) || lh.Leader != 3 || lh.Addr != "h3:7070" {
			t.Errorf("%v: hint lost", err)
		}
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotStored) != tc.notStored {
			t.Errorf("%v: unavailable %v, not stored %v (want %v)", err, errors.Is(err, ErrUnavailable), errors.Is(err, ErrNotStored), tc.notStored)
		}
	}
}
