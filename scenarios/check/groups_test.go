package check

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
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

// TestGroupsResetAnsweredLate: the reset's answer reaches the runner after
// its member already seeked, read from the target and committed at the
// new generation. The reset is known by its generation, not by when its
// answer came: this is no violation. Its seek may also be recorded as a
// Seeked, which must name the reset's target.
func TestGroupsResetAnsweredLate(t *testing.T) {
	h := generate(1)
	i := slices.IndexFunc(h.Groups, func(ev history.GroupEvent) bool { return ev.Kind == history.Reset })
	reset := h.Groups[i]
	h.Groups = slices.Delete(h.Groups, i, i+1)
	// The answer comes between the first and the second delivery from
	// the target.
	first := slices.IndexFunc(h.Groups, func(ev history.GroupEvent) bool {
		return ev.Kind == history.Delivered && ev.Partition == reset.Partition && ev.Generation >= reset.Generation
	})
	if first < 0 || h.Groups[first].Offset != reset.Offset {
		t.Fatalf("the generator read no record from the reset's target (%d)", first)
	}
	reset.At = h.Groups[first].At.Add(time.Microsecond)
	h.Groups = slices.Insert(h.Groups, first+1, reset)
	if v := Groups(h); !v.OK {
		t.Fatalf("a reset answered after its effects:\n%s", describe(v))
	}
	seek := seekOf(h, reset)
	h.Groups[seek].Kind = history.Seeked
	if v := Groups(h); !v.OK {
		t.Fatalf("the seek recorded as Seeked:\n%s", describe(v))
	}
	h.Groups[seek].Offset++
	if v := Groups(h); v.OK || !strings.Contains(describe(v), "was told to read on from offset") {
		t.Fatalf("a seek to another offset than the reset's target:\n%s", describe(v))
	}
}

// TestGroupsResetOfUnknownOutcome: a reset whose answer never came
// (ResetUnknown) is taken to have happened at the generation of the seek
// that followed it. A seek at a generation no reset created, with no
// unknown reset to account for it, is a violation.
func TestGroupsResetOfUnknownOutcome(t *testing.T) {
	h := generate(1)
	i := slices.IndexFunc(h.Groups, func(ev history.GroupEvent) bool { return ev.Kind == history.Reset })
	reset := h.Groups[i]
	h.Groups[seekOf(h, reset)].Kind = history.Seeked
	h.Groups[i].Kind, h.Groups[i].Generation, h.Groups[i].Offset = history.ResetUnknown, 0, 0
	h.Groups[i].Sent = h.Groups[i].At.Add(-time.Microsecond)
	if v := Groups(h); !v.OK || v.Stats["resets_unknown"] != 1 {
		t.Fatalf("a reset of unknown outcome followed by its seek:\n%s", describe(v))
	}
	// Its outcome seen as an assignment below the last commit, as when
	// the partition moved to another member before any seek.
	seek := seekOf(h, reset)
	h.Groups[seek].Kind = history.Assigned
	if v := Groups(h); !v.OK || v.Stats["resets_unknown"] != 1 {
		t.Fatalf("a reset of unknown outcome seen as an assignment below the last commit:\n%s", describe(v))
	}
	h.Groups[seek].Kind = history.Seeked
	h.Groups = slices.Delete(h.Groups, i, i+1)
	if v := Groups(h); v.OK || !strings.Contains(describe(v), "but no reset created that generation") {
		t.Fatalf("a seek no reset explains:\n%s", describe(v))
	}
}

// seekOf is the index of the member's assignment that a reset's seek
// made in the generated history: the first Assigned of the reset's
// partition at its generation.
func seekOf(h *history.History, reset history.GroupEvent) int {
	return slices.IndexFunc(h.Groups, func(ev history.GroupEvent) bool {
		return (ev.Kind == history.Assigned || ev.Kind == history.Seeked) && ev.Partition == reset.Partition && ev.Generation == reset.Generation
	})
}

// TestGroupsStaleAssignmentIsNoReset: an assignment recorded late, at a
// generation older than commits already seen, may start below them; it
// is not taken for the outcome of a reset of unknown outcome (found by a
// scenario with churn, resets and kills: a slow member's old assignment
// arrived after the next owner had committed past it).
func TestGroupsStaleAssignmentIsNoReset(t *testing.T) {
	at := t0
	ev := func(member string, k history.GroupEventKind, gen uint64, off uint64) history.GroupEvent {
		at = at.Add(time.Millisecond)
		e := history.GroupEvent{Group: "g", Member: member, Kind: k, Generation: gen, Topic: "t", Offset: off, At: at}
		if k == history.Committed || k == history.ResetUnknown {
			e.Sent = at.Add(-time.Microsecond)
		}
		return e
	}
	h := &history.History{Groups: []history.GroupEvent{
		ev("a", history.Assigned, 1, 0),
		ev("a", history.Delivered, 1, 0), ev("a", history.Delivered, 1, 1), ev("a", history.Delivered, 1, 2),
		ev("a", history.Committed, 1, 3),
		ev("", history.ResetUnknown, 0, 0),
		ev("b", history.Assigned, 3, 3),
		ev("b", history.Delivered, 3, 3), ev("b", history.Delivered, 3, 4),
		ev("b", history.Committed, 3, 5),
		ev("a", history.Assigned, 2, 2), // a's old assignment, recorded late
		ev("b", history.Delivered, 3, 5),
	}}
	if v := Groups(h); !v.OK {
		t.Fatalf("a stale assignment below the commits:\n%s", describe(v))
	}
	// The same assignment at a generation newer than every commit is the
	// unknown reset's outcome: the partition is read from there.
	h.Groups[10].Generation = 4
	h.Groups[11] = ev("a", history.Delivered, 4, 2)
	if v := Groups(h); !v.OK || v.Stats["resets_unknown"] != 1 {
		t.Fatalf("an assignment below the commits after an unknown reset:\n%s", describe(v))
	}
}
