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
// its preferred leader that this node took back at a later term within
// backWithin (the preferred leader is low on disk and handed it back) is
// not handed over again for balanceHoldOff. A group that came back later
// (the preferred leader led it and then failed) is handed again at the
// next round — before, a kill soon after a hand-back held the restarted
// node off its partition for a minute — and so is one still led here at
// the same term (the transfer never happened: the preferred leader was
// still catching up after a restart).
func TestLeaderBalanceHoldsOffAGroupThatCameStraightBack(t *testing.T) {
	const interval, backWithin = 5 * time.Second, 1200 * time.Millisecond
	lb := newLeaderBalance(backWithin)
	t0 := time.Unix(1000, 0)
	hand := func(group, term uint64, at time.Time) bool {
		lb.leads(group, term, at)
		return lb.mayHand(group, at)
	}
	if !hand(7, 3, t0) {
		t.Fatal("first hand-over refused")
	}
	lb.leads(7, 5, t0.Add(400*time.Millisecond)) // back at once
	if hand(7, 5, t0.Add(interval)) {
		t.Fatal("handed again right after it came back")
	}
	if hand(7, 5, t0.Add(interval+balanceHoldOff-time.Second)) {
		t.Fatal("handed again within the hold-off")
	}
	if !hand(7, 5, t0.Add(2*interval+balanceHoldOff)) {
		t.Fatal("not handed after the hold-off")
	}
	// Another group, led here again at a later term, but only after the
	// preferred leader had led it for a while (a failover moved it back):
	// balanced as usual, even at the very next round.
	if !hand(8, 3, t0) {
		t.Fatal("first hand-over refused")
	}
	lb.leads(8, 5, t0.Add(3*time.Second))
	if !hand(8, 5, t0.Add(interval)) {
		t.Fatal("a group that came back by a failover was held off")
	}
	if !hand(8, 9, t0.Add(time.Hour)) {
		t.Fatal("a group that stayed away was held off")
	}
	// A transfer that did not happen (same term next round): handed
	// again at every round.
	for k := range 4 {
		if !hand(9, 3, t0.Add(time.Duration(k)*interval)) {
			t.Fatalf("round %d: a group whose transfer never happened was held off", k)
		}
	}
}
