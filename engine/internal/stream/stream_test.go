package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/resume"
	"github.com/rewind-io/rewind/engine/internal/sched"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/raftlog"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

const topicID = 7

type env struct {
	t     testing.TB
	parts []*partition.Partition
	logs  []cursor.Log
	clock atomic.Int64
	cache *partition.Cache
}

// newEnv runs n partitions on a real raft host over an in-memory store.
func newEnv(t testing.TB, n int, cacheBytes int64) *env {
	t.Helper()
	e := &env{t: t, cache: partition.NewCache(cacheBytes)}
	e.clock.Store(time.Now().UnixNano())
	db, err := store.Open(store.Config{Dir: "d", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	host, err := raftlog.Open(raftlog.Config{NodeID: 1, DB: db})
	if err != nil {
		t.Fatal(err)
	}
	host.Start()
	t.Cleanup(func() { host.Close(); db.Close() })
	for i := range n {
		p, err := partition.Open(partition.Config{
			Group: uint64(i + 2), TopicID: topicID, Index: uint32(i), DB: db, Host: host, Cache: e.cache,
			Now: e.clock.Load, MaxBatchBytes: 2000, KeyIndex: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := host.AddGroup(raftlog.GroupConfig{ID: uint64(i + 2), Voters: []uint64{1}, SM: p}); err != nil {
			t.Fatal(err)
		}
		e.parts = append(e.parts, p)
		e.logs = append(e.logs, p)
	}
	return e
}

// sources returns the partitions as stream sources.
func (e *env) sources() []Source {
	out := make([]Source, len(e.parts))
	for i, p := range e.parts {
		out[i] = Local(p)
	}
	return out
}

func (e *env) append(p int, prefix string, n int) {
	e.t.Helper()
	rs := make([]record.Record, n)
	for i := range rs {
		rs[i] = record.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i)), IdempotencyKey: []byte(fmt.Sprintf("idem-%s-%d", prefix, i))}
	}
	if _, err := e.parts[p].Append(context.Background(), rs); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) resolve(start cursor.Start, stop cursor.Stop) []cursor.Cursor {
	e.t.Helper()
	sel := make([]uint32, len(e.parts))
	for i := range sel {
		sel[i] = uint32(i)
	}
	cs, err := cursor.Resolve(topicID, e.logs, sel, start, stop, e.clock.Load())
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// sink collects events; it clones them because the stream reuses messages.
type sink struct {
	mu     sync.Mutex
	events []*rewindv1.SubscribeResponse
	notify chan struct{}
	// stopAfter cancels the stream once this many records arrived.
	stopAfter int
	records   int
	cancel    context.CancelFunc
}

func newSink() *sink { return &sink{notify: make(chan struct{}, 1)} }

func (s *sink) Send(m *rewindv1.SubscribeResponse) error {
	s.mu.Lock()
	s.events = append(s.events, proto.CloneOf(m))
	s.records += len(m.GetRecords().GetRecords())
	if s.stopAfter > 0 && s.records >= s.stopAfter && s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return nil
}

func (s *sink) snapshot() []*rewindv1.SubscribeResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*rewindv1.SubscribeResponse(nil), s.events...)
}

// waitRecords blocks until n records arrived or the stream ended.
func (s *sink) waitRecords(t *testing.T, n int, done <-chan error) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		got := s.records
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-s.notify:
		case err := <-done:
			t.Fatalf("stream ended after %d of %d records: %v", got, n, err)
		case <-deadline:
			t.Fatalf("only %d of %d records arrived", got, n)
		}
	}
}

type delivered struct {
	part  uint32
	off   uint64
	value string
}

func records(events []*rewindv1.SubscribeResponse) []delivered {
	var out []delivered
	for _, ev := range events {
		for _, r := range ev.GetRecords().GetRecords() {
			out = append(out, delivered{r.GetPartition(), r.GetOffset(), string(r.GetValue())})
		}
	}
	return out
}

