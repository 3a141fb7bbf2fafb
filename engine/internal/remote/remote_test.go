package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/engine/internal/stream"
	"github.com/rewind-io/rewind/raftlog"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// The tests read a real partition (a raft host over an in-memory Pebble
// store) through a leader adapter that answers the way broker.ServeFetch
// does, with faults injected. Tests that need no append while the source
// runs do so inside a synctest bubble: retries, backoff and long polls run
// on its fake clock, so they take no time and "no fetch for an hour after
// the poll stopped" is a deterministic check. Appends go through the raft
// host's goroutines, which may not touch a bubble's channels, so the live
// tests run on the real clock and wait on events, never on sleeps.

const topicID = 7

// env is one partition on a real raft host over an in-memory store.
type env struct {
	t     *testing.T
	p     *partition.Partition
	clock atomic.Int64
}

// newEnv opens the partition. With a cache larger than what the test
// appends every read is a cache hit (safe inside a bubble); with a small
// one reads go to Pebble.
func newEnv(t *testing.T, cacheBytes int64) *env {
	t.Helper()
	e := &env{t: t}
	e.clock.Store(1_000_000)
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
	p, err := partition.Open(partition.Config{
		Group: 2, TopicID: topicID, DB: db, Host: host, Cache: partition.NewCache(cacheBytes),
		Now: e.clock.Load, MaxBatchBytes: 2000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.AddGroup(raftlog.GroupConfig{ID: 2, Voters: []uint64{1}, SM: p}); err != nil {
		t.Fatal(err)
	}
	e.p = p
	return e
}

// append appends n records as one batch, one clock tick after the last
// batch; record i carries i*7 bytes of padding so batches differ in size.
func (e *env) append(prefix string, n int) {
	e.t.Helper()
	e.clock.Add(1000)
	rs := make([]record.Record, n)
	for i := range rs {
		rs[i] = record.Record{Value: fmt.Appendf(nil, "%s-%d%s", prefix, i, strings.Repeat(".", i*7))}
	}
	a, err := e.p.Append(context.Background(), rs)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(a.Segments) != 1 {
		e.t.Fatalf("append of %d records made %d batches, want 1", n, len(a.Segments))
	}
}

// fill appends batches of 1 to 5 records.
func (e *env) fill(batches int) {
	e.t.Helper()
	for i := range batches {
		e.append(fmt.Sprintf("b%d", i), 1+i%5)
	}
}

// batches reads the partition's batches directly.
func (e *env) batches() []*partition.Batch {
	e.t.Helper()
	rd := e.p.NewReader()
	defer rd.Close()
	var out []*partition.Batch
	vis := e.p.Bounds()
	for off := vis.LogStart; off < vis.Next; {
		b, _, err := rd.Read(off)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, b)
		off = b.End()
	}
	return out
}

// rec is a record as a stream delivers it.
type rec struct {
	Offset uint64
	Value  string
	Time   int64
}

// records decodes batches the way a stream delivers them.
func records(t *testing.T, bs []*partition.Batch) []rec {
	t.Helper()
	var out []rec
	for _, b := range bs {
		it := b.Records.Iter()
		var r record.Record
		for it.Next(&r) {
			out = append(out, rec{b.Base + uint64(r.OffsetDelta), string(r.Value), b.AppendTime})
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var (
	errTransient = errors.New("leader: no leader right now")
	errPermanent = errors.New("leader: topic deleted")
)

func retryable(err error) bool { return errors.Is(err, errTransient) }

// call is one call the leader received.
type call struct {
	method string // "fetch", "seek" or "timeof"
	f      Fetch
	// live says the call's context had not ended when the call began.
	live   bool
	failed bool
}

func isRead(c call) bool { return c.method == "fetch" && c.f.Wait == 0 && c.f.MaxBytes > 0 }
func isPoll(c call) bool { return c.method == "fetch" && c.f.Wait > 0 }
func isSeek(c call) bool { return c.method == "seek" }
func isAny(call) bool    { return true }

// fault is how the leader answers one call.
type fault struct {
	err error
	// lag answers as a replica that has applied only up to lagTo (a batch
	// boundary): a new leader still catching up.
	lag   bool
	lagTo uint64
	// hold delays the answer without watching the context (a slow read of
	// Pebble); only inside a bubble.
	hold time.Duration
}

// next injects f into the next n calls that match; n < 0: into all.
func next(n int, match func(call) bool, f fault) func(call) fault {
	return func(c call) fault {
		if n == 0 || !match(c) {
			return fault{}
		}
		n--
		return f
	}
}

// leader answers for one real partition the way broker.ServeFetch does,
// and fails a call whose context has ended, as a Connect call does.
type leader struct {
	p *partition.Partition
	// static: nothing is appended while the source runs, so long polls wait
	// on their timer and context only, never on partition notifications
	// (which come from the raft host's goroutines, outside any bubble).
	static  bool
	changed chan struct{} // a non-blocking send after every state change
	mu      struct {
		sync.Mutex
		calls    []call
		inflight int
		parked   map[int]Fetch // long polls waiting for a record, by call number
		inject   func(call) fault
		// tamper edits fetch answers (corrupt answers).
		tamper func(f Fetch, res *Fetched)
	}
}

// newLeader returns the leader of p. Before the test's store closes, it
// waits for the calls in flight to end.
func newLeader(t *testing.T, p *partition.Partition, static bool) *leader {
	l := &leader{p: p, static: static, changed: make(chan struct{}, 1)}
	l.mu.parked = make(map[int]Fetch)
	t.Cleanup(func() { l.waitFor(t, "the calls in flight", func() bool { return l.inflight() == 0 }) })
	return l
}

func (l *leader) inject(fn func(call) fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.inject = fn
}

func (l *leader) tamper(fn func(Fetch, *Fetched)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.tamper = fn
}

func (l *leader) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// answer is how the leader answers a call it began.
type answer struct {
	id int
	fault
	tamper func(Fetch, *Fetched)
}

// begin records a call; end it with end.
func (l *leader) begin(ctx context.Context, method string, f Fetch) answer {
	defer l.signal()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := call{method: method, f: f, live: ctx.Err() == nil}
	var ft fault
	if l.mu.inject != nil {
		ft = l.mu.inject(c)
	}
	if ft.err == nil {
		ft.err = ctx.Err()
	}
	c.failed = ft.err != nil
	l.mu.calls = append(l.mu.calls, c)
	l.mu.inflight++
	return answer{len(l.mu.calls) - 1, ft, l.mu.tamper}
}

func (l *leader) end() {
	defer l.signal()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.inflight--
}

func (l *leader) inflight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.inflight
}

// count returns how many calls matched.
func (l *leader) count(match func(call) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.mu.calls {
		if match(c) {
			n++
		}
	}
	return n
}

// callsFrom returns the calls from number i on.
func (l *leader) callsFrom(i int) []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]call(nil), l.mu.calls[i:]...)
}

