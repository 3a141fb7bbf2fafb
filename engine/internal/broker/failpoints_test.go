//go:build failpoints

package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/groups"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/internal/failpoint"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// setFailpoint sets a failpoint for the rest of the test.
func setFailpoint(t *testing.T, name, value string) {
	t.Helper()
	if err := failpoint.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Clear(name) })
}

func offsetsOf(recs []*rewindv1.Record) []uint64 {
	var out []uint64
	for _, r := range recs {
		out = append(out, r.GetOffset())
	}
	return out
}

// TestFailpointPowerLossKeepsAcknowledgedRecords and its injected bug: in
// power-loss mode a crash drops whatever was not synced. A record
// acknowledged by a correct node survives it; with bug-ack-before-fsync
// (the raft log committed without fsync) the acknowledged record is gone.
func TestFailpointPowerLossKeepsAcknowledgedRecords(t *testing.T) {
	for _, bug := range []bool{false, true} {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			setFailpoint(t, failpoint.PowerLoss, "")
			mem := vfs.NewCrashableMem()
			var clock atomic.Int64
			b := openCfg(t, failpoint.NewFaultFS(mem), &clock, nil)
			ctx := context.Background()
			if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			if bug {
				setFailpoint(t, failpoint.BugAckBeforeFsync, "")
			}
			if _, _, err := b.Publish(ctx, "t", pub("acknowledged")); err != nil {
				t.Fatal(err)
			}
			// What a power cut leaves: the disk as FaultFS wrote it (all of
			// it: the page cache is the process's memory here).
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 2))})
			failpoint.Clear(failpoint.BugAckBeforeFsync)
			failpoint.Clear(failpoint.PowerLoss)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openCfg(t, crashed, &clock, nil)
			defer b.Close()
			got := replayAll(t, b, "t")
			if lost := len(got) == 0; lost != bug {
				t.Fatalf("after the power cut the topic holds %d records, want the acknowledged one lost: %v", len(got), bug)
			}
		})
	}
}

// TestFailpointSkipDedupeStoresAResendAgain: a resend with the same
// idempotency key is answered with the original's offset; with
// bug-skip-dedupe it is stored again at a new offset.
func TestFailpointSkipDedupeStoresAResendAgain(t *testing.T) {
	for _, bug := range []bool{false, true} {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			b := open(t, vfs.NewMem())
			defer b.Close()
			ctx := context.Background()
			if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1, DedupeWindow: -1}); err != nil {
				t.Fatal(err)
			}
			if bug {
				setFailpoint(t, failpoint.BugSkipDedupe, "")
			}
			rec := []PublishRecord{{Record: record.Record{Value: []byte("v"), IdempotencyKey: []byte("k")}}}
			_, first, err := b.Publish(ctx, "t", rec)
			if err != nil {
				t.Fatal(err)
			}
			_, resend, err := b.Publish(ctx, "t", rec)
			if err != nil {
				t.Fatal(err)
			}
			stored := len(replayAll(t, b, "t"))
			if bug {
				if resend[0].Duplicate || resend[0].Offset == first[0].Offset || stored != 2 {
					t.Fatalf("with the bug the resend got %+v (first %+v), %d stored: want a new offset", resend[0], first[0], stored)
				}
				return
			}
			if !resend[0].Duplicate || resend[0].Offset != first[0].Offset || stored != 1 {
				t.Fatalf("the resend got %+v (first %+v), %d stored: want the original's offset", resend[0], first[0], stored)
			}
		})
	}
}

// TestFailpointSkipConditionsLosesAnUpdate: two writers that loaded
// version 0 both append expecting it; the second is refused, and with
// bug-skip-conditions both are stored (the lost update the lost-update
// scenario's checker catches).
func TestFailpointSkipConditionsLosesAnUpdate(t *testing.T) {
	for _, bug := range []bool{false, true} {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			b := open(t, vfs.NewMem())
			defer b.Close()
			ctx := context.Background()
			if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			if bug {
				setFailpoint(t, failpoint.BugSkipConditions, "")
			}
			rec := func(v string) []PublishRecord {
				return []PublishRecord{{Record: record.Record{Key: []byte("acct"), Value: []byte(v)}}}
			}
			if _, _, err := b.Publish(ctx, "t", rec("open")); err != nil {
				t.Fatal(err)
			}
			loaded := &partition.Conditions{Keys: []partition.KeyCondition{{Key: []byte("acct"), Expect: partition.ExpectVersion, Version: 0}}}
			if _, _, err := b.PublishIf(ctx, "t", rec("writer 1"), loaded); err != nil {
				t.Fatal(err)
			}
			_, res, err := b.PublishIf(ctx, "t", rec("writer 2"), loaded)
			var ce *ConditionError
			if bug {
				if err != nil || res[0].KeyVersion != 2 {
					t.Fatalf("with the bug the second writer got %+v, %v: want it stored", res, err)
				}
				return
			}
			if !errors.As(err, &ce) || ce.Actual != 1 {
				t.Fatalf("the second writer: %v, want a refusal naming version 1", err)
			}
		})
	}
}

