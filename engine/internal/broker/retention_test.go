package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/resume"
	"github.com/rewind-io/rewind/engine/internal/stream"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// openCfg opens a broker with housekeeping left to the test (it calls
// retain and compact itself) and a clock it controls.
func openCfg(t *testing.T, fs vfs.FS, clock *atomic.Int64, mutate func(*Config)) *Broker {
	t.Helper()
	cfg := Config{Dir: "data", FS: fs, Cluster: ClusterConfig{TickInterval: 10 * time.Millisecond}, Storage: StorageConfig{HousekeepingInterval: time.Hour},
		Clock: func() time.Time { return time.Unix(0, clock.Load()) }}
	if mutate != nil {
		mutate(&cfg)
	}
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parts(t *testing.T, b *Broker, topic string) []*partition.Partition {
	t.Helper()
	lt, err := b.topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	return lt.parts
}

func publishTo(t *testing.T, b *Broker, topic string, p uint32, vals ...string) {
	t.Helper()
	recs := pub(vals...)
	for i := range recs {
		recs[i].Partition, recs[i].HasPartition = p, true
	}
	if _, _, err := b.Publish(context.Background(), topic, recs); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionAtTheEdgeIsNeverSilent(t *testing.T) {
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	b := openCfg(t, vfs.NewMem(), &clock, nil)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "r", Partitions: 1, Retention: meta.Retention{MaxRecords: 20}}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		clock.Add(int64(time.Second))
		publishTo(t, b, "r", 0, fmt.Sprint(i, "a"), fmt.Sprint(i, "b"), fmt.Sprint(i, "c"), fmt.Sprint(i, "d"), fmt.Sprint(i, "e"))
	}
	p := parts(t, b, "r")[0]
	if err := b.retain(p); err != nil {
		t.Fatal(err)
	}
	if bd := p.Bounds(); bd.LogStart != 30 || bd.Next != 50 {
		t.Fatalf("after retention: %+v", bd)
	}
	// A replay that starts before the log start fails with the range...
	err := b.Subscribe(ctx, SubscribeParams{Topic: "r", Start: cursor.Start{Kind: cursor.AtOffset, Offset: 10}, Stop: cursor.Stop{Kind: cursor.AtEnd}}, &collect{})
	var oor *cursor.OutOfRangeError
	if !errors.As(err, &oor) || oor.LogStart != 30 || oor.EarliestTime == 0 {
		t.Fatalf("start below the log start: %v", err)
	}
	// ...or, when asked, starts at the earliest and says so.
	var c collect
	var first *rewindv1.StartedEvent
	sink := sinkFunc(func(m *rewindv1.SubscribeResponse) error {
		if s := m.GetStarted(); s != nil && first == nil {
			first = s
		}
		return c.Send(m)
	})
	err = b.Subscribe(ctx, SubscribeParams{Topic: "r", Start: cursor.Start{Kind: cursor.AtOffset, Offset: 10, Clamp: true}, Stop: cursor.Stop{Kind: cursor.AtEnd}}, sink)
	if err != nil || !first.GetPartitions()[0].GetClamped() || first.GetPartitions()[0].GetNextOffset() != 30 || len(c.recs) != 20 {
		t.Fatalf("clamped start: %v, started %v, %d records", err, first, len(c.recs))
	}
	// Retention while a replay reads: the reader is cut off with
	// OutOfRange, never skipped past silently.
	blocked := make(chan struct{})
	release := make(chan struct{})
	var delivered []uint64
	slow := sinkFunc(func(m *rewindv1.SubscribeResponse) error {
		for _, r := range m.GetRecords().GetRecords() {
			delivered = append(delivered, r.GetOffset())
		}
		if len(m.GetRecords().GetRecords()) > 0 && len(delivered) <= 5 {
			close(blocked)
			<-release
		}
		return nil
	})
	done := make(chan error, 1)
	go func() {
		done <- b.Subscribe(ctx, SubscribeParams{Topic: "r", Start: cursor.Start{Kind: cursor.Earliest},
			Options: streamOptions(5)}, slow)
	}()
	<-blocked // the reader holds offsets 30..34 and waits
	for i := range 10 {
		clock.Add(int64(time.Second))
		publishTo(t, b, "r", 0, fmt.Sprint("late", i, "a"), fmt.Sprint("late", i, "b"))
	}
	if err := b.retain(p); err != nil {
		t.Fatal(err)
	}
	close(release)
	err = <-done
	if !errors.As(err, &oor) || oor.Requested != 35 || oor.LogStart != p.Bounds().LogStart {
		t.Fatalf("reader overtaken by retention ended with %v (delivered %v)", err, delivered)
	}
	for i, off := range delivered {
		if off != 30+uint64(i) {
			t.Fatalf("delivered %v: not dense from 30", delivered)
		}
	}
	// Group commits below the log start are reported, and a member resumes
	// at the log start, marked.
	if err := b.Commit(ctx, "g", "r", 0, map[uint32]uint64{0: 31}); err != nil {
		t.Fatal(err)
	}
	infos, err := b.DescribeGroup("g")
	if err != nil || !infos[0].Partitions[0].BelowLogStart {
		t.Fatalf("describe: %+v %v", infos, err)
	}
	m := join(t, b, "g", "r")
	a := m.next(t)
	if pp := a.GetPartitions()[0]; !pp.GetClamped() || pp.GetNextOffset() != p.Bounds().LogStart {
		t.Fatalf("member starts at %v", pp)
	}
	m.leave()
}

