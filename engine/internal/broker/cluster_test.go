package broker

import (
	"testing"
	"time"

	"github.com/rewind-io/rewind/raftlog"
)

// TestHandOffTargetPrefersTheCaughtUpPreferredLeader: a leader low on disk
// hands a group to its preferred leader when that one is caught up, else
// to the most caught-up other voter, never to itself or a lagging replica.
func TestHandOffTargetPrefersTheCaughtUpPreferredLeader(t *testing.T) {
	st := raftlog.Status{Voters: []uint64{1, 2, 3}, Last: 10_000, Match: map[uint64]uint64{1: 10_000, 2: 9_990, 3: 9_000}}
	for _, tc := range []struct {
		preferred, self, want uint64
	}{
		{preferred: 3, self: 1, want: 2}, // 3 lags more than transferLag
		{preferred: 2, self: 1, want: 2},
		{preferred: 1, self: 1, want: 2},
		{preferred: 0, self: 2, want: 1},
		{preferred: 2, self: 3, want: 2},
	} {
		if got := handOffTarget(st, tc.preferred, tc.self); got != tc.want {
			t.Errorf("handOffTarget(preferred %d, self %d) = %d, want %d", tc.preferred, tc.self, got, tc.want)
		}
	}
	alone := raftlog.Status{Voters: []uint64{1}, Last: 5, Match: map[uint64]uint64{1: 5}}
	if got := handOffTarget(alone, 1, 1); got != 0 {
		t.Errorf("single voter: handOffTarget = %d, want 0", got)
	}
}

// TestLeaderBalanceHoldsOffAGroupThatCameStraightBack: a group handed to
// its preferred leader that is led here again by the next balance round at
// a later term (the preferred leader is low on disk and handed it back) is
// not handed over again for balanceHoldOff; a group that stayed away is
// handed again, and so is one still led here at the same term (the
// transfer never happened: the preferred leader was still catching up
// after a restart, and must not wait a minute for its leadership).
func TestLeaderBalanceHoldsOffAGroupThatCameStraightBack(t *testing.T) {
	const interval = 5 * time.Second
	lb := newLeaderBalance(interval)
	t0 := time.Unix(1000, 0)
	if !lb.mayHand(7, 3, t0) {
		t.Fatal("first hand-over refused")
	}
	if lb.mayHand(7, 5, t0.Add(interval)) {
		t.Fatal("handed again right after it came back")
	}
	if lb.mayHand(7, 5, t0.Add(interval+balanceHoldOff-time.Second)) {
		t.Fatal("handed again within the hold-off")
	}
	if !lb.mayHand(7, 5, t0.Add(2*interval+balanceHoldOff)) {
		t.Fatal("not handed after the hold-off")
	}
	// Another group, led here again long after it was handed away (a
	// failure moved it back): balanced as usual.
	if !lb.mayHand(8, 3, t0) || !lb.mayHand(8, 9, t0.Add(time.Hour)) {
		t.Fatal("a group that stayed away was held off")
	}
	// A transfer that did not happen (same term next round): handed
	// again at every round.
	for k := range 4 {
		if !lb.mayHand(9, 3, t0.Add(time.Duration(k)*interval)) {
			t.Fatalf("round %d: a group whose transfer never happened was held off", k)
		}
	}
}
