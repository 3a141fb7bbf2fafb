package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/rewind-io/rewind/engine/internal/record"
)

func keyed(prefix string, n int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		out[i] = record.Record{Value: []byte(fmt.Sprintf("%s-v%d", prefix, i)), IdempotencyKey: []byte(fmt.Sprintf("%s-k%d", prefix, i))}
	}
	return out
}

type result struct {
	off  uint64
	t    int64
	dup  bool
	seen bool
}

func results(a *Append) []result {
	out := make([]result, len(a.Records))
	a.Each(func(i int, s Stored) {
		if out[i].seen {
			panic(fmt.Sprintf("record %d reported twice", i))
		}
		out[i] = result{s.Offset, s.AppendTime, s.Duplicate, true}
	})
	return out
}

func TestDuplicatesGetTheOriginalOffset(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.DedupeWindow = time.Hour })
	ctx := context.Background()
	first, err := p.Append(ctx, keyed("a", 5))
	if err != nil {
		t.Fatal(err)
	}
	orig := results(first)
	// The same five again, mixed with two new ones.
	again := append(keyed("a", 5)[1:4], record.Record{Value: []byte("new")}, keyed("b", 1)[0])
	a, err := p.Append(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	got := results(a)
	for i := range 3 {
		if !got[i].dup || got[i].off != orig[i+1].off || got[i].t != orig[i+1].t {
			t.Fatalf("record %d: %+v, want a duplicate of %+v", i, got[i], orig[i+1])
		}
	}
	if got[3].dup || got[4].dup || got[3].off != 5 || got[4].off != 6 {
		t.Fatalf("new records: %+v %+v, want offsets 5 and 6", got[3], got[4])
	}
	if b := p.Bounds(); b.Next != 7 {
		t.Fatalf("end %d: duplicates were stored", b.Next)
	}
	// An append made only of duplicates stores nothing and still answers.
	a, err = p.Append(ctx, keyed("a", 2))
	if err != nil {
		t.Fatal(err)
	}
	if r := results(a); !r[0].dup || !r[1].dup || p.Bounds().Next != 7 {
		t.Fatalf("all-duplicate append: %+v, end %d", r, p.Bounds().Next)
	}
}

func TestReusedKeyWithOtherContentsIsAConflict(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.DedupeWindow = time.Hour })
	ctx := context.Background()
	if _, err := p.Append(ctx, keyed("a", 3)); err != nil {
		t.Fatal(err)
	}
	changed := keyed("a", 3)
	changed[2].Value = []byte("something else")
	_, err := p.Append(ctx, changed)
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || ce.Index != 2 || ce.Offset != 2 {
		t.Fatalf("conflict: %v", err)
	}
	if p.Bounds().Next != 3 {
		t.Fatalf("a conflicting append stored records")
	}
}

// TestConcurrentAppendsOfOneKeyStoreItOnce races many appends of the same
// key: exactly one is stored, every other answer is a duplicate of it.
func TestConcurrentAppendsOfOneKeyStoreItOnce(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.DedupeWindow = time.Hour })
	var wg sync.WaitGroup
	res := make([]result, 20)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := p.Append(context.Background(), keyed("same", 1))
			if err != nil {
				t.Error(err)
				return
			}
			res[i] = results(a)[0]
		}()
	}
	wg.Wait()
	stored := 0
	for _, r := range res {
		if !r.dup {
			stored++
		}
		if r.off != 0 {
			t.Fatalf("answer %+v: not offset 0", r)
		}
	}
	if stored != 1 || p.Bounds().Next != 1 {
		t.Fatalf("%d appends stored the key, end %d", stored, p.Bounds().Next)
	}
}

