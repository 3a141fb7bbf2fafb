package groups

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// TestRandomHistories plays random joins, leaves, commits (from current
// and from stale generations) and resets, and checks after every step:
//
//  1. every partition is read by exactly one live member (none without
//     members), and what each member's stream reads, rebuilt from its
//     control messages alone, is what the coordinator says it owns;
//  2. every live member was told the group's current generation;
//  3. no partition's fence is above the generation;
//  4. a commit is refused as fenced exactly when its generation is below
//     the partition's fence, and otherwise stored.
//
// The seeds are fixed, so a failure replays; the failing seed is in the
// subtest's name.
func TestRandomHistories(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			playHistory(t, rand.New(rand.NewPCG(seed, 0)))
		})
	}
}

func playHistory(t *testing.T, rng *rand.Rand) {
	const parts = 4
	h := &harness{t: t}
	h.clock.Store(baseTime)
	h.open(parts, time.Second)
	t.Cleanup(h.close)
	h.cfg.CommitCatchUp = time.Nanosecond
	h.c = New(h.cfg)
	for p := range parts {
		h.publishTo(t, p, 20)
	}
	ctx := context.Background()
	var live []*tmember
	next := 0
	for step := range 60 {
		switch op := rng.IntN(10); {
		case op < 3 && len(live) < 6:
			name := fmt.Sprintf("m%d", next)
			next++
			var m *Member
			out := h.drive(func() error {
				var err error
				m, err = h.c.Join(ctx, "g", h.topic, JoinSpec{ClientName: name, Start: cursor.Start{Kind: cursor.Earliest}})
				return err
			})
			if m == nil {
				t.Fatalf("step %d: join: %s", step, out)
			}
			live = append(live, h.added(name, m))
		case op < 5 && len(live) > 0:
			i := rng.IntN(len(live))
			m := live[i]
			h.drive(func() error { h.c.Leave(m.m); return nil })
			live = slices.Delete(live, i, i+1)
		case op < 9:
			// A commit from any member ever seen, live or gone, of a
			// random partition.
			if len(h.members) == 0 {
				continue
			}
			m := h.members[rng.IntN(len(h.members))]
			p := uint32(rng.IntN(parts))
			before, _, _ := h.parts[p].GroupState("g")
			off := uint64(rng.IntN(21))
			err := h.c.Commit(ctx, "g", h.topic, m.gen, map[uint32]uint64{p: off})
			after, _, _ := h.parts[p].GroupState("g")
			if m.gen < before.Fence {
				if !errors.Is(err, partition.ErrFenced) || after != before {
					t.Fatalf("step %d: commit gen %d below fence %d: %v, row %+v -> %+v", step, m.gen, before.Fence, err, before, after)
				}
			} else if err != nil || after.Offset != off || !after.Committed {
				t.Fatalf("step %d: commit gen %d at fence %d: %v, row %+v", step, m.gen, before.Fence, err, after)
			}
		default:
			var ps []uint32
			for p := range uint32(parts) {
				if rng.IntN(2) == 0 {
					ps = append(ps, p)
				}
			}
			target := Target{Kind: ToOffset, Offset: uint64(rng.IntN(21))}
			if out := h.drive(func() error {
				_, err := h.c.Reset(ctx, "g", h.topic, target, ps, false, true)
				return err
			}); strings.Contains(out, "error:") {
				t.Fatalf("step %d: reset: %s", step, out)
			}
		}
		h.takeProposed()
		for _, m := range h.members {
			m.got = nil
		}
		checkInvariants(t, h, step, live)
	}
}

func (h *harness) publishTo(t *testing.T, p, n int) {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("v")}
	}
	if _, err := h.parts[p].Append(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
}

func checkInvariants(t *testing.T, h *harness, step int, live []*tmember) {
	t.Helper()
	li, err := h.c.Live("g", h.topic)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[uint32]string{}
	if len(li.Members) != len(live) {
		t.Fatalf("step %d: %d members, want %d", step, len(li.Members), len(live))
	}
	for i, mi := range li.Members {
		m := live[i]
		if mi.ID != m.m.ID {
			t.Fatalf("step %d: member %d is %s, want %s", step, i, mi.ID, m.m.ID)
		}
		if !slices.Equal(mi.Partitions, m.parts) {
			t.Fatalf("step %d: %s owns %v but its stream reads %v", step, m.name, mi.Partitions, m.parts)
		}
		if m.gen != li.Generation {
			t.Fatalf("step %d: %s was told generation %d, the group is at %d", step, m.name, m.gen, li.Generation)
		}
		for _, p := range mi.Partitions {
			if o, dup := owner[p]; dup {
				t.Fatalf("step %d: partition %d owned by %s and %s", step, p, o, m.name)
			}
			owner[p] = m.name
		}
	}
	if len(live) > 0 && len(owner) != len(h.parts) {
		t.Fatalf("step %d: owned partitions %v, want all %d", step, owner, len(h.parts))
	}
	for _, p := range h.parts {
		if st, ok, _ := p.GroupState("g"); ok && st.Fence > li.Generation {
			t.Fatalf("step %d: partition %d fence %d above generation %d", step, p.Index(), st.Fence, li.Generation)
		}
	}
}