// parkedAt reports whether a long poll at from waits, asking for the tail
// or not.
func (l *leader) parkedAt(from uint64, tail bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.mu.parked {
		if f.From == from && (f.MaxBytes > 0) == tail {
			return true
		}
	}
	return false
}

// waitFor blocks until cond holds.
func (l *leader) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-l.changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Fetch implements Leader.
func (l *leader) Fetch(ctx context.Context, f Fetch) (Fetched, error) {
	a := l.begin(ctx, "fetch", f)
	defer l.end()
	if a.err != nil {
		return Fetched{}, a.err
	}
	time.Sleep(a.hold)
	p := l.p
	visible := func() partition.State {
		vis := p.Bounds()
		if a.lag {
			vis.Next = min(vis.Next, a.lagTo)
		}
		return vis
	}
	if f.Wait > 0 && visible().Next <= f.From {
		l.park(ctx, a.id, f, visible)
		if err := ctx.Err(); err != nil {
			return Fetched{}, err
		}
	}
	if err := p.Err(); err != nil {
		return Fetched{}, err
	}
	out := Fetched{Watermark: p.TimeWatermark()}
	out.Bounds = visible()
	vis := out.Bounds
	if f.MaxBytes <= 0 || f.From < vis.LogStart || f.From >= vis.Next {
		return out, nil
	}
	rd := p.NewReader()
	defer rd.Close()
	n := 0
	for off := f.From; off < vis.Next && n < f.MaxBytes; {
		b, _, err := rd.Read(off)
		if errors.Is(err, partition.ErrBelowStart) && len(out.Batches) == 0 {
			out.Bounds = p.Bounds()
			return out, nil
		}
		if err != nil {
			if len(out.Batches) > 0 {
				break
			}
			return Fetched{}, err
		}
		out.Batches = append(out.Batches, b)
		n += len(b.Records.Bytes())
		off = b.End()
	}
	if a.tamper != nil {
		a.tamper(f, &out)
	}
	return out, nil
}

