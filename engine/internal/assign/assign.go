// Package assign computes the partition assignment of a server-managed
// subscriber group: which of a topic's partitions each live member reads.
// The group coordinator calls Assign whenever a member joins or leaves (or
// the topic's partition count changes) and hands each member its list; Moves
// tells it which partitions changed hands, so it can revoke them from their
// old owners before granting them to the new ones.
//
// The package is pure logic: no goroutines, no clock, no randomness, and no
// result depends on map iteration order. The same members, partition count
// and current assignment always give the same answer, on every broker, so
// the replicas of a coordinator applying the same membership changes agree
// on the assignment without exchanging it, and tests drive it as scripts
// (testdata/).
//
// # Usage
//
// The coordinator of a group:
//
//  1. keeps the live members in join order (a member that rejoins goes to
//     the end) and the group's last assignment;
//  2. on a join, a leave or a change of the partition count, calls
//     next := Assign(members, partitions, last);
//  3. for each Move in Moves(last, next), revokes the partition from From
//     (if any) before granting it to To (if any);
//  4. stores next as last.
//
// # What an assignment promises
//
// With at least one member, every partition below the count has exactly one
// owner and the members' counts differ by at most one. With no members,
// nothing is assigned. Every member appears in the result, possibly with no
// partitions (when there are more members than partitions).
//
// # Why sticky
//
// Moving a partition is not free: its old owner must stop and commit, its
// new owner must resume from the committed position, and records in flight
// may be redelivered. So among all balanced assignments Assign picks one
// that keeps as many current owners as possible. Starting from an
// assignment Assign made, one join moves exactly floor(partitions/members)
// partitions (members counting the joiner), all to the new member; one
// leave moves exactly the leaver's partitions, all away from it; growing
// the partition count moves only the new partitions. No other partition
// moves, and none of this can be beaten: the joiner must receive its share,
// the leaver's partitions and the new ones must find an owner. Shrinking
// the count drops the partitions past it and moves as few survivors as
// balance allows.
//
// # The algorithm
//
// With m live members and n partitions, each member's quota is n/m, and
// n%m of them get one more.
//
//  1. Clean the current assignment. Members that are not live are ignored,
//     as are partitions >= n. A partition claimed more than once keeps its
//     oldest live claimant (join order), so a corrupt or stale input still
//     ends with one owner per partition.
//  2. Hand out the quotas. The n%m larger quotas go to the members holding
//     the most partitions (a larger quota lets a larger holder keep one more
//     partition, while for a smaller holder it only means taking one), ties
//     broken by join order, oldest first. A member holding h partitions
//     with quota q keeps min(h, q), so a larger quota adds a kept
//     partition exactly when h > n/m: giving them to the largest holders
//     keeps the most partitions, hence moves the fewest.
//  3. Keep. Each member keeps its lowest-numbered current partitions up to
//     its quota and frees the rest. Lowest-numbered is arbitrary but fixed,
//     so the outcome is deterministic.
//  4. Fill. The free partitions (freed, unowned or new), in ascending
//     order, go to the members below their quota in join order: the oldest
//     such member takes the lowest free partitions until it reaches its
//     quota, then the next. A first assignment thus gives each member a
//     contiguous range.
//
// Because step 2 gives the larger quotas to the larger holders, running
// Assign again on its own result changes nothing: every member already holds
// exactly its quota.
//
// Cost: O(n + c log c + m log m) time, where c is the number of partitions
// the current assignment mentions, and O(n + c + m) memory.
package assign

import (
	"cmp"
	"slices"
)

