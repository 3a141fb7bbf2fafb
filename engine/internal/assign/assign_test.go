package assign_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/assign"
)

var seedFlag = flag.Uint64("assign.seed", 0, "seed for the randomized tests (0: from the clock)")

// seed returns the seed of a randomized test, logged so a failure replays
// with -assign.seed.
func seed(t *testing.T) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -assign.seed=%d)", s, s)
	return s
}

// The scripts under testdata/ drive one group: its live members in join
// order, the topic's partition count and the group's current assignment.
// Every command that changes the group runs Assign right away, the way the
// coordinator does, and prints the new assignment (each member in join
// order, then its partitions) and the moves from the previous one. The
// harness also checks balance and completeness after every step and fails
// the test if either breaks, whatever the expected output says.
//
// Commands:
//
//	partitions n=N
//	    Sets the partition count to N and rebalances.
//	join ID [ID ...]
//	    Appends the members to the group (newest last) and rebalances once.
//	leave ID [ID ...]
//	    Removes the members and rebalances once.
//	current
//	ID: P [P ...]
//	...
//	    Replaces the current assignment verbatim with the input (which may
//	    name members not in the group, partitions past the count and the
//	    same partition twice); does not rebalance.
//	rebalance
//	    Runs Assign with nothing changed.
//
// Output:
//
//	ID: P P ... (or "none")    one line per member, in join order
//	moves (K): pP FROM->TO, ...  "(none)" stands for no owner
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		g := &group{}
		datadriven.RunTest(t, path, g.cmd)
	})
}

type group struct {
	n       uint32
	members []string
	cur     map[string][]uint32
}

func (g *group) cmd(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "partitions":
		var n int
		d.ScanArgs(t, "n", &n)
		g.n = uint32(n)
	case "join":
		for _, a := range d.CmdArgs {
			if slices.Contains(g.members, a.Key) {
				d.Fatalf(t, "%s is already a member", a.Key)
			}
			if a.Key == "(none)" {
				d.Fatalf(t, "(none) is how the output writes no owner")
			}
			g.members = append(g.members, a.Key)
		}
	case "leave":
		for _, a := range d.CmdArgs {
			i := slices.Index(g.members, a.Key)
			if i < 0 {
				d.Fatalf(t, "%s is not a member", a.Key)
			}
			g.members = slices.Delete(g.members, i, i+1)
		}
	case "current":
		g.cur = parseAssignment(t, d)
		return ""
	case "rebalance":
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return g.rebalance(t)
}

func parseAssignment(t *testing.T, d *datadriven.TestData) map[string][]uint32 {
	a := make(map[string][]uint32)
	for line := range strings.Lines(d.Input) {
		id, list, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			d.Fatalf(t, "want ID: P P ..., got %q", line)
		}
		ps := []uint32{}
		for f := range strings.FieldsSeq(list) {
			p, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				d.Fatalf(t, "%q: %v", line, err)
			}
			ps = append(ps, uint32(p))
		}
		a[strings.TrimSpace(id)] = ps
	}
	return a
}

func (g *group) rebalance(t *testing.T) string {
	next := assign.Assign(g.members, g.n, g.cur)
	for _, p := range problems(g.members, g.n, next) {
		t.Error(p)
	}
	moves := assign.Moves(g.cur, next)
	g.cur = next
	var sb strings.Builder
	for _, id := range g.members {
		fmt.Fprintf(&sb, "%s: %s\n", id, formatList(next[id]))
	}
	list := make([]string, len(moves))
	for i, m := range moves {
		list[i] = fmt.Sprintf("p%d %s->%s", m.Partition, ownerName(m.From), ownerName(m.To))
	}
	if len(list) == 0 {
		list = append(list, "none")
	}
	fmt.Fprintf(&sb, "moves (%d): %s\n", len(moves), strings.Join(list, ", "))
	return sb.String()
}

func formatList(ps []uint32) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.FormatUint(uint64(p), 10)
	}
	return strings.Join(s, " ")
}

func ownerName(id string) string {
	if id == "" {
		return "(none)"
	}
	return id
}