// checkDense fails unless each partition's records run densely from first
// to first+count with no duplicate and no gap.
func checkDense(t *testing.T, got []delivered, first map[uint32]uint64, count map[uint32]int) {
	t.Helper()
	next := map[uint32]uint64{}
	for p, f := range first {
		next[p] = f
	}
	seen := map[uint32]int{}
	for _, d := range got {
		if d.off != next[d.part] {
			t.Fatalf("partition %d: offset %d delivered, expected %d", d.part, d.off, next[d.part])
		}
		next[d.part]++
		seen[d.part]++
	}
	for p, n := range count {
		if seen[p] != n {
			t.Fatalf("partition %d: %d records delivered, want %d", p, seen[p], n)
		}
	}
}

// TestHandOffFromHistoryToLive starts a stream in the middle of history while
// publishers keep appending: it must read the history, emit caught_up once
// per partition, and continue live with no gap and no duplicate.
func TestHandOffFromHistoryToLive(t *testing.T) {
	e := newEnv(t, 3, 4<<10) // a tiny cache: history comes from Pebble
	for p := range 3 {
		for j := range 20 {
			e.append(p, fmt.Sprintf("h%d-%d", p, j), 7)
		}
	}
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newSink()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, topicID, e.sources(), cs, Options{MaxRecordsPerEvent: 50}, s) }()
	var wg sync.WaitGroup
	for p := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 30 {
				e.append(p, fmt.Sprintf("l%d-%d", p, j), 3)
			}
		}()
	}
	wg.Wait()
	total := 3 * (20*7 + 30*3)
	s.waitRecords(t, total, done)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("stream ended with %v", err)
	}
	evs := s.snapshot()
	if evs[0].GetStarted() == nil {
		t.Fatalf("first event %v, want started", evs[0])
	}
	got := records(evs)
	checkDense(t, got, map[uint32]uint64{0: 0, 1: 0, 2: 0}, map[uint32]int{0: 230, 1: 230, 2: 230})
	caught := map[uint32]int{}
	lastLagging := -1
	for _, ev := range evs {
		if cu := ev.GetCaughtUp(); cu != nil {
			caught[cu.GetPartition()]++
			lastLagging = int(cu.GetLaggingPartitions())
		}
	}
	for p := range uint32(3) {
		if caught[p] != 1 {
			t.Fatalf("partition %d: %d caught_up events, want 1", p, caught[p])
		}
	}
	if lastLagging != 0 {
		t.Fatalf("last caught_up says %d partitions lagging", lastLagging)
	}
}

func TestStopAtEndSendsEndWithPositions(t *testing.T) {
	e := newEnv(t, 2, 64<<20)
	e.append(0, "a", 5)
	e.append(1, "b", 3)
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd})
	e.append(0, "after", 2) // after resolution: not part of the replay
	s := newSink()
	if err := Run(context.Background(), topicID, e.sources(), cs, Options{}, s); err != nil {
		t.Fatal(err)
	}
	evs := s.snapshot()
	end := evs[len(evs)-1].GetEnd()
	if end == nil {
		t.Fatalf("last event %v, want end", evs[len(evs)-1])
	}
	checkDense(t, records(evs), map[uint32]uint64{0: 0, 1: 0}, map[uint32]int{0: 5, 1: 3})
	if end.GetPartitions()[0].GetNextOffset() != 5 || end.GetPartitions()[1].GetNextOffset() != 3 {
		t.Fatalf("end positions %v", end.GetPartitions())
	}
	for _, ev := range evs {
		if ev.GetCaughtUp() != nil {
			t.Fatal("a bounded replay emitted caught_up")
		}
	}
}

