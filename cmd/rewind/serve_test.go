package main

import "testing"

// --tier-cache-mib 0 keeps nothing: the engine's zero would mean its
// 64 MiB default.
func TestTierCacheFlagZeroKeepsNothing(t *testing.T) {
	for mib, want := range map[int64]int64{0: -1, 1: 1 << 20, 64: 64 << 20} {
		if got := tierCacheBytes(mib); got != want {
			t.Errorf("--tier-cache-mib %d: Tier.Cache.MaxBytes %d, want %d", mib, got, want)
		}
	}
}