// problems reports every way a is not a valid assignment of n partitions to
// members: a member missing or unknown, a list unsorted or naming a
// partition >= n, a partition with no owner or several, counts differing by
// more than one.
func problems(members []string, n uint32, a map[string][]uint32) []string {
	var out []string
	if len(a) != len(members) {
		out = append(out, fmt.Sprintf("%d members in the assignment, want %d", len(a), len(members)))
	}
	if len(members) == 0 {
		return out
	}
	owners := make([]int, n)
	lo, hi := int(n)+1, -1
	for _, id := range members {
		ps, ok := a[id]
		if !ok || ps == nil {
			out = append(out, fmt.Sprintf("member %s missing (or nil)", id))
		}
		if !slices.IsSorted(ps) {
			out = append(out, fmt.Sprintf("member %s: %v not sorted", id, ps))
		}
		for _, p := range ps {
			if p >= n {
				out = append(out, fmt.Sprintf("member %s holds p%d, past the count %d", id, p, n))
				continue
			}
			owners[p]++
		}
		lo, hi = min(lo, len(ps)), max(hi, len(ps))
	}
	for p, k := range owners {
		if k != 1 {
			out = append(out, fmt.Sprintf("p%d has %d owners, want 1", p, k))
		}
	}
	if hi-lo > 1 {
		out = append(out, fmt.Sprintf("member counts from %d to %d: unbalanced", lo, hi))
	}
	return out
}

// TestRandomHistories runs random sequences of joins, leaves, partition
// count changes and corrupted inputs, and checks after every step that the
// assignment is valid (balanced, complete), stable (a second Assign moves
// nothing), follows every rule of the package doc, and moves exactly what
// the package doc promises:
//
//   - a join moves floor(n/m) partitions, m the member count with the
//     joiner, all to the joiner. Proof: before the join the counts are b
//     or b+1, with b = n/(m-1) and e = n%(m-1) members at b+1. Let
//     b1 = n/m <= b. If b1 < b, every old member's new quota, at most
//     b1+1 <= b, is at most what it holds. If b1 = b, there are
//     e1 = n - m*b = e - b <= e larger quotas, and they go to b+1 holders
//     first. Either way no old member gains, and the joiner, holding none,
//     ranks last and gets b1. So the moves are exactly the joiner's b1.
//     Nothing does better: the joiner's share must move to it.
//   - a leave moves exactly the leaver's partitions, all away from it.
//     With m the member count before the leave and b, e as above for m,
//     b2 = n/(m-1) >= b. If b2 > b, every new quota covers what its member
//     holds. If b2 = b, there are e2 = e + b >= e larger quotas, and they
//     go to the b+1 holders first. So every remaining member keeps all it
//     has and only the leaver's partitions move.
//   - growing the partition count moves only the new partitions (from no
//     owner), by the same argument as a leave: the new base is at least
//     the old, and if equal there are at least as many larger quotas.
//
// These are tighter than the bound ceil(n/m)+1 one could ask for: a join
// moves at most ceil(n/m) (m with the joiner), a leave at most ceil(n/m)
// (m before the leave). Shrinking can move surviving partitions; that it
// moves as few as balance allows is what TestMinimalMoves checks.
func TestRandomHistories(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 1))
	for range 300 {
		h := &history{t: t, rng: rng, n: uint32(rng.IntN(25)), cur: map[string][]uint32{}}
		h.log = append(h.log, fmt.Sprintf("partitions %d", h.n))
		for range 60 {
			h.step()
			if t.Failed() {
				t.Fatalf("history:\n%s", strings.Join(h.log, "\n"))
			}
		}
	}
}

type history struct {
	t       *testing.T
	rng     *rand.Rand
	n       uint32
	members []string
	cur     map[string][]uint32 // always Assign's result for members and n
	nextID  int
	log     []string
}

