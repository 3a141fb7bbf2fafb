package gctune

import "testing"

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, target uint64
		want         int
	}{
		{0, 512 << 20, 12700},        // a 4 MiB heap may grow to 512 MiB
		{64 << 20, 512 << 20, 700},   // 64 MiB -> 512 MiB
		{256 << 20, 512 << 20, 100},  // half the target: Go's default
		{1 << 30, 512 << 20, 100},    // above the target: never below 100
		{300 << 20, 512 << 20, 100},  // between: the default, not less
		{100 << 20, 1000 << 20, 900}, // 10x
	} {
		if got := Percent(c.live, c.target); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", c.live>>20, c.target>>20, got, c.want)
		}
		// The next collection starts at or below the larger of the target
		// and twice the live heap.
		live := max(c.live, 4<<20)
		goal := live + live*uint64(Percent(c.live, c.target))/100
		if goal > max(c.target, 2*live) {
			t.Errorf("live %d MiB: goal %d MiB above max(target, 2x live)", c.live>>20, goal>>20)
		}
	}
}