// park waits up to f.Wait for a record at f.From, or for ctx to end.
func (l *leader) park(ctx context.Context, id int, f Fetch, visible func() partition.State) {
	ch := make(chan struct{}, 1)
	if !l.static {
		defer l.p.Notify(ch)()
	}
	t := time.NewTimer(f.Wait)
	defer t.Stop()
	l.mu.Lock()
	l.mu.parked[id] = f
	l.mu.Unlock()
	l.signal()
	defer func() {
		l.mu.Lock()
		delete(l.mu.parked, id)
		l.mu.Unlock()
		l.signal()
	}()
	for visible().Next <= f.From && l.p.Err() == nil {
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// SeekTime implements Leader.
func (l *leader) SeekTime(ctx context.Context, t int64) (uint64, error) {
	defer l.end()
	if a := l.begin(ctx, "seek", Fetch{}); a.err != nil {
		return 0, a.err
	}
	return l.p.SeekTime(t)
}

// TimeOf implements Leader.
func (l *leader) TimeOf(ctx context.Context, offset uint64) (int64, error) {
	defer l.end()
	if a := l.begin(ctx, "timeof", Fetch{}); a.err != nil {
		return 0, a.err
	}
	return l.p.TimeOf(offset)
}

func open(t *testing.T, ctx context.Context, l *leader, cfg Config) *Source {
	t.Helper()
	cfg.Leader = l
	if cfg.Retryable == nil {
		cfg.Retryable = retryable
	}
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sink collects the records a stream delivers.
type sink struct {
	mu     sync.Mutex
	recs   []rec
	notify chan struct{}
}

func newSink() *sink { return &sink{notify: make(chan struct{}, 1)} }

func (s *sink) Send(m *rewindv1.SubscribeResponse) error {
	s.mu.Lock()
	for _, r := range m.GetRecords().GetRecords() {
		s.recs = append(s.recs, rec{r.GetOffset(), string(r.GetValue()), r.GetAppendTimeUnixNanos()})
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return nil
}

func (s *sink) delivered() []rec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rec(nil), s.recs...)
}

// waitRecords blocks until n records arrived or the stream ended.
func (s *sink) waitRecords(t *testing.T, n int, done <-chan error) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got := len(s.recs)
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-s.notify:
		case err := <-done:
			t.Fatalf("stream ended after %d of %d records: %v", got, n, err)
		case <-deadline.C:
			t.Fatalf("only %d of %d records arrived", got, n)
		}
	}
}

// resolve returns src's cursor for start and stop.
func resolve(t *testing.T, src *Source, start cursor.Start, stop cursor.Stop) []cursor.Cursor {
	t.Helper()
	cs, err := cursor.Resolve(topicID, []cursor.Log{src}, []uint32{0}, start, stop, 0)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// serve runs a stream of src from its cursor.
func serve(ctx context.Context, src *Source, cs []cursor.Cursor, s *sink) error {
	return stream.Run(ctx, topicID, []stream.Source{src}, cs, stream.Options{}, s)
}

var earliest, atEnd = cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.AtEnd}

// TestReplayMatchesTheLocalLog replays history read from Pebble through a
// source with small fetches: every offset once, in order, with the values
// and times the partition holds, and no batch fetched twice. A reader
// returns the same batches from any offset in them, also after a jump back.
func TestReplayMatchesTheLocalLog(t *testing.T) {
	e := newEnv(t, 4<<10) // a tiny cache: the leader reads Pebble
	e.fill(40)
	want := records(t, e.batches())
	l := newLeader(t, e.p, false)
	src := open(t, context.Background(), l, Config{ReadBytes: 256, PollWait: time.Hour})
	s := newSink()
	if err := serve(context.Background(), src, resolve(t, src, earliest, atEnd), s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, s.delivered()); diff != "" {
		t.Fatalf("replay through the leader differs from the partition (-want +got):\n%s", diff)
	}
	var froms []uint64
	for _, c := range l.callsFrom(0) {
		if isRead(c) {
			froms = append(froms, c.f.From)
		}
	}
	if len(froms) < 10 {
		t.Fatalf("%d fetches for 40 batches with ReadBytes 256, want several", len(froms))
	}
	for i := 1; i < len(froms); i++ {
		if froms[i] <= froms[i-1] {
			t.Fatalf("fetches at %v: not ascending, a batch was fetched twice", froms)
		}
	}
	bs := e.batches()
	r := src.OpenReader()
	defer r.Close()
	for _, i := range []int{0, 1, 2, 30, 31, 5, 6} {
		b := bs[i]
		got, err := r.Read(b.End() - 1)
		if err != nil || got.Base != b.Base || got.Span != b.Span || got.AppendTime != b.AppendTime ||
			string(got.Records.Bytes()) != string(b.Records.Bytes()) {
			t.Fatalf("read at %d: %+v, %v; want the batch at [%d, %d)", b.End()-1, got, err, b.Base, b.End())
		}
	}
}

