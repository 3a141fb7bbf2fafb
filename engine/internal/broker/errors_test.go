package broker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
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
		for _, err := range []error{notStored(last), unavailable(notStored(last)), unavailableUnlessTyped(notStored(last))} {
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