// TestResumeTokenContinuesExactly cuts a stream after some records, resumes
// from the token of the last records event it saw, and checks that the two
// streams together deliver every record exactly once.
func TestResumeTokenContinuesExactly(t *testing.T) {
	e := newEnv(t, 3, 64<<20)
	for p := range 3 {
		for j := range 10 {
			e.append(p, fmt.Sprintf("p%d-%d", p, j), 10)
		}
	}
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd})
	ctx, cancel := context.WithCancel(context.Background())
	s := newSink()
	s.stopAfter, s.cancel = 120, cancel
	err := Run(ctx, topicID, e.sources(), cs, Options{MaxRecordsPerEvent: 16}, s)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first stream: %v", err)
	}
	first := s.snapshot()
	var tok string
	var cut int
	for i, ev := range first {
		if r := ev.GetRecords(); r != nil {
			tok, cut = r.GetResumeToken(), i
		}
	}
	parsed, err := resume.Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	cs2 := e.resolve(cursor.Start{Kind: cursor.FromToken, Token: parsed}, cursor.Stop{Kind: cursor.AtEnd})
	s2 := newSink()
	if err := Run(context.Background(), topicID, e.sources(), cs2, Options{}, s2); err != nil {
		t.Fatal(err)
	}
	all := append(records(first[:cut+1]), records(s2.snapshot())...)
	checkDense(t, sortByPartition(all), map[uint32]uint64{0: 0, 1: 0, 2: 0}, map[uint32]int{0: 100, 1: 100, 2: 100})
}

func sortByPartition(ds []delivered) []delivered {
	var out []delivered
	for p := range uint32(3) {
		for _, d := range ds {
			if d.part == p {
				out = append(out, d)
			}
		}
	}
	return out
}

// TestFutureStartTimeSkipsOlderRecords starts after the newest record: the
// cursor waits at the end and skips records appended with an older time.
func TestFutureStartTimeSkipsOlderRecords(t *testing.T) {
	e := newEnv(t, 1, 64<<20)
	base := e.clock.Load()
	e.append(0, "old", 2)
	cs := e.resolve(cursor.Start{Kind: cursor.AtTime, Time: base + 1000}, cursor.Stop{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newSink()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, topicID, e.sources(), cs, Options{}, s) }()
	e.append(0, "still-old", 2) // clock unchanged: before the start time
	e.clock.Store(base + 1000)
	e.append(0, "new", 1)
	s.waitRecords(t, 1, done)
	cancel()
	<-done
	got := records(s.snapshot())
	if len(got) != 1 || got[0].value != "new-0" || got[0].off != 4 {
		t.Fatalf("delivered %v, want only new-0 at offset 4", got)
	}
}

// TestFutureStopTimeEndsWhenTheClockPassesIt follows live records until a
// stop time, then ends without waiting for another record.
func TestFutureStopTimeEndsWhenTheClockPassesIt(t *testing.T) {
	e := newEnv(t, 1, 64<<20)
	base := e.clock.Load()
	e.append(0, "a", 1)
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.BeforeTime, Time: base + 500})
	s := newSink()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), topicID, e.sources(), cs, Options{ProgressInterval: 20 * time.Millisecond}, s)
	}()
	s.waitRecords(t, 1, done)
	e.clock.Store(base + 499)
	e.append(0, "b", 1)
	s.waitRecords(t, 2, done)
	e.clock.Store(base + 500) // the watermark passes the stop: the stream ends
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs := s.snapshot()
	if evs[len(evs)-1].GetEnd() == nil || len(records(evs)) != 2 {
		t.Fatalf("events %v", evs)
	}
}

func TestStreamEndsWhenAPartitionStops(t *testing.T) {
	e := newEnv(t, 2, 64<<20)
	cs := e.resolve(cursor.Start{Kind: cursor.Latest}, cursor.Stop{})
	s := newSink()
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), topicID, e.sources(), cs, Options{}, s) }()
	boom := errors.New("topic deleted")
	e.parts[1].Fail(boom)
	if err := <-done; !errors.Is(err, boom) || !errors.Is(err, ErrStalled) {
		t.Fatalf("stream ended with %v", err)
	}
}