// TestLiveTailComesWithThePoll follows a partition: records appended while
// the reader waits at the end come with the long poll's answer, and the
// reader serves them without a fetch of its own. Polls that fail for less
// than RetryFor are retried.
func TestLiveTailComesWithThePoll(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(3)
	l := newLeader(t, e.p, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A short poll only bounds the wait for a poll that asks for the tail:
	// the poll after an answer with the tail asks for none (see
	// TestLiveRecordsAfterTheFirstComeWithThePoll).
	src := open(t, ctx, l, Config{PollWait: 20 * time.Millisecond})
	s := newSink()
	done := make(chan error, 1)
	cs := resolve(t, src, earliest, cursor.Stop{})
	go func() { done <- serve(ctx, src, cs, s) }()
	total := len(records(t, e.batches()))
	s.waitRecords(t, total, done)
	for i := range 5 {
		if i == 2 {
			l.inject(next(3, isPoll, fault{err: errTransient}))
		}
		end := e.p.Bounds().Next
		l.waitFor(t, "a poll for the tail", func() bool { return l.parkedAt(end, true) })
		reads := l.count(isRead)
		e.append(fmt.Sprintf("live%d", i), 1+i)
		total += 1 + i
		s.waitRecords(t, total, done)
		if n := l.count(isRead); n != reads {
			t.Fatalf("live batch %d: the reader fetched %d times, want 0 (the poll brought it)", i, n-reads)
		}
	}
	if n := l.count(func(c call) bool { return isPoll(c) && c.failed }); n != 3 || src.Err() != nil {
		t.Fatalf("%d failed polls, Err %v; want 3, nil", n, src.Err())
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("stream ended with %v", err)
	}
	if diff := cmp.Diff(records(t, e.batches()), s.delivered()); diff != "" {
		t.Fatalf("delivered (-want +got):\n%s", diff)
	}
}

// TestLiveRecordsAfterTheFirstComeWithThePoll: a poll answer with the tail
// is followed at once by the next poll, before the reader has read that
// tail. The reader at the end must still get the next live record without
// a fetch of its own ("a live record costs one round trip").
func TestLiveRecordsAfterTheFirstComeWithThePoll(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(2)
	l := newLeader(t, e.p, false)
	src := open(t, t.Context(), l, Config{PollWait: time.Hour})
	ch := make(chan struct{}, 1)
	defer src.Notify(ch)()
	r := src.OpenReader()
	defer r.Close()
	for i := range 3 {
		end := e.p.Bounds().Next
		if i == 0 {
			l.waitFor(t, "a poll for the tail", func() bool { return l.parkedAt(end, true) })
		}
		e.append(fmt.Sprintf("live%d", i), 2)
		next := e.p.Bounds().Next
		// The poll has taken the answer and asks again, the reader not
		// having read yet (a stream wakes after the poll goroutine).
		l.waitFor(t, "the next poll", func() bool { return l.parkedAt(next, true) || l.parkedAt(next, false) })
		reads := l.count(isRead)
		if b, err := r.Read(end); err != nil || b.Base != end {
			t.Fatalf("read at %d: %v, %v", end, b, err)
		}
		if n := l.count(isRead); n != reads {
			t.Fatalf("live batch %d at %d: the reader fetched %d times, want 0", i, end, n-reads)
		}
	}
}

// TestTailKeepsTheBatchAtTheReader: a poll answer may hold one batch more
// than TailBytes (the leader returns batches until it reaches the bound).
// The tail must keep the batch the reader wants next, not drop it first.
func TestTailKeepsTheBatchAtTheReader(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.append("x", 3)
	size := len(e.batches()[0].Records.Bytes())
	l := newLeader(t, e.p, false)
	// Room for one batch and a half: the poll's answer holds two.
	src := open(t, t.Context(), l, Config{PollWait: time.Hour, TailBytes: size + size/2})
	end := src.Bounds().Next
	e.append("y", 3) // the same size as x
	e.append("z", 3)
	ch := make(chan struct{}, 1)
	defer src.Notify(ch)()
	next := e.p.Bounds().Next
	l.waitFor(t, "the poll's answer", func() bool { return l.parkedAt(next, true) || l.parkedAt(next, false) })
	if b := src.Bounds(); b.Next != next {
		t.Fatalf("bounds %+v after the poll, want the end at %d", b, next)
	}
	r := src.OpenReader()
	defer r.Close()
	if b, err := r.Read(end); err != nil || b.Base != end {
		t.Fatalf("read at %d: %v, %v", end, b, err)
	}
	if n := l.count(isRead); n != 0 {
		t.Fatalf("the reader fetched %d times, want 0: the poll brought the batch", n)
	}
}

// TestTransientFailuresAndALaggingLeaderAreRetried replays history while
// the leader fails every third fetch and answers every other third as a
// new leader that has not applied the batch yet: the stream carries on
// with no gap and no duplicate.
func TestTransientFailuresAndALaggingLeaderAreRetried(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(30)
	want := records(t, e.batches())
	synctest.Test(t, func(t *testing.T) {
		l := newLeader(t, e.p, true)
		src := open(t, t.Context(), l, Config{ReadBytes: 200})
		k := 0
		l.inject(func(c call) fault {
			if !isRead(c) {
				return fault{}
			}
			k++
			switch k % 3 {
			case 1:
				return fault{err: errTransient}
			case 2:
				return fault{lag: true, lagTo: c.f.From}
			}
			return fault{}
		})
		s := newSink()
		if err := serve(t.Context(), src, resolve(t, src, earliest, atEnd), s); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, s.delivered()); diff != "" {
			t.Fatalf("delivered (-want +got):\n%s", diff)
		}
		if n := l.count(func(c call) bool { return isRead(c) && c.failed }); n < 5 {
			t.Fatalf("%d failed fetches, want several", n)
		}
	})
}