// TestRetentionInsideABatchAtTheEdge: 1,000 records published in one
// request to a topic that keeps 100 (issue 18) keep exactly offsets
// 900..999, and every way of naming a removed offset (offset, message ID,
// resume token) gets OutOfRange with the new log start, while a time seek
// to the batch's time starts exactly at the log start.
func TestRetentionInsideABatchAtTheEdge(t *testing.T) {
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	b := openCfg(t, vfs.NewMem(), &clock, nil)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "r", Partitions: 1, Retention: meta.Retention{MaxRecords: 100}}); err != nil {
		t.Fatal(err)
	}
	vals := make([]string, 1000)
	for i := range vals {
		vals[i] = fmt.Sprint(i)
	}
	publishTo(t, b, "r", 0, vals...)
	p := parts(t, b, "r")[0]
	if err := b.retain(p); err != nil {
		t.Fatal(err)
	}
	bd := p.Bounds()
	if bd.LogStart != 900 || bd.Next != 1000 {
		t.Fatalf("after retention: %+v, want [900, 1000)", bd)
	}
	got := replayAll(t, b, "r")
	if len(got) != 100 || got[0].GetOffset() != 900 || string(got[0].GetValue()) != "900" || got[99].GetOffset() != 999 {
		t.Fatalf("replay after retention: %d records, first %v", len(got), got[0])
	}
	for _, start := range []cursor.Start{
		{Kind: cursor.AtOffset, Offset: 899},
		{Kind: cursor.AtMessageID, ID: msgid.ID{TopicID: p.TopicID(), Partition: 0, Offset: 899}},
		{Kind: cursor.FromToken, Token: resume.Token{TopicID: p.TopicID(), Positions: []resume.Position{{Partition: 0, Next: 899}}}},
	} {
		err := b.Subscribe(ctx, SubscribeParams{Topic: "r", Start: start, Stop: cursor.Stop{Kind: cursor.AtEnd}}, &collect{})
		var oor *cursor.OutOfRangeError
		if !errors.As(err, &oor) || oor.Requested != 899 || oor.LogStart != 900 || oor.EarliestTime != bd.FirstTime {
			t.Fatalf("start %+v below the log start: %v", start, err)
		}
	}
	var c collect
	if err := b.Subscribe(ctx, SubscribeParams{Topic: "r", Start: cursor.Start{Kind: cursor.AtTime, Time: bd.FirstTime},
		Stop: cursor.Stop{Kind: cursor.AtEnd}}, &c); err != nil || len(c.recs) != 100 || c.recs[0].GetOffset() != 900 {
		t.Fatalf("time seek to the first kept time: %v, %d records", err, len(c.recs))
	}
	c = collect{}
	id := msgid.ID{TopicID: p.TopicID(), Partition: 0, Offset: 900}
	if err := b.Subscribe(ctx, SubscribeParams{Topic: "r", Start: cursor.Start{Kind: cursor.AtMessageID, ID: id},
		Stop: cursor.Stop{Kind: cursor.AtEnd}}, &c); err != nil || len(c.recs) == 0 || c.recs[0].GetOffset() < 900 {
		t.Fatalf("message ID at the log start: %v, %d records", err, len(c.recs))
	}
}

