package raftlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkProposeBesideIdleGroups proposes one entry at a time to one
// single-voter group of a host that also runs idle ones, each waiting for
// the last to be durable, on an in-memory store (no fsync): ns/op is the
// raft loop's own cost of a proposal, and how it grows with the groups
// that have nothing to do.
func BenchmarkProposeBesideIdleGroups(b *testing.B) {
	for _, idle := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			db := openDB(b, vfs.NewMem())
			defer db.Close()
			h, err := Open(Config{NodeID: 1, DB: db, TickInterval: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			h.Start()
			defer h.Close()
			t := &testing.T{}
			gcs := make([]GroupConfig, 0, idle+1)
			sm := newCountingSM(t, db, 1)
			gcs = append(gcs, GroupConfig{ID: 1, Voters: []uint64{1}, SM: sm})
			for g := range idle {
				gcs = append(gcs, GroupConfig{ID: uint64(g + 2), Voters: []uint64{1}, SM: newCountingSM(t, db, uint64(g+2))})
			}
			for i, err := range h.AddGroups(gcs) {
				if err != nil {
					b.Fatal(i, err)
				}
			}
			sm.propose(h, "warm")
			sm.waitDurable(t, 1)
			b.ResetTimer()
			for i := range b.N {
				sm.propose(h, "x")
				sm.waitDurable(t, i+2)
			}
		})
	}
}