// TestLaggingLeaderIsAskedAgainUntilItHasTheBatch reads from a new leader
// that has applied less than the old one answered.
func TestLaggingLeaderIsAskedAgainUntilItHasTheBatch(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(6)
	bs := e.batches()
	synctest.Test(t, func(t *testing.T) {
		l := newLeader(t, e.p, true)
		src := open(t, t.Context(), l, Config{RetryFor: time.Second})
		r := src.OpenReader()
		defer r.Close()
		from := bs[4].Base + 1
		l.inject(next(3, isRead, fault{lag: true, lagTo: bs[2].Base}))
		b, err := r.Read(from)
		if err != nil || b.Base != bs[4].Base {
			t.Fatalf("read at %d: %v, %v", from, b, err)
		}
		if n := l.count(isRead); n != 4 {
			t.Fatalf("%d fetches, want 4 (3 lagging answers, then the batch)", n)
		}

		// A leader that stays behind for longer than RetryFor fails the read.
		l.inject(next(-1, isRead, fault{lag: true, lagTo: bs[2].Base}))
		r2 := src.OpenReader()
		defer r2.Close()
		if _, err := r2.Read(from); !errors.Is(err, ErrFailed) {
			t.Fatalf("read from a leader behind for good: %v, want ErrFailed", err)
		}
	})
}

// TestFailuresLongerThanRetryForFailTheSource: transient failures for less
// than RetryFor are ridden out; for longer they fail reads, the poll (Err)
// and so the stream, with errors wrapping ErrFailed and the last cause.
func TestFailuresLongerThanRetryForFailTheSource(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(3)
	synctest.Test(t, func(t *testing.T) {
		const retryFor = time.Second
		l := newLeader(t, e.p, true)
		src := open(t, t.Context(), l, Config{RetryFor: retryFor, PollWait: time.Hour})
		r := src.OpenReader()
		defer r.Close()

		start := time.Now() // the bubble's clock
		l.inject(func(c call) fault {
			if time.Since(start) < retryFor/2 {
				return fault{err: errTransient}
			}
			return fault{}
		})
		if _, err := r.Read(0); err != nil {
			t.Fatalf("read through failures shorter than RetryFor: %v", err)
		}

		l.inject(next(-1, isAny, fault{err: errTransient}))
		r2 := src.OpenReader() // r has the rest of the log ahead
		defer r2.Close()
		if _, err := r2.Read(1); !errors.Is(err, ErrFailed) || !errors.Is(err, errTransient) {
			t.Fatalf("read through failures longer than RetryFor: %v, want ErrFailed wrapping the cause", err)
		}
		if err := src.Err(); err != nil {
			t.Fatalf("a failed read failed the source: %v", err)
		}

		ch := make(chan struct{}, 1)
		cancel := src.Notify(ch)
		for src.Err() == nil {
			<-ch
		}
		cancel()
		if err := src.Err(); !errors.Is(err, ErrFailed) || !errors.Is(err, errTransient) {
			t.Fatalf("Err after the poll failed for longer than RetryFor: %v", err)
		}
		err := serve(t.Context(), src, resolve(t, src, earliest, cursor.Stop{}), newSink())
		if !errors.Is(err, stream.ErrStalled) || !errors.Is(err, ErrFailed) {
			t.Fatalf("stream over a failed source ended with %v", err)
		}
		// A failed source starts no poll.
		polls := l.count(isPoll)
		defer src.Notify(ch)()
		time.Sleep(time.Hour)
		if n := l.count(isPoll); n != polls {
			t.Fatalf("%d polls of a failed source", n-polls)
		}
	})
}

