package check

import (
	"slices"
	"testing"
	"time"

	"github.com/rewind-io/rewind/chaos/history"
)

func TestGroupsCatch(t *testing.T) {
	runCorruptions(t, []corruption{
		{"fenced commit accepted", Groups, "was accepted, although member \"b\" was assigned", func(h *history.History) bool {
			// a commits partition 1 at generation 1 after b was assigned it at 2.
			late := lastEvent(h)
			late.Member, late.Kind, late.Generation, late.Partition, late.Offset = "a", history.Committed, 1, 1, lastCommit(h, 1)
			late.At = late.At.Add(time.Millisecond)
			late.Sent = late.At
			h.Groups = append(h.Groups, late)
			return true
		}},
		{"late answer without a send time looks fenced", Groups, "was accepted, although", func(h *history.History) bool {
			// The generator's late answer of a's commit at generation 1: with
			// no Sent, only At orders it, after b's assignment.
			for i, ev := range h.Groups {
				if ev.Kind == history.Committed && ev.Generation == 1 && ev.Partition == 1 {
					h.Groups[i].Sent = time.Time{}
					return true
				}
			}
			return false
		}},
		{"fenced by a reset", Groups, "was accepted, although a reset", func(h *history.History) bool {
			i := slices.IndexFunc(h.Groups, func(ev history.GroupEvent) bool { return ev.Kind == history.Reset })
			if i < 0 {
				return false
			}
			// b still at generation 2 commits partition 0 after the reset.
			late := lastEvent(h)
			late.Member, late.Kind, late.Generation, late.Partition, late.Offset = "b", history.Committed, 2, 0, lastCommit(h, 0)
			late.At = late.At.Add(time.Millisecond)
			h.Groups = append(h.Groups, late)
			return true
		}},
		{"commit moving backwards without a reset", Groups, "moved back", func(h *history.History) bool {
			off := lastCommit(h, 1)
			if off == 0 {
				return false
			}
			late := lastEvent(h)
			late.Member, late.Kind, late.Generation, late.Partition, late.Offset = "b", history.Committed, 3, 1, off-1
			late.At = late.At.Add(time.Millisecond)
			h.Groups = append(h.Groups, late)
			return true
		}},
		{"post-reset delivery not from the target", Groups, "the first delivery after it", func(h *history.History) bool {
			i := slices.IndexFunc(h.Groups, func(ev history.GroupEvent) bool { return ev.Kind == history.Reset })
			if i < 0 {
				return false
			}
			reset := h.Groups[i]
			for j := i + 1; j < len(h.Groups); j++ {
				if ev := &h.Groups[j]; ev.Kind == history.Delivered && ev.Partition == reset.Partition && ev.Generation >= reset.Generation {
					ev.Offset++
					return true
				}
			}
			return false
		}},
		{"record below a commit never delivered", Groups, "never delivered", func(h *history.History) bool {
			// The one delivery of an offset that a commit covered.
			delivered := map[uint64]int{}
			for _, ev := range h.Groups {
				if ev.Kind == history.Delivered && ev.Partition == 1 {
					delivered[ev.Offset]++
				}
			}
			for i, ev := range h.Groups {
				if ev.Kind == history.Delivered && ev.Partition == 1 && delivered[ev.Offset] == 1 && ev.Offset < lastCommit(h, 1) {
					h.Groups = slices.Delete(h.Groups, i, i+1)
					return true
				}
			}
			return false
		}},
		{"commit far past every delivery", Groups, "never delivered offsets", func(h *history.History) bool {
			late := lastEvent(h)
			late.Member, late.Kind, late.Generation, late.Partition, late.Offset = "b", history.Committed, 4, 0, 1<<62
			late.At = late.At.Add(time.Millisecond)
			h.Groups = append(h.Groups, late)
			return true
		}},
		{"member reading out of order", Groups, "out of order", func(h *history.History) bool {
			for i := 1; i < len(h.Groups); i++ {
				a, b := &h.Groups[i-1], &h.Groups[i]
				if a.Kind == history.Delivered && b.Kind == history.Delivered && a.Member == b.Member &&
					a.Partition == b.Partition && a.Generation == b.Generation {
					a.Offset, b.Offset = b.Offset, a.Offset
					return true
				}
			}
			return false
		}},
	})
}

// lastEvent is a copy of the history's last group event.
func lastEvent(h *history.History) history.GroupEvent { return h.Groups[len(h.Groups)-1] }

// lastCommit is the last offset committed for a partition.
func lastCommit(h *history.History, p uint32) uint64 {
	var off uint64
	for _, ev := range h.Groups {
		if (ev.Kind == history.Committed || ev.Kind == history.Reset) && ev.Partition == p {
			off = ev.Offset
		}
	}
	return off
}

func TestGroupsResetWithoutGeneration(t *testing.T) {
	// A reset of unknown generation is ordered by At: the delivery from
	// before the seek that the generator records after it now looks like
	// the first delivery after the reset.
	h := generate(1)
	i := slices.IndexFunc(h.Groups, func(ev history.GroupEvent) bool { return ev.Kind == history.Reset })
	h.Groups[i].Generation = 0
	v := Groups(h)
	if v.OK {
		t.Fatal("a reset ordered by time only did not see the stale delivery after it")
	}
	// Without that stale delivery, it is OK.
	h.Groups = slices.Delete(h.Groups, i+1, i+2)
	if v := Groups(h); !v.OK {
		t.Fatalf("reset of unknown generation:\n%s", describe(v))
	}
}