func (h *history) step() {
	t := h.t
	prev, prevN := h.cur, h.n
	input := prev // what Assign gets: prev, unless corrupted
	corrupted := false
	var check func(next map[string][]uint32, moves []assign.Move)
	switch r := h.rng.IntN(100); {
	case r < 35:
		id := fmt.Sprintf("m%d", h.nextID)
		h.nextID++
		h.members = append(h.members, id)
		h.log = append(h.log, "join "+id)
		check = func(next map[string][]uint32, moves []assign.Move) {
			want := int(h.n) / len(h.members)
			if len(moves) != want {
				t.Errorf("join %s: %d moves, want n/m = %d", id, len(moves), want)
			}
			for _, m := range moves {
				if m.To != id || (m.From == "") != (len(h.members) == 1) {
					t.Errorf("join %s: move %+v", id, m)
				}
			}
		}
	case r < 65 && len(h.members) > 0:
		i := h.rng.IntN(len(h.members))
		id := h.members[i]
		h.members = slices.Delete(h.members, i, i+1)
		h.log = append(h.log, "leave "+id)
		check = func(next map[string][]uint32, moves []assign.Move) {
			if len(moves) != len(prev[id]) {
				t.Errorf("leave %s: %d moves, want its %d partitions", id, len(moves), len(prev[id]))
			}
			for _, m := range moves {
				if m.From != id || (m.To == "") != (len(h.members) == 0) {
					t.Errorf("leave %s: move %+v", id, m)
				}
			}
		}
	case r < 80:
		h.n = uint32(h.rng.IntN(41))
		h.log = append(h.log, fmt.Sprintf("partitions %d", h.n))
		if h.n >= prevN {
			check = func(next map[string][]uint32, moves []assign.Move) {
				want := int(h.n - prevN)
				if len(h.members) == 0 {
					want = 0
				}
				if len(moves) != want {
					t.Errorf("grow %d->%d: %d moves, want %d", prevN, h.n, len(moves), want)
				}
				for _, m := range moves {
					if m.From != "" || m.Partition < prevN {
						t.Errorf("grow %d->%d: move %+v", prevN, h.n, m)
					}
				}
			}
		}
	case r < 90:
		input, corrupted = h.corrupt(prev), true
		h.log = append(h.log, fmt.Sprintf("corrupt to %v", input))
	default:
		h.log = append(h.log, "rebalance")
		check = func(next map[string][]uint32, moves []assign.Move) {
			if len(moves) != 0 {
				t.Errorf("rebalance with nothing changed: moves %+v", moves)
			}
		}
	}
	next := assign.Assign(h.members, h.n, input)
	moves := assign.Moves(input, next)
	h.log = append(h.log, fmt.Sprintf("  -> %v moves %v", next, moves))
	for _, p := range problems(h.members, h.n, next) {
		t.Error(p)
	}
	if check != nil {
		check(next, moves)
	}
	if !corrupted {
		checkRules(t, h.members, h.n, prev, next)
	}
	again := assign.Assign(h.members, h.n, next)
	if diff := cmp.Diff(next, again); diff != "" {
		t.Errorf("Assign is not stable on its own result (-first +second):\n%s", diff)
	}
	if m := assign.Moves(next, again); len(m) != 0 {
		t.Errorf("second Assign moves %+v", m)
	}
	h.cur = next
}

// corrupt returns a copy of a with junk a coordinator might hand over: a
// member that left, partitions past the count, a partition listed twice
// (under one member or two), a member's list unsorted.
func (h *history) corrupt(a map[string][]uint32) map[string][]uint32 {
	out := make(map[string][]uint32, len(a)+1)
	for id, ps := range a {
		ps = slices.Clone(ps)
		h.rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		out[id] = ps
	}
	pick := func() uint32 { return uint32(h.rng.IntN(int(h.n) + 5)) }
	out["gone"] = []uint32{pick(), pick()}
	for _, id := range h.members {
		if h.rng.IntN(2) == 0 {
			out[id] = append(out[id], pick(), pick())
		}
	}
	return out
}

