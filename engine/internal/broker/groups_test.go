package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/groups"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/partition"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// memberSink collects a group member's events and reports assignments.
type memberSink struct {
	mu      sync.Mutex
	events  []*rewindv1.SubscribeResponse
	assigns chan *rewindv1.AssignmentEvent
}

func newMemberSink() *memberSink {
	return &memberSink{assigns: make(chan *rewindv1.AssignmentEvent, 64)}
}

func (s *memberSink) Send(m *rewindv1.SubscribeResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := cloneResp(m)
	s.events = append(s.events, c)
	if a := c.GetAssignment(); a != nil {
		s.assigns <- a
	}
	return nil
}

func cloneResp(m *rewindv1.SubscribeResponse) *rewindv1.SubscribeResponse {
	var c collect
	c.Send(m)
	return c.last
}

type member struct {
	sink   *memberSink
	cancel context.CancelFunc
	done   chan error
}

func join(t *testing.T, b *Broker, group, topic string) *member {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{sink: newMemberSink(), cancel: cancel, done: make(chan error, 1)}
	go func() {
		m.done <- b.Subscribe(ctx, SubscribeParams{Topic: topic, Group: group, Start: cursor.Start{Kind: cursor.Earliest}}, m.sink)
	}()
	return m
}

// next waits for the member's next assignment.
func (m *member) next(t *testing.T) *rewindv1.AssignmentEvent {
	t.Helper()
	select {
	case a := <-m.sink.assigns:
		return a
	case err := <-m.done:
		t.Fatalf("member stream ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no assignment")
	}
	return nil
}

func (m *member) leave() { m.cancel(); <-m.done }

func partsOf(a *rewindv1.AssignmentEvent) []uint32 {
	var out []uint32
	for _, p := range a.GetPartitions() {
		out = append(out, p.GetPartition())
	}
	return out
}

func TestGroupAssignsFencesAndRebalances(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	m1 := join(t, b, "g", "t")
	a1 := m1.next(t)
	if got := partsOf(a1); len(got) != 4 {
		t.Fatalf("sole member got %v", got)
	}
	if err := b.Commit(ctx, "g", "t", a1.GetGeneration(), map[uint32]uint64{0: 0, 3: 0}); err != nil {
		t.Fatal(err)
	}
	m2 := join(t, b, "g", "t")
	a2 := m2.next(t)
	var a1b *rewindv1.AssignmentEvent
	for a1b = m1.next(t); len(a1b.GetRevoked()) > 0; a1b = m1.next(t) {
	}
	if len(partsOf(a2)) != 2 || len(partsOf(a1b)) != 2 || a2.GetGeneration() != a1b.GetGeneration() || a2.GetGeneration() <= a1.GetGeneration() {
		t.Fatalf("after a join: m1 %v (gen %d), m2 %v (gen %d)", partsOf(a1b), a1b.GetGeneration(), partsOf(a2), a2.GetGeneration())
	}
	// m1's commit from before the rebalance, for a partition that moved to
	// m2, is fenced; m2's commit with the new generation lands.
	moved := partsOf(a2)[0]
	err := b.Commit(ctx, "g", "t", a1.GetGeneration(), map[uint32]uint64{moved: 0})
	if !errors.Is(err, partition.ErrFenced) {
		t.Fatalf("zombie commit: %v", err)
	}
	if err := b.Commit(ctx, "g", "t", a2.GetGeneration(), map[uint32]uint64{moved: 0}); err != nil {
		t.Fatal(err)
	}
	// A generation never issued is refused (it would fence everyone out).
	if err := b.Commit(ctx, "g", "t", a2.GetGeneration()+100, map[uint32]uint64{moved: 0}); !errors.Is(err, groups.ErrUnknownGeneration) {
		t.Fatalf("future generation: %v", err)
	}
	m2.leave()
	if got := partsOf(m1.next(t)); len(got) != 4 {
		t.Fatalf("after m2 left, m1 has %v", got)
	}
	// Delete is refused while m1 is there, unless forced; force ends m1.
	if err := b.DeleteGroup(ctx, "g", false); !errors.Is(err, groups.ErrHasMembers) {
		t.Fatalf("delete with members: %v", err)
	}
	if err := b.DeleteGroup(ctx, "g", true); err != nil {
		t.Fatal(err)
	}
	if err := <-m1.done; !errors.Is(err, groups.ErrDeleted) {
		t.Fatalf("member of a deleted group ended with %v", err)
	}
	if _, err := b.DescribeGroup("g"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("describe a deleted group: %v", err)
	}
}