// TestIdempotencyKeysAndIDsAreDelivered checks the fields a consumer dedupes
// on.
func TestIdempotencyKeysAndIDsAreDelivered(t *testing.T) {
	e := newEnv(t, 1, 64<<20)
	e.append(0, "x", 2)
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd})
	s := newSink()
	if err := Run(context.Background(), topicID, e.sources(), cs, Options{}, s); err != nil {
		t.Fatal(err)
	}
	var n int
	for _, ev := range s.snapshot() {
		for _, r := range ev.GetRecords().GetRecords() {
			if r.GetIdempotencyKey() != fmt.Sprintf("idem-x-%d", r.GetOffset()) || r.GetMessageId() == "" {
				t.Fatalf("record %v", r)
			}
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d records", n)
	}
}

// TestEmptyRangeEndsAtOnce stops every partition before its first record:
// the stream must end in the same round, not at the next progress tick (it
// once waited for the progress timer; here that timer is an hour).
func TestEmptyRangeEndsAtOnce(t *testing.T) {
	e := newEnv(t, 2, 64<<20)
	e.append(0, "a", 3)
	e.append(1, "b", 3)
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.BeforeTime, Time: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newSink()
	if err := Run(ctx, topicID, e.sources(), cs, Options{ProgressInterval: time.Hour}, s); err != nil {
		t.Fatalf("stream ended with %v, want an end event", err)
	}
	if evs := s.snapshot(); evs[len(evs)-1].GetEnd() == nil || len(records(evs)) != 0 {
		t.Fatalf("events %v", evs)
	}
}

// Every event a replay reads from history is a catch-up turn of the
// scheduler, and events read at the tail are not: the regression guard for
// the unfiltered path, which once had no pacing at all.
func TestHistoryTakesCatchUpTurnsAndTheTailDoesNot(t *testing.T) {
	e := newEnv(t, 3, 4<<10)
	for p := range 3 {
		for j := range 20 {
			e.append(p, fmt.Sprintf("h%d-%d", p, j), 7)
		}
	}
	sc, err := sched.New(sched.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A bounded replay of the history.
	s := newSink()
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd})
	if err := Run(context.Background(), topicID, e.sources(), cs, Options{MaxRecordsPerEvent: 50, Sched: sc}, s); err != nil {
		t.Fatal(err)
	}
	events := 0
	for _, ev := range s.snapshot() {
		if ev.GetRecords() != nil {
			events++
		}
	}
	st := sc.Stats()
	if events == 0 || st.Units != uint64(events) {
		t.Fatalf("%d records events from history took %d catch-up turns, want one each", events, st.Units)
	}
	if st.Running != 0 || st.Waiting != 0 || st.Live != 0 {
		t.Fatalf("turns left behind: %+v", st)
	}
	// A live stream: caught up from the start, it reads the tail only.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := newSink()
	done := make(chan error, 1)
	cs = e.resolve(cursor.Start{Kind: cursor.Latest}, cursor.Stop{})
	go func() { done <- Run(ctx, topicID, e.sources(), cs, Options{Sched: sc}, live) }()
	// Publish only once every partition said caught_up: records that
	// arrive before are, rightly, read as catch-up.
	for caught := 0; caught < 3; {
		caught = 0
		for _, ev := range live.snapshot() {
			if ev.GetCaughtUp() != nil {
				caught++
			}
		}
		if caught < 3 {
			select {
			case <-live.notify:
			case err := <-done:
				t.Fatalf("live stream ended: %v", err)
			}
		}
	}
	for p := range 3 {
		e.append(p, fmt.Sprintf("l%d", p), 5)
	}
	live.waitRecords(t, 15, done)
	cancel()
	<-done
	if got := sc.Stats().Units; got != st.Units {
		t.Fatalf("a live stream took %d catch-up turns", got-st.Units)
	}
}

// countingSource counts the batches its readers return; upTo, when set,
// makes it a replica that has applied only the offsets below it.
type countingSource struct {
	Source
	upTo  uint64
	reads *int
}