// Assign returns the partitions of each member: every member in members
// appears as a key, with its partitions in ascending order (an empty, non-nil
// slice if none). With no members the result is empty.
//
// members are the live member ids in join order, oldest first; an id listed
// twice counts once, at its first place. Ids should be non-empty, since
// Moves writes "" for no owner. partitions is the topic's partition
// count. current is the previous assignment; it may be nil, name members
// that left (ignored), and list partitions >= partitions (ignored) or the
// same partition more than once (the oldest live claimant keeps it).
//
// Assign neither modifies nor keeps its arguments. The returned slices
// share one backing array, each capped at its length, so appending to one
// never writes into another.
func Assign(members []string, partitions uint32, current map[string][]uint32) map[string][]uint32 {
	members = unique(members)
	out := make(map[string][]uint32, len(members))
	if len(members) == 0 {
		return out
	}
	n, m := int(partitions), len(members)

	// 1. Clean: held[i] is member i's valid current partitions, ascending,
	// each claimed by no older member. owned marks the partitions claimed.
	// Every member's valid partitions are copied into one scratch slice
	// (Assign must not sort the caller's slices), member i's at held[i].
	c := 0
	for _, id := range members {
		c += len(current[id])
	}
	scratch := make([]uint32, 0, c) // never grows, so held's slices stay valid
	held := make([][]uint32, m)
	for i, id := range members {
		start := len(scratch)
		for _, p := range current[id] {
			if p < partitions {
				scratch = append(scratch, p)
			}
		}
		held[i] = scratch[start:len(scratch):len(scratch)]
	}
	owned := make([]bool, n)
	for i, own := range held {
		slices.Sort(own)
		kept := own[:0]
		for _, p := range own {
			if !owned[p] {
				owned[p] = true
				kept = append(kept, p)
			}
		}
		held[i] = kept
	}

	// 2. Quotas: the n%m larger ones go to the largest holders, then the
	// oldest.
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(len(held[b]), len(held[a]))
	})
	quota := make([]int, m)
	for rank, i := range order {
		quota[i] = n / m
		if rank < n%m {
			quota[i]++
		}
	}

	// 3. Keep: the lowest-numbered current partitions up to the quota.
	for i := range held {
		if len(held[i]) > quota[i] {
			for _, p := range held[i][quota[i]:] {
				owned[p] = false
			}
			held[i] = held[i][:quota[i]]
		}
	}

	// 4. Fill: free partitions ascending, to members below quota in join
	// order. The quotas sum to n, so this uses every free partition.
	backing := make([]uint32, n)
	next := 0 // every partition below next is owned or handed out
	off := 0
	for i, id := range members {
		mine := append(backing[off:off:off+quota[i]], held[i]...)
		for len(mine) < quota[i] {
			for owned[next] {
				next++
			}
			mine = append(mine, uint32(next))
			next++
		}
		slices.Sort(mine)
		out[id] = mine
		off += quota[i]
	}
	return out
}

// unique returns members without repeated ids, keeping each id's first
// place. It returns members itself when there are no repeats.
func unique(members []string) []string {
	seen := make(map[string]struct{}, len(members))
	var out []string
	for i, id := range members {
		if _, dup := seen[id]; dup {
			if out == nil {
				out = slices.Clone(members[:i])
			}
			continue
		}
		seen[id] = struct{}{}
		if out != nil {
			out = append(out, id)
		}
	}
	if out == nil {
		return members
	}
	return out
}

// Move is a partition whose owner differs between two assignments. From or
// To is "" when the partition has no owner on that side (a new or a dropped
// partition, or no members).
type Move struct {
	Partition uint32
	From, To  string
}

// Moves lists the partitions whose owner differs between old and new, in
// ascending partition order; the slice is empty (non-nil) when nothing
// moved. A partition owned on one side only counts. It costs O(p log p) for
// the p partitions listed and does not modify its arguments.
//
// Each assignment should give a partition at most one owner, as Assign's
// results do. If one lists a partition under several members, the least
// member id (byte order) counts as its owner, so the result never depends on
// map iteration order.
func Moves(old, new map[string][]uint32) []Move {
	from, fromIDs := owners(old)
	to, toIDs := owners(new)
	moves := []Move{}
	for len(from) > 0 || len(to) > 0 {
		var m Move
		switch {
		case len(to) == 0 || len(from) > 0 && from[0].p() < to[0].p():
			m = Move{Partition: from[0].p(), From: fromIDs[from[0].rank()]}
			from = from[1:]
		case len(from) == 0 || to[0].p() < from[0].p():
			m = Move{Partition: to[0].p(), To: toIDs[to[0].rank()]}
			to = to[1:]
		default:
			m = Move{Partition: from[0].p(), From: fromIDs[from[0].rank()], To: toIDs[to[0].rank()]}
			from, to = from[1:], to[1:]
		}
		if m.From != m.To {
			moves = append(moves, m)
		}
	}
	return moves
}

// owner is a partition and its owner packed for a fast sort: the partition
// in the high 32 bits, the owner's rank among the assignment's ids (byte
// order) in the low 32.
type owner uint64

func (o owner) p() uint32 { return uint32(o >> 32) }
func (o owner) rank() int { return int(uint32(o)) }

// owners lists the partitions of a with their owner, ascending, one entry
// per partition: the least id if several members list it. ids maps a rank
// back to its id.
func owners(a map[string][]uint32) (o []owner, ids []string) {
	ids = make([]string, 0, len(a))
	c := 0
	for id, ps := range a {
		ids = append(ids, id)
		c += len(ps)
	}
	slices.Sort(ids)
	o = make([]owner, 0, c)
	for rank, id := range ids {
		for _, p := range a[id] {
			o = append(o, owner(p)<<32|owner(rank))
		}
	}
	slices.Sort(o)
	return slices.CompactFunc(o, func(x, y owner) bool { return x.p() == y.p() }), ids
}