// TestPermanentErrorsFailAtOnce: an error Retryable rejects is returned by
// the first call, not retried and not wrapped in ErrFailed.
func TestPermanentErrorsFailAtOnce(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(3)
	synctest.Test(t, func(t *testing.T) {
		l := newLeader(t, e.p, true)
		l.inject(next(-1, isAny, fault{err: errPermanent}))
		if _, err := Open(t.Context(), Config{Leader: l, Retryable: retryable}); !errors.Is(err, errPermanent) {
			t.Fatalf("open: %v", err)
		}
		l.inject(nil)
		src := open(t, t.Context(), l, Config{})
		l.inject(next(-1, isAny, fault{err: errPermanent}))
		calls := l.count(isAny)
		r := src.OpenReader()
		defer r.Close()
		if _, err := r.Read(0); !errors.Is(err, errPermanent) || errors.Is(err, ErrFailed) {
			t.Fatalf("read: %v, want the permanent error as is", err)
		}
		if _, err := src.SeekTime(0); !errors.Is(err, errPermanent) {
			t.Fatalf("seek: %v", err)
		}
		if _, err := src.TimeOf(0); !errors.Is(err, errPermanent) {
			t.Fatalf("time of: %v", err)
		}
		if n := l.count(isAny) - calls; n != 3 {
			t.Fatalf("%d calls for three failures, want 3 (no retry)", n)
		}
		s := newSink()
		err := serve(t.Context(), src, resolve(t, src, cursor.Start{Kind: cursor.Latest}, cursor.Stop{}), s)
		if !errors.Is(err, stream.ErrStalled) || !errors.Is(err, errPermanent) {
			t.Fatalf("stream ended with %v", err)
		}
		if n := l.count(isPoll); n != 1 {
			t.Fatalf("%d polls, want 1", n)
		}
	})
}

// TestCorruptAnswersAreRefused: a fetch answer that does not start with the
// batch holding From, or whose batches do not follow each other, is
// partition.ErrCorrupt, for a reader and for a stream.
func TestCorruptAnswersAreRefused(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(8)
	bs := e.batches()
	cases := []struct {
		name   string
		tamper func(f Fetch, res *Fetched)
	}{
		{"starts after From", func(_ Fetch, res *Fetched) { res.Batches = res.Batches[1:] }},
		{"starts before From", func(_ Fetch, res *Fetched) {
			res.Batches = append([]*partition.Batch{bs[0]}, res.Batches[1:]...)
		}},
		{"a gap", func(_ Fetch, res *Fetched) {
			res.Batches = append([]*partition.Batch{res.Batches[0]}, res.Batches[2:]...)
		}},
		{"a batch twice", func(_ Fetch, res *Fetched) {
			res.Batches = append([]*partition.Batch{res.Batches[0]}, res.Batches...)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLeader(t, e.p, true)
				src := open(t, t.Context(), l, Config{PollWait: time.Hour})
				l.tamper(func(f Fetch, res *Fetched) {
					if f.Wait == 0 && len(res.Batches) >= 3 { // a reader's fetch
						tc.tamper(f, res)
					}
				})
				r := src.OpenReader()
				defer r.Close()
				from := bs[2].Base + 1
				if _, err := r.Read(from); !errors.Is(err, partition.ErrCorrupt) {
					t.Fatalf("read at %d: %v, want ErrCorrupt", from, err)
				}
				if n := l.count(isRead); n != 1 {
					t.Fatalf("%d fetches, want 1: corruption is not retried", n)
				}
				s := newSink()
				start := cursor.Start{Kind: cursor.AtOffset, Offset: bs[2].Base}
				if err := serve(t.Context(), src, resolve(t, src, start, atEnd), s); !errors.Is(err, partition.ErrCorrupt) {
					t.Fatalf("stream ended with %v, want ErrCorrupt", err)
				}
				if got := s.delivered(); len(got) != 0 {
					t.Fatalf("a stream delivered %v from corrupt answers", got)
				}
			})
		})
	}
	// The fetch a reader keeps ahead is checked like its own.
	synctest.Test(t, func(t *testing.T) {
		l := newLeader(t, e.p, true)
		src := open(t, t.Context(), l, Config{ReadBytes: 1, PollWait: time.Hour}) // a batch a fetch
		l.tamper(func(f Fetch, res *Fetched) {
			if f.From == bs[3].Base {
				res.Batches = []*partition.Batch{bs[0]}
			}
		})
		r := src.OpenReader()
		defer r.Close()
		if _, err := r.Read(bs[2].Base); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(bs[3].Base); !errors.Is(err, partition.ErrCorrupt) {
			t.Fatalf("read at %d after a corrupt fetch ahead: %v, want ErrCorrupt", bs[3].Base, err)
		}
	})
}