func (c countingSource) Bounds() partition.State {
	b := c.Source.Bounds()
	if c.upTo > 0 {
		b.Next = min(b.Next, c.upTo)
	}
	return b
}

func (c countingSource) OpenReader() BatchReader {
	return countingReader{c.Source.OpenReader(), c.reads}
}

type countingReader struct {
	BatchReader
	reads *int
}

func (r countingReader) Read(from uint64) (*partition.Batch, error) {
	b, err := r.BatchReader.Read(from)
	if err == nil {
		*r.reads++
	}
	return b, err
}

// A stream over CatchUpFrom reads what the replica has from the replica and
// the rest from the leader, and delivers exactly what the leader holds.
func TestCatchUpFromReadsHistoryFromTheReplica(t *testing.T) {
	e := newEnv(t, 1, 4<<10)
	for j := range 40 {
		e.append(0, fmt.Sprintf("h%d", j), 5)
	}
	lag := e.parts[0].Bounds().Next / 2 // the replica trails the leader
	var fromReplica, fromLeader int
	src := CatchUpFrom(
		countingSource{Source: Local(e.parts[0]), upTo: lag, reads: &fromReplica},
		countingSource{Source: Local(e.parts[0]), reads: &fromLeader},
	)
	s := newSink()
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd})
	if err := Run(context.Background(), topicID, []Source{src}, cs, Options{MaxRecordsPerEvent: 20}, s); err != nil {
		t.Fatal(err)
	}
	checkDense(t, records(s.snapshot()), map[uint32]uint64{0: 0}, map[uint32]int{0: 200})
	if fromReplica == 0 || fromLeader == 0 {
		t.Fatalf("batches read: %d from the replica, %d from the leader; want both", fromReplica, fromLeader)
	}
	// MaxBatchBytes 2000 and 5-record appends: one batch per append, so
	// the replica served the batches below the lag and the leader the rest.
	if want := int(lag / 5); fromReplica != want || fromLeader != 40-want {
		t.Fatalf("batches read: %d from the replica, %d from the leader; want %d and %d", fromReplica, fromLeader, want, 40-want)
	}
}

// TestPaceIsToldTheHistoryRead: a replay tells Pace the bytes of every
// history batch it read (what a replay quota charges), outside its
// catch-up turns; a stream that starts at the end reads no history and is
// never paced, and a Pace error ends the stream.
func TestPaceIsToldTheHistoryRead(t *testing.T) {
	e := newEnv(t, 2, 64<<20)
	e.append(0, "a", 50)
	e.append(1, "b", 30)
	var paced int
	pace := func(ctx context.Context, n int) error { paced += n; return nil }
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd})
	if err := Run(context.Background(), topicID, e.sources(), cs, Options{Pace: pace}, newSink()); err != nil {
		t.Fatal(err)
	}
	var want int
	for _, p := range e.parts {
		r := p.NewReader()
		for off := uint64(0); off < p.Bounds().Next; {
			b, _, err := r.Read(off)
			if err != nil {
				t.Fatal(err)
			}
			want += len(b.Records.Bytes())
			off = b.End()
		}
		r.Close()
	}
	if paced != want || want == 0 {
		t.Fatalf("paced %d bytes, the history is %d", paced, want)
	}
	// Live only: nothing to pace.
	paced = 0
	cs = e.resolve(cursor.Start{Kind: cursor.Latest}, cursor.Stop{Kind: cursor.AtEnd})
	if err := Run(context.Background(), topicID, e.sources(), cs, Options{Pace: pace}, newSink()); err != nil {
		t.Fatal(err)
	}
	if paced != 0 {
		t.Fatalf("a stream at the end was paced for %d bytes", paced)
	}
	stop := errors.New("over quota")
	cs = e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd})
	err := Run(context.Background(), topicID, e.sources(), cs, Options{Pace: func(context.Context, int) error { return stop }}, newSink())
	if !errors.Is(err, stop) {
		t.Fatalf("a Pace error: %v, want it to end the stream", err)
	}
}