// TestFailpointAcceptFencedCommit: a commit from a generation older than
// a partition's fence is refused; with bug-accept-fenced-commit it lands.
func TestFailpointAcceptFencedCommit(t *testing.T) {
	for _, bug := range []bool{false, true} {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			b := open(t, vfs.NewMem())
			defer b.Close()
			ctx := context.Background()
			if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 2}); err != nil {
				t.Fatal(err)
			}
			m1 := join(t, b, "g", "t")
			a1 := m1.next(t)
			m2 := join(t, b, "g", "t")
			a2 := m2.next(t)
			for a := m1.next(t); len(a.GetRevoked()) > 0; a = m1.next(t) {
			}
			defer m1.leave()
			defer m2.leave()
			if bug {
				setFailpoint(t, failpoint.BugAcceptFencedCommit, "")
			}
			moved := partsOf(a2)[0]
			err := b.Commit(ctx, "g", "t", a1.GetGeneration(), map[uint32]uint64{moved: 0})
			if bug != (err == nil) {
				t.Fatalf("commit from the fenced generation %d (now %d): %v", a1.GetGeneration(), a2.GetGeneration(), err)
			}
			if !bug && !errors.Is(err, partition.ErrFenced) {
				t.Fatalf("commit from a fenced generation: %v, want ErrFenced", err)
			}
		})
	}
}

// TestFailpointStreamBugs: a replay delivers every record once, in offset
// order; bug-deliver-twice repeats one record, bug-swap-records delivers
// two adjacent records in swapped order.
func TestFailpointStreamBugs(t *testing.T) {
	for _, bug := range []string{"", failpoint.BugDeliverTwice, failpoint.BugSwapRecords} {
		t.Run("bug="+bug, func(t *testing.T) {
			b := open(t, vfs.NewMem())
			defer b.Close()
			ctx := context.Background()
			if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := b.Publish(ctx, "t", pub("a", "b", "c", "d", "e")); err != nil {
				t.Fatal(err)
			}
			if bug != "" {
				setFailpoint(t, bug, "")
			}
			got := offsetsOf(replayAll(t, b, "t"))
			var repeats, inversions int
			seen := map[uint64]bool{}
			for i, o := range got {
				if seen[o] {
					repeats++
				}
				seen[o] = true
				if i > 0 && o < got[i-1] {
					inversions++
				}
			}
			if len(seen) != 5 {
				t.Fatalf("offsets %v: want all of 0-4 delivered", got)
			}
			want := map[string][2]int{"": {0, 0}, failpoint.BugDeliverTwice: {1, 0}, failpoint.BugSwapRecords: {0, 1}}[bug]
			if repeats != want[0] || (bug != failpoint.BugDeliverTwice && inversions != want[1]) {
				t.Fatalf("offsets %v: %d repeated, %d swapped, want %v", got, repeats, inversions, want)
			}
		})
	}
}

// TestFailpointClockOffsetKeepsAppendTimesAndSeeks: the clock jumps back
// 5 minutes, then forward: append times never decrease within the
// partition, and a time seek still returns exactly the first record at or
// after the time asked.
func TestFailpointClockOffsetKeepsAppendTimesAndSeeks(t *testing.T) {
	var clock atomic.Int64
	base := time.Unix(1_700_000_000, 0)
	clock.Store(base.UnixNano())
	b := openCfg(t, vfs.NewMem(), &clock, nil)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	var times []int64
	publish := func(v string) {
		t.Helper()
		_, res, err := b.Publish(ctx, "t", pub(v))
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, res[0].AppendTime)
	}
	publish("at-base")
	setFailpoint(t, failpoint.ClockOffset, "-5m")
	clock.Add(int64(time.Second))
	publish("clock-back") // base+1s-5m: before the first record
	failpoint.Clear(failpoint.ClockOffset)
	clock.Add(int64(time.Second))
	publish("clock-fixed") // base+2s
	setFailpoint(t, failpoint.ClockOffset, "+5m")
	publish("clock-ahead") // base+2s+5m
	want := []int64{base.UnixNano(), base.UnixNano(), base.Add(2 * time.Second).UnixNano(), base.Add(2*time.Second + 5*time.Minute).UnixNano()}
	for i := range want {
		if times[i] != want[i] {
			t.Fatalf("append times %v, want %v (never decreasing, the clock's otherwise)", times, want)
		}
	}
	seek := func(at int64) []string {
		var c collect
		err := b.Subscribe(ctx, SubscribeParams{
			Topic: "t", Start: cursor.Start{Kind: cursor.AtTime, Time: at}, Stop: cursor.Stop{Kind: cursor.AtEnd},
		}, &c)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range c.recs {
			out = append(out, string(r.GetValue()))
		}
		return out
	}
	for _, tc := range []struct {
		at   int64
		want string
	}{
		{base.Add(-5 * time.Minute).UnixNano(), "at-base clock-back clock-fixed clock-ahead"},
		{base.UnixNano(), "at-base clock-back clock-fixed clock-ahead"},
		{base.UnixNano() + 1, "clock-fixed clock-ahead"},
		{base.Add(2*time.Second + time.Minute).UnixNano(), "clock-ahead"},
	} {
		if got := fmt.Sprint(seek(tc.at)); got != "["+tc.want+"]" {
			t.Errorf("seek to %v: %v, want [%s]", time.Unix(0, tc.at).UTC(), got, tc.want)
		}
	}
}