// TestFetchAheadEndsWithTheReader: a fetch ahead that a jump dropped
// stops, not retrying a failing leader for RetryFor; and Close returns once
// the reader's goroutine has ended (its owner may close the store next).
func TestFetchAheadEndsWithTheReader(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(10)
	bs := e.batches()
	synctest.Test(t, func(t *testing.T) {
		l := newLeader(t, e.p, true)
		src := open(t, t.Context(), l, Config{ReadBytes: 1, PollWait: time.Hour}) // a batch a fetch
		at := func(b *partition.Batch) func(call) bool {
			return func(c call) bool { return isRead(c) && c.f.From == b.Base }
		}
		l.inject(next(-1, at(bs[1]), fault{err: errTransient}))
		r := src.OpenReader()
		for _, b := range []*partition.Batch{bs[0], bs[6]} { // the jump drops the fetch at bs[1]
			if got, err := r.Read(b.Base); err != nil || got.Base != b.Base {
				t.Fatalf("read at %d: %v, %v", b.Base, got, err)
			}
		}
		synctest.Wait()
		n := l.count(at(bs[1]))
		time.Sleep(time.Hour)
		if m := l.count(at(bs[1])); m != n {
			t.Fatalf("the dropped fetch ahead called the leader %d more times", m-n)
		}

		l.inject(next(-1, at(bs[8]), fault{hold: time.Second})) // a slow read of Pebble
		if _, err := r.Read(bs[7].Base); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the fetch ahead at bs[8] is at the leader
		r.Close()
		if n := l.inflight(); n != 0 {
			t.Fatalf("%d fetches in flight after Close", n)
		}
	})
}