// checkRules checks next against the rules of the package doc, given the
// well-formed assignment prev it came from:
//   - each member keeps the lowest min(held, quota) of the partitions it
//     held (below the count), and gains nothing if it had to give some up;
//   - a member with the larger quota held more than one with the smaller,
//     or as many and joined earlier;
//   - the partitions members gain are ascending in join order.
func checkRules(t *testing.T, members []string, n uint32, prev, next map[string][]uint32) {
	t.Helper()
	held := make([][]uint32, len(members))
	var gained []uint32
	for i, id := range members {
		for _, p := range prev[id] {
			if p < n {
				held[i] = append(held[i], p)
			}
		}
		q := len(next[id])
		want := held[i][:min(len(held[i]), q)]
		var kept, got []uint32
		for _, p := range next[id] {
			if slices.Contains(held[i], p) {
				kept = append(kept, p)
			} else {
				got = append(got, p)
			}
		}
		if !slices.Equal(kept, want) {
			t.Errorf("%s held %v, quota %d: kept %v, want %v", id, held[i], q, kept, want)
		}
		gained = append(gained, got...)
	}
	if !slices.IsSorted(gained) {
		t.Errorf("gained partitions in join order %v, want ascending", gained)
	}
	for i, a := range members {
		for j := i + 1; j < len(members); j++ {
			b := members[j]
			if len(next[b]) > len(next[a]) && len(held[j]) <= len(held[i]) {
				t.Errorf("%s (newer, held %d) got the larger quota over %s (held %d)", b, len(held[j]), a, len(held[i]))
			}
			if len(next[a]) > len(next[b]) && len(held[i]) < len(held[j]) {
				t.Errorf("%s (held %d) got the larger quota over %s (held %d)", a, len(held[i]), b, len(held[j]))
			}
		}
	}
}

// TestMinimalMoves compares Assign with every balanced, complete assignment
// of small groups (up to 6 partitions and 4 members) from random current
// assignments (with members that left and partitions past the count): none
// moves fewer partitions.
func TestMinimalMoves(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 2))
	for range 500 {
		n := uint32(rng.IntN(7))
		members := []string{"a", "b", "c", "d"}[:1+rng.IntN(4)]
		owners := append(slices.Clone(members), "gone", "")
		cur := map[string][]uint32{}
		for p := range n + 2 {
			if o := owners[rng.IntN(len(owners))]; o != "" {
				cur[o] = append(cur[o], p)
			}
		}
		got := len(assign.Moves(cur, assign.Assign(members, n, cur)))
		best := -1
		forEachBalanced(members, n, func(a map[string][]uint32) {
			if k := len(assign.Moves(cur, a)); best < 0 || k < best {
				best = k
			}
		})
		if got != best {
			t.Fatalf("Assign(%v, %d, %v) moves %d, the best balanced assignment %d", members, n, cur, got, best)
		}
	}
}

// forEachBalanced calls f with every assignment of n partitions to members
// whose counts differ by at most one.
func forEachBalanced(members []string, n uint32, f func(map[string][]uint32)) {
	owner := make([]int, n)
	for {
		counts := make([]int, len(members))
		for _, o := range owner {
			counts[o]++
		}
		if slices.Max(counts)-slices.Min(counts) <= 1 {
			a := make(map[string][]uint32)
			for _, id := range members {
				a[id] = []uint32{}
			}
			for p, o := range owner {
				a[members[o]] = append(a[members[o]], uint32(p))
			}
			f(a)
		}
		i := 0
		for ; i < len(owner); i++ {
			if owner[i]++; owner[i] < len(members) {
				break
			}
			owner[i] = 0
		}
		if i == len(owner) {
			return
		}
	}
}