func TestDedupeWindowExpiresAndSurvivesRestart(t *testing.T) {
	fs := vfs.NewMem()
	h := newHarness(t, fs, 64<<20)
	win := func(c *Config) { c.DedupeWindow = time.Duration(1000) }
	p := h.add(0, win)
	ctx := context.Background()
	h.clock.Store(10_000)
	if _, err := p.Append(ctx, keyed("a", 2)); err != nil {
		t.Fatal(err)
	}
	h.restart()
	p = h.add(0, win)
	h.clock.Store(10_900) // within the window: still a duplicate after restart
	a, err := p.Append(ctx, keyed("a", 1))
	if err != nil || !results(a)[0].dup {
		t.Fatalf("after restart, within the window: %v %+v", err, results(a))
	}
	h.clock.Store(11_001) // past the window: stored again, new offset
	a, err = p.Append(ctx, keyed("a", 1))
	if err != nil || results(a)[0].dup || results(a)[0].off != 2 {
		t.Fatalf("past the window: %v %+v", err, results(a))
	}
	// Later appends expire the old rows: only a-k0's new row and the rows
	// of the latest batch remain.
	h.clock.Store(20_000)
	if _, err := p.Append(ctx, keyed("z", 1)); err != nil {
		t.Fatal(err)
	}
	if e, ok, _ := p.lookupKey([]byte("a-k1")); ok {
		t.Fatalf("expired row of a-k1 still there: %+v", e)
	}
	if _, ok, _ := p.lookupKey([]byte("a-k0")); ok {
		t.Fatal("expired re-published row of a-k0 still there")
	}
	if _, ok, _ := p.lookupKey([]byte("z-k0")); !ok {
		t.Fatal("fresh row missing")
	}
}

type nopWaker struct{}

func (nopWaker) Wake(uint64) {}

// TestApplyRejectsABatchWithAStoredKey drives the state machine by hand, as
// a replica would apply entries proposed by a leader that did not know a
// key was stored (an old leader): the batch is skipped by apply, no offset
// is assigned, and its publisher learns the outcome is unknown.
func TestApplyRejectsABatchWithAStoredKey(t *testing.T) {
	db, err := pebble.Open("d", &pebble.Options{FS: vfs.NewMem(), Logger: nopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clock := int64(1000)
	p, err := Open(Config{Group: 5, DB: db, Host: nopWaker{}, Cache: NewCache(1 << 20), DedupeWindow: time.Hour, Now: func() int64 { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	index := uint64(0)
	apply := func(data [][]byte) {
		t.Helper()
		w := db.NewBatch()
		var ents []*pb.Entry
		for _, d := range data {
			index++
			ents = append(ents, &pb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(1), Data: d})
		}
		if err := p.Apply(w, ents); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		p.Durable()
	}
	take := func(p *Partition, recs []record.Record) (*Append, [][]byte) {
		a, err := p.Enqueue(context.Background(), recs)
		if err != nil {
			t.Fatal(err)
		}
		return a, p.TakeProposals(nil)
	}
	a1, d1 := take(p, keyed("k", 2))
	// A second proposer incarnation over the same state (an old leader, or
	// the process before a restart) proposes the same keys, not knowing
	// about the first batch.
	old, err := Open(Config{Group: 5, DB: db, Host: nopWaker{}, Cache: NewCache(1 << 20), DedupeWindow: time.Hour, Now: func() int64 { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	_, d2 := take(old, keyed("k", 2))
	apply(append(d1, d2...))
	if err := a1.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.Bounds().Next != 2 {
		t.Fatalf("end %d, want 2: the duplicate batch got offsets", p.Bounds().Next)
	}
	// The same proposer's own next batches need no lookups at apply; a
	// stored key still comes back as a duplicate from the proposer.
	a3, d3 := take(p, keyed("k", 3))
	if len(d3) != 1 {
		t.Fatalf("%d entries proposed", len(d3))
	}
	apply(d3)
	if err := a3.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := results(a3); !r[0].dup || !r[1].dup || r[2].dup || r[2].off != 2 {
		t.Fatalf("third append: %+v", r)
	}
	if p.Bounds().Next != 3 {
		t.Fatalf("end %d, want 3", p.Bounds().Next)
	}
}

type nopLogger struct{}

func (nopLogger) Infof(string, ...any)           {}
func (nopLogger) Errorf(string, ...any)          {}
func (nopLogger) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