type sinkFunc func(*rewindv1.SubscribeResponse) error

func (f sinkFunc) Send(m *rewindv1.SubscribeResponse) error { return f(m) }

func TestCompactedTopicEndToEnd(t *testing.T) {
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	fs := vfs.NewMem()
	b := openCfg(t, fs, &clock, nil)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "c", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AlterTopic(ctx, "c", meta.Retention{Cleanup: "compact", DeleteRetentionNanos: int64(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	latest := map[string]string{}
	for round := range 20 {
		clock.Add(int64(time.Second))
		var recs []PublishRecord
		for k := range 5 {
			key := fmt.Sprint("user-", k)
			v := fmt.Sprint("v", round)
			if round == 19 && k == 4 {
				v = "" // a tombstone for user-4
			}
			recs = append(recs, PublishRecord{Record: record.Record{Key: []byte(key), Value: []byte(v)}})
			latest[key] = v
		}
		if _, _, err := b.Publish(ctx, "c", recs); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want map[string]string) {
		t.Helper()
		got := map[string][]string{}
		for _, r := range replayAll(t, b, "c") {
			got[string(r.GetKey())] = append(got[string(r.GetKey())], string(r.GetValue()))
		}
		if len(got) != len(want) {
			t.Fatalf("keys after compaction: %v, want %v", got, want)
		}
		for k, v := range want {
			if len(got[k]) != 1 || got[k][0] != v {
				t.Fatalf("key %s: %v, want only %q", k, got[k], v)
			}
		}
	}
	for _, p := range parts(t, b, "c") {
		if _, err := b.compact(p); err != nil {
			t.Fatal(err)
		}
	}
	check(latest) // the tombstone is younger than its delete retention
	clock.Add(int64(2 * time.Minute))
	for _, p := range parts(t, b, "c") {
		if _, err := b.compact(p); err != nil {
			t.Fatal(err)
		}
	}
	delete(latest, "user-4")
	check(latest)
	b.Close()
	b = openCfg(t, fs, &clock, nil)
	defer b.Close()
	check(latest)
	tp, _, err := b.DescribeTopic("c")
	if err != nil || tp.Retention.Cleanup != "compact" {
		t.Fatalf("the altered policy after restart: %+v %v", tp, err)
	}
}

func TestDiskFullRefusesPublishesAndKeepsReplays(t *testing.T) {
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	var free atomic.Uint64
	free.Store(1 << 40)
	b := openCfg(t, vfs.NewMem(), &clock, func(c *Config) {
		c.FreeBytes = func() (uint64, error) { return free.Load(), nil }
	})
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "d", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	publishTo(t, b, "d", 0, "a", "b")
	free.Store(1 << 20)
	b.checkDisk()
	if _, _, err := b.Publish(ctx, "d", pub("c")); !errors.Is(err, partition.ErrDiskFull) {
		t.Fatalf("publish on a full disk: %v", err)
	}
	if got := replayAll(t, b, "d"); len(got) != 2 {
		t.Fatalf("replay on a full disk: %d records", len(got))
	}
	free.Store(1 << 40)
	b.checkDisk()
	publishTo(t, b, "d", 0, "c")
}

// TestFailedFsyncStopsAcknowledgingAndLosesNothing makes every WAL fsync
// (or write) fail after some publishes: the node stops acknowledging (no retry of the
// failed fsync), and after a power cut everything it acknowledged is there.
func TestFailedFsyncStopsAcknowledgingAndLosesNothing(t *testing.T) {
	t.Run("fsync", func(t *testing.T) {
		testFailedWAL(t, func(k errorfs.OpKind) bool { return k == errorfs.OpFileSync || k == errorfs.OpFileSyncData })
	})
	t.Run("write", func(t *testing.T) {
		testFailedWAL(t, func(k errorfs.OpKind) bool { return k == errorfs.OpFileWrite || k == errorfs.OpFileWriteAt })
	})
}

func testFailedWAL(t *testing.T, inject func(errorfs.OpKind) bool) {
	mem := vfs.NewCrashableMem()
	var failing atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && inject(op.Kind) && strings.HasSuffix(op.Path, ".log") {
			return errors.New("injected: WAL I/O failed")
		}
		return nil
	}))
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	b := openCfg(t, fs, &clock, nil)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "f", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	var acked []string
	for i := range 20 {
		v := fmt.Sprint("ok-", i)
		if _, _, err := b.Publish(ctx, "f", pub(v)); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, v)
	}
	failing.Store(true)
	_, _, err := b.Publish(ctx, "f", pub("doomed"))
	if err == nil {
		t.Fatal("a publish was acknowledged although its fsync failed")
	}
	// Nothing is acknowledged any more, even once the disk recovers.
	failing.Store(false)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, _, err := b.Publish(pctx, "f", pub("after")); err == nil {
		t.Fatal("a publish was acknowledged after a failed fsync")
	}
	if b.host.Err() == nil {
		t.Fatal("the raft host did not stop on the failed fsync")
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	b.Close()
	b = openCfg(t, crashed, &clock, nil)
	defer b.Close()
	got := map[string]bool{}
	for _, r := range replayAll(t, b, "f") {
		got[string(r.GetValue())] = true
	}
	for _, v := range acked {
		if !got[v] {
			t.Fatalf("acknowledged record %q lost", v)
		}
	}
}

