package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/record"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

func open(t *testing.T, fs vfs.FS) *Broker {
	t.Helper()
	b, err := Open(Config{Dir: "data", FS: fs, Cluster: ClusterConfig{TickInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type collect struct {
	recs []*rewindv1.Record
	last *rewindv1.SubscribeResponse
}

func (c *collect) Send(m *rewindv1.SubscribeResponse) error {
	for _, r := range m.GetRecords().GetRecords() {
		c.recs = append(c.recs, proto.CloneOf(r))
	}
	c.last = proto.CloneOf(m)
	return nil
}

// replayAll reads a whole topic from the earliest record to the end.
func replayAll(t *testing.T, b *Broker, topic string) []*rewindv1.Record {
	t.Helper()
	var c collect
	err := b.Subscribe(context.Background(), SubscribeParams{
		Topic: topic, Start: cursor.Start{Kind: cursor.Earliest}, Stop: cursor.Stop{Kind: cursor.AtEnd},
	}, &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.last.GetEnd() == nil {
		t.Fatalf("replay did not end with an end event: %v", c.last)
	}
	return c.recs
}

func pub(values ...string) []PublishRecord {
	out := make([]PublishRecord, len(values))
	for i, v := range values {
		out[i] = PublishRecord{Record: record.Record{Value: []byte(v)}}
	}
	return out
}

type ack struct {
	partition uint32
	offset    uint64
}

// TestCrashKeepsEveryAcknowledgedRecordExactlyOnce publishes from several
// goroutines, simulates a power cut at a random moment (Pebble's crashable
// filesystem drops whatever was not synced, keeping a random part of it),
// reopens the broker on what survived and replays everything: every record
// acknowledged before the cut is there exactly once at its acknowledged
// offset, offsets are dense, and nothing unknown or half-written appears.
func TestCrashKeepsEveryAcknowledgedRecordExactlyOnce(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	for round := range 4 {
		fs := vfs.NewCrashableMem()
		b := open(t, fs)
		ctx := context.Background()
		if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 3}); err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			acked   = map[string]ack{}
			crashed *vfs.MemFS
			atCrash map[string]ack
			wg      sync.WaitGroup
		)
		crashAfter := 50 + rng.IntN(400)
		stop := make(chan struct{})
		for w := range 3 {
			wg.Add(1)
			seedW := rng.Uint64()
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seedW, 2))
				for j := 0; ; j++ {
					select {
					case <-stop:
						return
					default:
					}
					n := 1 + r.IntN(20)
					vals := make([]string, n)
					for k := range vals {
						vals[k] = fmt.Sprintf("r%d-w%d-%d-%d", round, w, j, k)
					}
					_, res, err := b.Publish(ctx, "t", pub(vals...))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for k, v := range vals {
						acked[v] = ack{res[k].Partition, res[k].Offset}
					}
					if crashed == nil && len(acked) >= crashAfter {
						atCrash = make(map[string]ack, len(acked))
						for k, v := range acked {
							atCrash[k] = v
						}
						crashed = fs.CrashClone(vfs.CrashCloneCfg{
							UnsyncedDataPercent: r.IntN(101), RNG: rand.New(rand.NewPCG(r.Uint64(), 3)),
						})
						close(stop)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}

		b = open(t, crashed)
		got := replayAll(t, b, "t")
		next := map[uint32]uint64{}
		seen := map[string]bool{}
		for _, r := range got {
			v := string(r.GetValue())
			if r.GetOffset() != next[r.GetPartition()] {
				t.Fatalf("round %d: partition %d offset %d, expected %d (hole or duplicate)", round, r.GetPartition(), r.GetOffset(), next[r.GetPartition()])
			}
			next[r.GetPartition()]++
			if seen[v] {
				t.Fatalf("round %d: %q stored twice", round, v)
			}
			seen[v] = true
			a, ok := acked[v]
			if !ok {
				t.Fatalf("round %d: %q was never published", round, v)
			}
			if a.partition != r.GetPartition() || a.offset != r.GetOffset() {
				t.Fatalf("round %d: %q at %d/%d, acknowledged at %d/%d", round, v, r.GetPartition(), r.GetOffset(), a.partition, a.offset)
			}
		}
		for v := range atCrash {
			if !seen[v] {
				t.Fatalf("round %d: acknowledged record %q lost in the crash", round, v)
			}
		}
		// Offsets continue after the surviving end; none is reused.
		_, res, err := b.Publish(ctx, "t", []PublishRecord{{Record: record.Record{Value: []byte("after")}, Partition: 0, HasPartition: true}})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Offset != next[0] {
			t.Fatalf("round %d: first offset after restart %d, want %d", round, res[0].Offset, next[0])
		}
		t.Logf("round %d: %d acknowledged at the crash, %d survived", round, len(atCrash), len(got))
		b.Close()
	}
}

func TestTopicLifecycle(t *testing.T) {
	fs := vfs.NewMem()
	b := open(t, fs)
	ctx := context.Background()
	t1, err := b.CreateTopic(ctx, TopicSpec{Name: "orders", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "orders", Partitions: 2}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v", err)
	}
	_, res, err := b.Publish(ctx, "orders", pub("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	oldID := msgid.ID{TopicID: t1.ID, Partition: res[0].Partition, Offset: res[0].Offset}
	if err := b.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Publish(ctx, "orders", pub("c")); !errors.Is(err, ErrNoTopic) {
		t.Fatalf("publish to a deleted topic: %v", err)
	}
	if err := b.DeleteTopic(ctx, "orders"); !errors.Is(err, ErrNoTopic) {
		t.Fatalf("second delete: %v", err)
	}
	t2, err := b.CreateTopic(ctx, TopicSpec{Name: "orders", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if t2.ID == t1.ID || t2.Groups[0] <= t1.Groups[1] {
		t.Fatalf("re-created topic reuses ids: %+v after %+v", t2, t1)
	}
	if got := replayAll(t, b, "orders"); len(got) != 0 {
		t.Fatalf("re-created topic holds %d old records", len(got))
	}
	// The old topic's message ID does not resolve against the new topic.
	err = b.Subscribe(ctx, SubscribeParams{Topic: "orders", Start: cursor.Start{Kind: cursor.AtMessageID, ID: oldID}}, &collect{})
	if !errors.Is(err, cursor.ErrInvalid) {
		t.Fatalf("old message ID on the new topic: %v", err)
	}
	// All of it survives a restart.
	b.Close()
	b = open(t, fs)
	defer b.Close()
	ts := b.ListTopics()
	if len(ts) != 1 || ts[0].ID != t2.ID {
		t.Fatalf("topics after restart: %+v", ts)
	}
}

func TestPublishValidationStoresNothing(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "v", Partitions: 2, MaxRecordBytes: 1000}); err != nil {
		t.Fatal(err)
	}
	big := pub("ok", string(make([]byte, 2000)))
	_, _, err := b.Publish(ctx, "v", big)
	var tooLarge *RecordTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Index != 1 || !errors.Is(err, ErrInvalid) {
		t.Fatalf("oversized record: %v", err)
	}
	bad := pub("x")
	bad[0].HasPartition, bad[0].Partition = true, 5
	if _, _, err := b.Publish(ctx, "v", bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown partition: %v", err)
	}
	if _, _, err := b.Publish(ctx, "v", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty publish: %v", err)
	}
	if got := replayAll(t, b, "v"); len(got) != 0 {
		t.Fatalf("rejected publishes stored %d records", len(got))
	}
	for _, spec := range []TopicSpec{
		{Name: "", Partitions: 1}, {Name: "a b", Partitions: 1}, {Name: "..", Partitions: 1},
		{Name: "ok", Partitions: 0}, {Name: "ok", Partitions: MaxPartitions + 1},
		{Name: "ok", Partitions: 1, ReplicationFactor: 3}, {Name: "ok", Partitions: 1, MaxRecordBytes: MaxMaxRecordBytes + 1},
	} {
		if _, err := b.CreateTopic(ctx, spec); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateTopic(%+v): %v, want ErrInvalid", spec, err)
		}
	}
}

func TestKeyedRecordsStayInTheirPartitionInOrder(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "k", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		recs := make([]PublishRecord, 4)
		for k := range recs {
			recs[k] = PublishRecord{Record: record.Record{Key: []byte(fmt.Sprint("key", k)), Value: []byte(fmt.Sprint(i))}}
		}
		if _, _, err := b.Publish(ctx, "k", recs); err != nil {
			t.Fatal(err)
		}
	}
	last := map[string]int{}
	part := map[string]uint32{}
	for _, r := range replayAll(t, b, "k") {
		k := string(r.GetKey())
		var v int
		fmt.Sscan(string(r.GetValue()), &v)
		if p, ok := part[k]; ok && p != r.GetPartition() {
			t.Fatalf("key %s in partitions %d and %d", k, p, r.GetPartition())
		}
		part[k] = r.GetPartition()
		if prev, ok := last[k]; ok && v != prev+1 {
			t.Fatalf("key %s: %d after %d", k, v, prev)
		}
		last[k] = v
		if PartitionForKey([]byte(k), 4) != r.GetPartition() {
			t.Fatalf("key %s not in hash(key) mod 4", k)
		}
	}
}

// TestKeylessRecordsStickToAPartitionPerRun: records without key,
// idempotency key or partition stay together in one partition per request
// (in runs of stickyBytes), and each run takes the next partition in turn.
func TestKeylessRecordsStickToAPartitionPerRun(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	var firsts []uint32
	for r := range 3 {
		_, res, err := b.Publish(ctx, "t", pub(fmt.Sprint(r), "x", "y", "z"))
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range res {
			if x.Partition != res[0].Partition || x.Offset != res[0].Offset+uint64(i) {
				t.Fatalf("request %d: record %d at %d@%d after %d@%d", r, i, x.Partition, x.Offset, res[0].Partition, res[0].Offset)
			}
		}
		firsts = append(firsts, res[0].Partition)
	}
	if firsts[0] == firsts[1] || firsts[1] == firsts[2] || firsts[0] == firsts[2] {
		t.Fatalf("three requests went to partitions %v, want three different", firsts)
	}
	// A request of 1,000 records of 100 bytes (about 100 KiB) spreads run
	// by run: each run but the last holds at least stickyBytes and less
	// than stickyBytes more than one record; keyed records still go by
	// their key. (Runs of 1,024 records kept it all in one partition.)
	vals := make([]string, 1000)
	for i := range vals {
		vals[i] = fmt.Sprintf("%0100d", i)
	}
	recs := pub(vals...)
	recs = append(recs, PublishRecord{Record: record.Record{Key: []byte("k"), Value: []byte("keyed")}})
	_, res, err := b.Publish(ctx, "t", recs)
	if err != nil {
		t.Fatal(err)
	}
	var runs [][2]int // [first, end) of each run
	start := 0
	for i := 1; i <= len(vals); i++ {
		if i == len(vals) || res[i].Partition != res[start].Partition {
			runs = append(runs, [2]int{start, i})
			start = i
		}
	}
	if len(runs) < 3 {
		t.Fatalf("1,000 records of 100 bytes went in %d run(s); want them spread", len(runs))
	}
	for k, run := range runs {
		size := 0
		for i := run[0]; i < run[1]; i++ {
			size += recs[i].EncodedSize()
		}
		last := recs[run[1]-1].EncodedSize()
		if k < len(runs)-1 && (size < stickyBytes || size-last >= stickyBytes) {
			t.Fatalf("run %d (records %d to %d) holds %d bytes; want at least %d, and under it without its last record", k, run[0], run[1]-1, size, stickyBytes)
		}
		if k > 0 && res[run[0]].Partition != (res[runs[k-1][0]].Partition+1)%3 {
			t.Fatalf("run %d in partition %d after partition %d; want the next", k, res[run[0]].Partition, res[runs[k-1][0]].Partition)
		}
		for i := run[0] + 1; i < run[1]; i++ {
			if res[i].Offset != res[i-1].Offset+1 {
				t.Fatalf("run %d: record %d at offset %d after %d", k, i, res[i].Offset, res[i-1].Offset)
			}
		}
	}
	if got, want := res[len(res)-1].Partition, PartitionForKey([]byte("k"), 3); got != want {
		t.Fatalf("keyed record in partition %d, want %d", got, want)
	}
}