// TestFailpointENOSPCRefusesPublishes: with enospc the disk reports no
// free space, so the free-space check refuses publishes (reads go on);
// cleared, publishes are accepted again.
func TestFailpointENOSPCRefusesPublishes(t *testing.T) {
	mem := vfs.NewMem()
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 40, TotalBytes: 2 << 40, UsedBytes: 1 << 40})
	var clock atomic.Int64
	b := openCfg(t, mem, &clock, nil)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	publishTo(t, b, "t", 0, "before")
	setFailpoint(t, failpoint.ENOSPC, "")
	b.checkDisk() // what housekeeping does each interval
	if _, _, err := b.Publish(ctx, "t", pub("full")); !errors.Is(err, partition.ErrDiskFull) {
		t.Fatalf("publish on a full disk: %v, want ErrDiskFull", err)
	}
	if got := len(replayAll(t, b, "t")); got != 1 {
		t.Fatalf("replay on a full disk: %d records, want 1", got)
	}
	failpoint.Clear(failpoint.ENOSPC)
	b.checkDisk()
	publishTo(t, b, "t", 0, "after")
}

// TestFailpointENOSPCWriteWaitsForSpace: a write that meets a full disk
// before the free-space check saw it (enospc set between two checks)
// waits for space instead of failing the store, which stopped the node
// (issue 27). Reads go on meanwhile; the node refuses new publishes; when
// space is back the write goes on and is acknowledged, and publishes are
// accepted again, with no restart.
func TestFailpointENOSPCWriteWaitsForSpace(t *testing.T) {
	mem := vfs.NewMem()
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 40, TotalBytes: 2 << 40, UsedBytes: 1 << 40})
	var clock atomic.Int64
	b := openCfg(t, failpoint.NewFaultFS(mem), &clock, nil)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	publishTo(t, b, "t", 0, "before")
	setFailpoint(t, failpoint.ENOSPC, "")
	waiting := make(chan error, 1)
	go func() {
		_, _, err := b.Publish(ctx, "t", pub("during"))
		waiting <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for !b.diskOut.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the write that met ENOSPC did not report the disk full")
		}
		time.Sleep(time.Millisecond) // poll: the publish reaches the WAL
	}
	if err := b.Err(); err != nil {
		t.Fatalf("the store failed on a full disk: %v", err)
	}
	if got := len(replayAll(t, b, "t")); got != 1 {
		t.Fatalf("replay while a write waits for space: %d records, want 1", got)
	}
	if _, _, err := b.Publish(ctx, "t", pub("refused")); !errors.Is(err, partition.ErrDiskFull) {
		t.Fatalf("publish while the disk is full: %v, want ErrDiskFull", err)
	}
	failpoint.Clear(failpoint.ENOSPC)
	if err := <-waiting; err != nil {
		t.Fatalf("the publish that waited for space: %v", err)
	}
	b.checkDisk() // what housekeeping does each interval
	publishTo(t, b, "t", 0, "after")
	if got := len(replayAll(t, b, "t")); got != 3 || b.Err() != nil {
		t.Fatalf("after space came back: %d records (want 3), store error %v", got, b.Err())
	}
}