// TestDeterministic builds the same input many times (maps iterate in a
// different order each time) with partitions claimed twice and a member
// listed twice, where an order dependence would show, and checks that
// Assign and Moves give the same answer every time and that Assign modifies
// none of its arguments.
func TestDeterministic(t *testing.T) {
	members := []string{"m3", "m1", "m2", "m1"} // m1 counts once, second
	build := func() map[string][]uint32 {
		return map[string][]uint32{
			"m1":   {5, 1, 1, 9, 12}, // 9 is m3's (older), 12 is past the count
			"m2":   {1, 2, 5},        // 1 and 5 are m1's (older)
			"gone": {0, 3},           // not a member
			"m3":   {9, 4},
		}
	}
	// Held after cleaning: m3 4 9, m1 1 5, m2 2. 10 partitions over 3
	// members: quotas 4 3 3, the 4 to m3 (ties m1 on two held, joined
	// first). Free 0 3 6 7 8 go in join order: m3 0 3, m1 6, m2 7 8.
	want := map[string][]uint32{
		"m3": {0, 3, 4, 9},
		"m1": {1, 5, 6},
		"m2": {2, 7, 8},
	}
	// Old owners: p1 and p5 are listed under m1 and m2, p9 under m1 and m3;
	// the least id, m1, counts.
	wantMoves := []assign.Move{
		{Partition: 0, From: "gone", To: "m3"},
		{Partition: 3, From: "gone", To: "m3"},
		{Partition: 6, From: "", To: "m1"},
		{Partition: 7, From: "", To: "m2"},
		{Partition: 8, From: "", To: "m2"},
		{Partition: 9, From: "m1", To: "m3"},
		{Partition: 12, From: "m1", To: ""},
	}
	for range 50 {
		cur := build()
		got := assign.Assign(members, 10, cur)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Assign (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(build(), cur); diff != "" {
			t.Fatalf("Assign modified current (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(wantMoves, assign.Moves(cur, got)); diff != "" {
			t.Fatalf("Moves (-want +got):\n%s", diff)
		}
	}
	if !slices.Equal(members, []string{"m3", "m1", "m2", "m1"}) {
		t.Fatalf("Assign modified members: %v", members)
	}
}

// TestResultSlicesAreCapped checks that appending to one member's list
// never writes into another's (they share one backing array).
func TestResultSlicesAreCapped(t *testing.T) {
	a := assign.Assign([]string{"a", "b"}, 4, nil)
	_ = append(a["a"], 99)
	if want := []uint32{2, 3}; !slices.Equal(a["b"], want) {
		t.Fatalf("b holds %v after an append to a, want %v", a["b"], want)
	}
}

// TestNoMembers checks the edges: no members assign nothing, and no
// partitions still list every member.
func TestNoMembers(t *testing.T) {
	if a := assign.Assign(nil, 8, map[string][]uint32{"gone": {1}}); a == nil || len(a) != 0 {
		t.Errorf("no members: %v, want an empty map", a)
	}
	want := map[string][]uint32{"a": {}, "b": {}}
	if diff := cmp.Diff(want, assign.Assign([]string{"a", "b"}, 0, map[string][]uint32{"a": {0}})); diff != "" {
		t.Errorf("no partitions (-want +got):\n%s", diff)
	}
	if m := assign.Moves(nil, nil); m == nil || len(m) != 0 {
		t.Errorf("Moves(nil, nil) = %#v, want empty", m)
	}
}

func ExampleAssign() {
	a := assign.Assign([]string{"m1"}, 6, nil)
	fmt.Println(a)
	b := assign.Assign([]string{"m1", "m2", "m3"}, 6, a) // m2 and m3 join
	fmt.Println(b)
	fmt.Println(assign.Moves(a, b))
	// Output:
	// map[m1:[0 1 2 3 4 5]]
	// map[m1:[0 1] m2:[2 3] m3:[4 5]]
	// [{2 m1 m2} {3 m1 m2} {4 m1 m3} {5 m1 m3}]
}

// BenchmarkAssign is a group of 100 members over 1000 partitions: the
// first assignment, a rebalance with nothing changed, the 100th member
// joining, and a 101st member leaving.
func BenchmarkAssign(b *testing.B) {
	members := make([]string, 101)
	for i := range members {
		members[i] = fmt.Sprintf("member-%03d", i)
	}
	const n = 1000
	live := members[:100]
	for _, bc := range []struct {
		name string
		cur  map[string][]uint32
	}{
		{"first", nil},
		{"stable", assign.Assign(live, n, nil)},
		{"join", assign.Assign(members[:99], n, nil)},
		{"leave", assign.Assign(members, n, nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				assign.Assign(live, n, bc.cur)
			}
		})
	}
}

// BenchmarkMoves lists the moves of the 100th member joining a group over
// 1000 partitions.
func BenchmarkMoves(b *testing.B) {
	members := make([]string, 100)
	for i := range members {
		members[i] = fmt.Sprintf("member-%03d", i)
	}
	old := assign.Assign(members[:99], 1000, nil)
	next := assign.Assign(members, 1000, old)
	b.ReportAllocs()
	for b.Loop() {
		assign.Moves(old, next)
	}
}