// TestCrashDuringRetentionAndCompaction publishes keyed records while
// retention and compaction run, cuts the power at a random moment and
// checks what survived: the log start never moved back past an applied
// truncation, offsets only increase, every acknowledged record that is the
// latest of its key and above the log start is there, and nothing unknown
// appears.
func TestCrashDuringRetentionAndCompaction(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 9))
	for round := range 3 {
		mem := vfs.NewCrashableMem()
		var clock atomic.Int64
		clock.Store(int64(time.Hour))
		b := openCfg(t, mem, &clock, nil)
		ctx := context.Background()
		if _, err := b.CreateTopic(ctx, TopicSpec{Name: "x", Partitions: 1,
			Retention: meta.Retention{Cleanup: "compact,delete", MaxRecords: 300, DeleteRetentionNanos: int64(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		p := parts(t, b, "x")[0]
		type ack struct {
			key string
			off uint64
		}
		var (
			mu         sync.Mutex
			acked      = map[string]ack{} // value -> where
			truncated  uint64
			crashed    *vfs.MemFS
			atCrash    map[string]ack
			truncAtCut uint64
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // housekeeping, as the broker's loop would
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				x, ok, err := p.PlanRetention(b.Now())
				if err == nil && ok && p.Truncate(ctx, x) == nil {
					mu.Lock()
					truncated = max(truncated, x)
					mu.Unlock()
				}
				plan, _ := p.PlanCompaction(b.Now(), 3)
				if len(plan.Cmds) > 0 {
					_ = p.Compact(ctx, plan.Cmds...)
				}
			}
		}()
		cutAfter := 200 + rng.IntN(800)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// 1 to 9 records a request: retention's cuts fall inside
				// batches as often as between them.
				var recs []PublishRecord
				for k := range 1 + rng.IntN(9) {
					recs = append(recs, PublishRecord{Record: record.Record{
						Key: []byte(fmt.Sprint("k", rng.IntN(40))), Value: []byte(fmt.Sprint("r", round, "-", i, "-", k))}})
				}
				_, res, err := b.Publish(ctx, "x", recs)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for k, r := range recs {
					acked[string(r.Value)] = ack{string(r.Key), res[k].Offset}
				}
				if crashed == nil && len(acked) >= cutAfter {
					atCrash = make(map[string]ack, len(acked))
					for k, v := range acked {
						atCrash[k] = v
					}
					truncAtCut = truncated
					crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(rng.Uint64(), 1))})
					close(stop)
				}
				mu.Unlock()
			}
		}()
		wg.Wait()
		b.Close()

		b = openCfg(t, crashed, &clock, nil)
		bd := parts(t, b, "x")[0].Bounds()
		if bd.LogStart < truncAtCut {
			t.Fatalf("round %d: log start %d moved back below the applied truncation at %d", round, bd.LogStart, truncAtCut)
		}
		got := replayAll(t, b, "x")
		present := map[string]uint64{}
		var prev uint64
		for i, r := range got {
			if i > 0 && r.GetOffset() <= prev {
				t.Fatalf("round %d: offset %d after %d", round, r.GetOffset(), prev)
			}
			prev = r.GetOffset()
			if r.GetOffset() < bd.LogStart {
				t.Fatalf("round %d: offset %d below the log start %d", round, r.GetOffset(), bd.LogStart)
			}
			a, ok := acked[string(r.GetValue())]
			if !ok {
				t.Fatalf("round %d: %q was never published", round, r.GetValue())
			}
			if a.off != r.GetOffset() || a.key != string(r.GetKey()) {
				t.Fatalf("round %d: %q at %d, acknowledged at %d", round, r.GetValue(), r.GetOffset(), a.off)
			}
			present[string(r.GetValue())] = r.GetOffset()
		}
		// The latest acknowledged record of each key (at the cut) must be
		// there unless retention removed it or a later record of the same
		// key (acknowledged or not) superseded it.
		latest := map[string]ack{}
		for v, a := range atCrash {
			if cur, ok := latest[a.key]; !ok || a.off > cur.off {
				latest[a.key] = ack{key: v, off: a.off} // key holds the value here
			}
		}
		newest := map[string]uint64{}
		for _, r := range got {
			newest[string(r.GetKey())] = max(newest[string(r.GetKey())], r.GetOffset())
		}
		for key, l := range latest {
			if l.off < bd.LogStart || newest[key] > l.off {
				continue
			}
			if _, ok := present[l.key]; !ok {
				t.Fatalf("round %d: the latest acknowledged record of %s (offset %d) is gone", round, key, l.off)
			}
		}
		t.Logf("round %d: %d acknowledged at the cut, log start %d, %d records kept", round, len(atCrash), bd.LogStart, len(got))
		// One pass after the restart holds the limit exactly: every record
		// of the newest 300 offsets stays, none older.
		if err := b.retain(parts(t, b, "x")[0]); err != nil {
			t.Fatal(err)
		}
		var want, kept []uint64
		for _, r := range got {
			if r.GetOffset()+300 >= bd.Next {
				want = append(want, r.GetOffset())
			}
		}
		for _, r := range replayAll(t, b, "x") {
			kept = append(kept, r.GetOffset())
		}
		if diff := cmp.Diff(want, kept); diff != "" {
			t.Fatalf("round %d: after a retention pass with end %d (-want +got):\n%s", round, bd.Next, diff)
		}
		b.Close()
	}
}

func streamOptions(maxPerEvent int) stream.Options {
	return stream.Options{MaxRecordsPerEvent: maxPerEvent}
}