// TestFailpointResetFailingMidwayMovesMembersOn: a live reset whose command
// fails on its second partition (as when that partition's leader is lost)
// has reset the first. Its members learn the reset's generation and seek
// on the first partition, so their commits are not refused as fenced; the
// failed partitions are left as they were, and the error says which
// partitions were reset.
func TestFailpointResetFailingMidwayMovesMembersOn(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		recs := make([]PublishRecord, 3)
		for p := range recs {
			recs[p] = PublishRecord{Record: pub("x")[0].Record, Partition: uint32(p), HasPartition: true}
		}
		if _, _, err := b.Publish(ctx, "t", recs); err != nil {
			t.Fatal(err)
		}
	}
	m := join(t, b, "g", "t")
	defer m.leave()
	a1 := m.next(t)
	if err := b.Commit(ctx, "g", "t", a1.GetGeneration(), map[uint32]uint64{0: 8, 1: 8, 2: 8}); err != nil {
		t.Fatal(err)
	}
	setFailpoint(t, failpoint.ResetFail, "1")
	_, err := b.ResetGroup(ctx, "g", "t", groups.Target{Kind: groups.ToOffset, Offset: 2}, nil, false, false)
	if err == nil || !strings.Contains(err.Error(), "reset partition 1 failed") || !strings.Contains(err.Error(), "partitions [0] before it are reset") {
		t.Fatalf("reset failing on partition 1: %v", err)
	}
	failpoint.Clear(failpoint.ResetFail)
	a2 := m.next(t)
	if a2.GetGeneration() <= a1.GetGeneration() {
		t.Fatalf("the member was told generation %d after %d", a2.GetGeneration(), a1.GetGeneration())
	}
	// The member seeks on partition 0 only.
	deadline := time.Now().Add(30 * time.Second)
	var seeks []string
	for {
		seeks = seeks[:0]
		m.sink.mu.Lock()
		for _, ev := range m.sink.events {
			if rs := ev.GetReplayStarted(); rs != nil {
				seeks = append(seeks, fmt.Sprintf("%d@%d gen %d", rs.GetPartition(), rs.GetFromOffset(), rs.GetGeneration()))
			}
		}
		m.sink.mu.Unlock()
		if len(seeks) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if want := fmt.Sprintf("0@2 gen %d", a2.GetGeneration()); len(seeks) != 1 || seeks[0] != want {
		t.Fatalf("seeks %v, want [%s]", seeks, want)
	}
	for p, want := range map[uint32]uint64{0: 2, 1: 8, 2: 8} {
		if off, ok, err := b.CommittedOffset("g", "t", p); err != nil || !ok || off != want {
			t.Errorf("partition %d committed %d (%v, %v), want %d", p, off, ok, err, want)
		}
	}
	// The old generation is fenced on the reset partition; the new one
	// commits everywhere.
	if err := b.Commit(ctx, "g", "t", a1.GetGeneration(), map[uint32]uint64{0: 9}); !errors.Is(err, partition.ErrFenced) {
		t.Fatalf("a commit from before the reset: %v", err)
	}
	if err := b.Commit(ctx, "g", "t", a2.GetGeneration(), map[uint32]uint64{0: 3, 1: 9, 2: 9}); err != nil {
		t.Fatalf("a commit at the reset's generation: %v", err)
	}
}

// TestFailpointResetFailingFirstTellsNoOne: a reset that fails on its
// first partition stored its generation in no fence, so its members are
// not told it (a coordinator cut off from the others fails that way, and
// the next coordinator, deriving generations from the fences, could issue
// the same one to other members). Commits at the old generation still
// land; the next reset's generation is the one after.
func TestFailpointResetFailingFirstTellsNoOne(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		recs := []PublishRecord{{Record: pub("x")[0].Record, Partition: 0, HasPartition: true}, {Record: pub("y")[0].Record, Partition: 1, HasPartition: true}}
		if _, _, err := b.Publish(ctx, "t", recs); err != nil {
			t.Fatal(err)
		}
	}
	m := join(t, b, "g", "t")
	defer m.leave()
	a1 := m.next(t)
	setFailpoint(t, failpoint.ResetFail, "0")
	if _, err := b.ResetGroup(ctx, "g", "t", groups.Target{Kind: groups.ToOffset, Offset: 2}, nil, false, false); err == nil || !strings.Contains(err.Error(), "partitions [] before it are reset") {
		t.Fatalf("reset failing on partition 0: %v", err)
	}
	failpoint.Clear(failpoint.ResetFail)
	if err := b.Commit(ctx, "g", "t", a1.GetGeneration(), map[uint32]uint64{0: 4, 1: 4}); err != nil {
		t.Fatalf("a commit at the generation before the failed reset: %v", err)
	}
	plan, err := b.ResetGroup(ctx, "g", "t", groups.Target{Kind: groups.ToOffset, Offset: 2}, nil, false, false)
	if err != nil || plan.Generation != a1.GetGeneration()+2 {
		t.Fatalf("the next reset: generation %d (%v), want %d", plan.Generation, err, a1.GetGeneration()+2)
	}
	if a := m.next(t); a.GetGeneration() != plan.Generation {
		t.Fatalf("the member was told generation %d, want the reset's %d", a.GetGeneration(), plan.Generation)
	}
}