func TestResetPlanForEveryTarget(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	top, err := b.CreateTopic(ctx, TopicSpec{Name: "r", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	var mid PublishResult
	var p1Times []int64 // append times of partition 1's records
	for i := range 10 {
		_, res, err := b.Publish(ctx, "r", []PublishRecord{
			{Record: pub("a")[0].Record, Partition: 0, HasPartition: true},
			{Record: pub("b")[0].Record, Partition: 1, HasPartition: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		if i == 6 {
			mid = res[0]
		}
		p1Times = append(p1Times, res[1].AppendTime)
		time.Sleep(time.Millisecond) // distinct append times
	}
	// The group committed 8 in partition 0, nothing in partition 1.
	if err := b.Commit(ctx, "g", "r", 0, map[uint32]uint64{0: 8}); err != nil {
		t.Fatal(err)
	}
	midID := msgid.ID{TopicID: top.ID, Partition: 0, Offset: mid.Offset}
	// Partition 1 applies its half of a request independently of partition
	// 0, so its record 6 may be stamped just before mid: a time seek there
	// lands on the first record at or after mid's time.
	p1AtMid := uint64(0)
	for p1AtMid < 10 && p1Times[p1AtMid] < mid.AppendTime {
		p1AtMid++
	}
	type row struct {
		cur, new     uint64
		had, clamped bool
	}
	for _, tc := range []struct {
		name   string
		target groups.Target
		want   [2]row
	}{
		{"earliest", groups.Target{Kind: groups.ToEarliest}, [2]row{{8, 0, true, false}, {0, 0, false, false}}},
		{"latest", groups.Target{Kind: groups.ToLatest}, [2]row{{8, 10, true, false}, {0, 10, false, false}}},
		{"offset", groups.Target{Kind: groups.ToOffset, Offset: 4}, [2]row{{8, 4, true, false}, {0, 4, false, false}}},
		{"offset past the end", groups.Target{Kind: groups.ToOffset, Offset: 50}, [2]row{{8, 10, true, true}, {0, 10, false, true}}},
		{"shift back", groups.Target{Kind: groups.ToShift, Shift: -3}, [2]row{{8, 5, true, false}, {0, 0, false, true}}},
		{"shift forward", groups.Target{Kind: groups.ToShift, Shift: 5}, [2]row{{8, 10, true, true}, {0, 5, false, false}}},
		{"time", groups.Target{Kind: groups.ToTime, Time: mid.AppendTime}, [2]row{{8, 6, true, false}, {0, p1AtMid, false, false}}},
		{"time back", groups.Target{Kind: groups.ToTimeBack, Time: int64(time.Hour)}, [2]row{{8, 0, true, false}, {0, 0, false, false}}},
		{"message id", groups.Target{Kind: groups.ToMessageID, ID: midID}, [2]row{{8, 6, true, false}, {0, p1AtMid, false, false}}},
	} {
		plan, err := b.ResetGroup(ctx, "g", "r", tc.target, nil, true, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i, r := range plan.Rows {
			got := row{r.Current, r.New, r.HadCommit, r.Clamped}
			if got != tc.want[i] || r.Reread != int64(r.Current)-int64(r.New) || r.Lag != 10-r.New {
				t.Errorf("%s, partition %d: %+v, want %+v", tc.name, i, r, tc.want[i])
			}
		}
		if plan.Executed {
			t.Fatalf("%s: a dry run executed", tc.name)
		}
	}
	// Executing one changes the committed offsets.
	plan, err := b.ResetGroup(ctx, "g", "r", groups.Target{Kind: groups.ToOffset, Offset: 2}, []uint32{1}, false, false)
	if err != nil || !plan.Executed || len(plan.Rows) != 1 {
		t.Fatalf("execute: %+v %v", plan, err)
	}
	infos, err := b.DescribeGroup("g")
	if err != nil {
		t.Fatal(err)
	}
	if p := infos[0].Partitions[1]; !p.HasCommits || p.State.Offset != 2 || p.Lag != 8 {
		t.Fatalf("after the reset: %+v", p)
	}
}

// TestCommittedOffsetsAreLinearizable runs concurrent commits (with current
// and stale generations), resets and reads against one partition of a real
// broker, records every operation's call and return, and checks the history
// with porcupine against the model of a fenced register: a commit lands iff
// its generation is not older than the fence, a reset installs a newer
// generation, a read sees the last landed value.
func TestCommittedOffsetsAreLinearizable(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "lin", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, _, err := b.Publish(ctx, "lin", pub("x", "y", "z", "w")); err != nil {
			t.Fatal(err)
		}
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	var (
		mu     sync.Mutex
		ops    []porcupine.Operation
		gens   = []uint64{0}
		start  = time.Now()
		now    = func() int64 { return int64(time.Since(start)) }
		wg     sync.WaitGroup
		client = 0
	)
	record := func(c int, in linInput, call int64, out linOutput) {
		mu.Lock()
		ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: now()})
		mu.Unlock()
	}
	for w := range 4 {
		client++
		c := client
		r := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				switch op := r.IntN(10); {
				case op < 6: // commit with a known generation, often a stale one
					mu.Lock()
					gen := gens[r.IntN(len(gens))]
					mu.Unlock()
					off := uint64(r.IntN(20))
					call := now()
					err := b.Commit(ctx, "g", "lin", gen, map[uint32]uint64{0: off})
					if err != nil && !errors.Is(err, partition.ErrFenced) {
						t.Error(err)
						return
					}
					record(c, linInput{kind: "commit", gen: gen, offset: off}, call, linOutput{ok: err == nil})
				case op < 8: // reset
					off := uint64(r.IntN(20))
					call := now()
					plan, err := b.ResetGroup(ctx, "g", "lin", groups.Target{Kind: groups.ToOffset, Offset: off}, nil, false, true)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					gens = append(gens, plan.Generation)
					mu.Unlock()
					record(c, linInput{kind: "reset", offset: off}, call, linOutput{ok: true, gen: plan.Generation})
				default: // read
					call := now()
					st, ok, err := mustPart(t, b, "lin").GroupState("g")
					if err != nil {
						t.Error(err)
						return
					}
					record(c, linInput{kind: "read"}, call, linOutput{ok: ok && st.Committed, offset: st.Offset})
				}
			}
		}()
	}
	wg.Wait()
	model := porcupine.Model{
		Init: func() any { return linState{} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(linState), input.(linInput), output.(linOutput)
			switch in.kind {
			case "commit":
				if in.gen >= s.fence {
					return out.ok, linState{set: true, offset: in.offset, fence: in.gen}
				}
				return !out.ok, s
			case "reset":
				return out.gen > s.fence, linState{set: true, offset: in.offset, fence: out.gen}
			default:
				return out.ok == s.set && (!s.set || out.offset == s.offset), s
			}
		},
		DescribeOperation: func(in, out any) string { return fmt.Sprintf("%+v -> %+v", in, out) },
	}
	if res := porcupine.CheckOperations(model, ops); !res {
		t.Fatalf("history of %d operations is not linearizable", len(ops))
	}
	t.Logf("%d operations, linearizable", len(ops))
}

type linState struct {
	set    bool
	offset uint64
	fence  uint64
}

type linInput struct {
	kind   string
	gen    uint64
	offset uint64
}

type linOutput struct {
	ok     bool
	gen    uint64
	offset uint64
}

func mustPart(t *testing.T, b *Broker, topic string) *partition.Partition {
	lt, err := b.topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	return lt.parts[0]
}

// TestGroupGenerationAndCommitsSurviveRestart: after a restart the
// coordinator resumes above every generation that committed, so an old
// member's commit is still fenced, and the committed offsets are there.
func TestGroupGenerationAndCommitsSurviveRestart(t *testing.T) {
	fs := vfs.NewMem()
	b := open(t, fs)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	// Two requests: keyless records of one request stay in one partition,
	// the next request takes the next partition.
	for _, vs := range [][]string{{"a", "b"}, {"c", "d"}} {
		if _, _, err := b.Publish(ctx, "t", pub(vs...)); err != nil {
			t.Fatal(err)
		}
	}
	m := join(t, b, "g", "t")
	a := m.next(t)
	if err := b.Commit(ctx, "g", "t", a.GetGeneration(), map[uint32]uint64{0: 1, 1: 2}); err != nil {
		t.Fatal(err)
	}
	m.leave()
	old := a.GetGeneration()
	b.Close()

	b = open(t, fs)
	defer b.Close()
	m = join(t, b, "g", "t")
	a = m.next(t)
	if a.GetGeneration() <= old {
		t.Fatalf("generation after restart %d, not above %d", a.GetGeneration(), old)
	}
	for _, p := range a.GetPartitions() {
		want := map[uint32]uint64{0: 1, 1: 2}[p.GetPartition()]
		if p.GetNextOffset() != want {
			t.Fatalf("partition %d restarts at %d, committed %d", p.GetPartition(), p.GetNextOffset(), want)
		}
	}
	if err := b.Commit(ctx, "g", "t", old-1, map[uint32]uint64{0: 2}); !errors.Is(err, partition.ErrFenced) {
		t.Fatalf("commit from before the restart's generations: %v", err)
	}
	m.leave()
}

// TestCommitPastTheLocalEndWaitsForIt: the coordinator's replica of a
// partition may trail the leader its members read from, so a commit past
// its end waits for the replica to get there rather than being refused as
// out of range; past the wait, it is refused.
func TestCommitPastTheLocalEndWaitsForIt(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	b := openCfg(t, vfs.NewMem(), &clock, func(c *Config) { c.CommitCatchUp = time.Minute })
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() { committed <- b.Commit(ctx, "g", "t", 0, map[uint32]uint64{0: 1}) }()
	if _, _, err := b.Publish(ctx, "t", pub("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatalf("a commit of the record being published: %v", err)
	}
	// A deadline ends the wait: the offset is out of range.
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	var oor *cursor.OutOfRangeError
	if err := b.Commit(dctx, "g", "t", 0, map[uint32]uint64{0: 5}); !errors.As(err, &oor) || oor.End != 1 {
		t.Fatalf("a commit past the end: %v", err)
	}
}