// TestReadBelowTheLogStart: retention removed the offset after the source
// took its bounds: the leader's answer says so, and the read fails with
// partition.ErrBelowStart at once.
func TestReadBelowTheLogStart(t *testing.T) {
	e := newEnv(t, 64<<20)
	for i := range 4 {
		e.append(fmt.Sprintf("b%d", i), 5) // batches at 0, 5, 10, 15
	}
	l := newLeader(t, e.p, false)
	src := open(t, context.Background(), l, Config{PollWait: time.Hour})
	cs := resolve(t, src, cursor.Start{Kind: cursor.AtOffset, Offset: 3}, atEnd)
	if err := e.p.Truncate(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	r := src.OpenReader()
	defer r.Close()
	if _, err := r.Read(3); !errors.Is(err, partition.ErrBelowStart) {
		t.Fatalf("read at 3 below the log start 10: %v", err)
	}
	if n := l.count(isRead); n != 1 {
		t.Fatalf("%d fetches, want 1 (not retried)", n)
	}
	if b, err := r.Read(12); err != nil || b.Base != 10 {
		t.Fatalf("read at 12: %v, %v", b, err)
	}
	// A stream whose source still has the old bounds fails the same way.
	if err := serve(context.Background(), src, cs, newSink()); !errors.Is(err, partition.ErrBelowStart) {
		t.Fatalf("stream ended with %v, want ErrBelowStart", err)
	}
}

// TestSeekTimeAndTimeOfAskTheLeader resolves times and offsets through the
// source: every call goes to the leader and answers what the partition
// answers; transient failures are retried, others returned.
func TestSeekTimeAndTimeOfAskTheLeader(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(6)
	bs := e.batches()
	l := newLeader(t, e.p, false)
	src := open(t, context.Background(), l, Config{PollWait: time.Hour})
	for _, b := range bs {
		want, err := e.p.SeekTime(b.AppendTime)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := src.SeekTime(b.AppendTime); err != nil || got != want || got != b.Base {
			t.Fatalf("seek %d: %d, %v, want %d", b.AppendTime, got, err, want)
		}
		if got, err := src.TimeOf(b.End() - 1); err != nil || got != b.AppendTime {
			t.Fatalf("time of %d: %d, %v, want %d", b.End()-1, got, err, b.AppendTime)
		}
	}
	if n, m := l.count(isSeek), l.count(func(c call) bool { return c.method == "timeof" }); n != len(bs) || m != len(bs) {
		t.Fatalf("%d seeks and %d time lookups reached the leader, want %d each", n, m, len(bs))
	}

	l.inject(next(2, isAny, fault{err: errTransient}))
	if got, err := src.TimeOf(bs[3].Base); err != nil || got != bs[3].AppendTime {
		t.Fatalf("time of through failures: %d, %v", got, err)
	}
	calls := l.count(isAny)
	end := e.p.Bounds().Next
	if _, err := src.TimeOf(end); !errors.Is(err, partition.ErrBelowStart) {
		t.Fatalf("time of the end offset: %v", err)
	}
	if n := l.count(isAny) - calls; n != 1 {
		t.Fatalf("%d calls for an offset out of range, want 1", n)
	}

	// A stream's start time is resolved on the leader.
	seeks := l.count(isSeek)
	start := cursor.Start{Kind: cursor.AtTime, Time: bs[3].AppendTime}
	cs := resolve(t, src, start, atEnd)
	if cs[0].Next != bs[3].Base || l.count(isSeek) == seeks {
		t.Fatalf("start at time %d resolved to %d (want %d) with %d seeks", start.Time, cs[0].Next, bs[3].Base, l.count(isSeek)-seeks)
	}
}

// noCallsAfter checks that no call began with a live context from call
// number i on, and that nobody calls the leader for the next hour of the
// bubble's clock: the poll goroutine is gone.
func noCallsAfter(t *testing.T, l *leader, i int) {
	t.Helper()
	synctest.Wait()
	for _, c := range l.callsFrom(i) {
		if c.live {
			t.Fatalf("a %s call %+v after the poll was stopped", c.method, c.f)
		}
	}
	n := l.count(isAny)
	time.Sleep(time.Hour)
	if m := l.count(isAny); m != n {
		t.Fatalf("%d calls in the hour after the poll was stopped", m-n)
	}
}

// TestPollStops: the poll runs while anybody waits, and stops with the last
// Notify cancel (the end of a stream) or the source's context, which is
// no failure of the source.
func TestPollStops(t *testing.T) {
	e := newEnv(t, 64<<20)
	e.fill(5)
	synctest.Test(t, func(t *testing.T) {
		const wait = time.Second
		l := newLeader(t, e.p, true)
		ctx, cancel := context.WithCancel(t.Context())
		src := open(t, ctx, l, Config{ReadBytes: 200, PollWait: wait})
		cancel1 := src.Notify(make(chan struct{}, 1))
		cancel2 := src.Notify(make(chan struct{}, 1))
		time.Sleep(wait / 2)
		if n := l.count(isPoll); n != 1 {
			t.Fatalf("%d polls for two waiters, want 1", n)
		}
		cancel1()
		polls := l.count(isPoll)
		time.Sleep(3 * wait)
		if n := l.count(isPoll); n <= polls {
			t.Fatal("the poll stopped while somebody still waits")
		}
		cancel2()
		noCallsAfter(t, l, l.count(isAny))

		streamCtx, endStream := context.WithCancel(ctx)
		cs := resolve(t, src, earliest, cursor.Stop{})
		done := make(chan error, 1)
		go func() { done <- serve(streamCtx, src, cs, newSink()) }()
		synctest.Wait() // the stream waits at the end, the poll at the leader
		if end := src.Bounds().Next; !l.parkedAt(end, true) && !l.parkedAt(end, false) {
			t.Fatal("no poll while the stream waits")
		}
		endStream()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("stream ended with %v", err)
		}
		noCallsAfter(t, l, l.count(isAny))

		defer src.Notify(make(chan struct{}, 1))()
		time.Sleep(wait / 2)
		if !l.parkedAt(src.Bounds().Next, true) {
			t.Fatal("no poll after a new Notify")
		}
		cancel()
		noCallsAfter(t, l, l.count(isAny))
		if err := src.Err(); err != nil {
			t.Fatalf("Err after the poll stopped: %v", err)
		}
	})
}
