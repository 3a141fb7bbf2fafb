package partition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/rewind-io/rewind/engine/internal/record"
)

func bind(t *testing.T, p *Partition, key string, target uint32, r record.Record) Bound {
	t.Helper()
	out, err := p.Bind(context.Background(), []Binding{{Key: []byte(key), Target: target, Hash: PayloadHash(&r)}})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// TestBindingAnswersWithTheFirstRecord: the first binding of a key wins; a
// retry (same contents) is sent where the first went, other contents are a
// conflict; the binding survives a restart.
func TestBindingAnswersWithTheFirstRecord(t *testing.T) {
	fs := vfs.NewMem()
	h := newHarness(t, fs, 64<<20)
	win := func(c *Config) { c.DedupeWindow = time.Hour }
	p := h.add(0, win)
	v := record.Record{Key: []byte("a"), Value: []byte("v")}
	other := record.Record{Key: []byte("b"), Value: []byte("v")}
	if got := bind(t, p, "ik", 3, v); got != (Bound{Partition: 3, Same: true}) {
		t.Fatalf("first binding: %+v", got)
	}
	if got := bind(t, p, "ik", 5, v); got != (Bound{Partition: 3, Same: true}) {
		t.Fatalf("same record for partition 5: %+v, want it sent to 3", got)
	}
	h.restart()
	p = h.add(0, win)
	if got := bind(t, p, "ik", 5, other); got != (Bound{Partition: 3}) {
		t.Fatalf("other contents after restart: %+v, want a conflict naming 3", got)
	}
	if _, err := p.Bind(context.Background(), []Binding{{Key: []byte("x"), Target: 0}}); !errors.Is(err, ErrBindSelf) {
		t.Fatalf("binding to the home partition: %v", err)
	}
	if p.Bounds().Next != 0 {
		t.Fatal("a binding stored a record")
	}
}

// TestHomePartitionHonoursBindings: a record sent to its key's home
// partition while the key is bound elsewhere is moved there (same
// contents) or refused (other contents); a key whose record is stored in
// the home partition answers a binding with that record.
func TestHomePartitionHonoursBindings(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.DedupeWindow = time.Hour })
	ctx := context.Background()
	r := record.Record{Value: []byte("v"), IdempotencyKey: []byte("ik")}
	bind(t, p, "ik", 2, r)
	a, err := p.Append(ctx, []record.Record{{Value: []byte("new"), IdempotencyKey: []byte("n")}, r})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Elsewhere) != 1 || a.Elsewhere[0] != (Moved{Index: 1, Partition: 2}) || p.Bounds().Next != 1 {
		t.Fatalf("elsewhere %+v, end %d: want record 1 moved to 2 and record 0 stored", a.Elsewhere, p.Bounds().Next)
	}
	changed := r
	changed.Value = []byte("changed")
	_, err = p.Append(ctx, []record.Record{changed})
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Partition != 2 || ce.Stored {
		t.Fatalf("other contents: %v", err)
	}
	// "n" is stored here at offset 0: a binding gets that record.
	stored := record.Record{Value: []byte("new"), IdempotencyKey: []byte("n")}
	if got := bind(t, p, "n", 1, stored); !got.Same || !got.Stored || got.Partition != 0 || got.Offset != 0 {
		t.Fatalf("binding a stored key: %+v", got)
	}
	if got := bind(t, p, "n", 1, r); got.Same || !got.Stored {
		t.Fatalf("binding a stored key with other contents: %+v", got)
	}
}

// TestBindingsExpireWithTheWindow: a binding is forgotten after the window,
// counted from the bind, like a record row.
func TestBindingsExpireWithTheWindow(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.DedupeWindow = time.Duration(1000) })
	h.clock.Store(10_000)
	bind(t, p, "ik", 1, record.Record{Value: []byte("a")})
	h.clock.Store(11_001)
	if got := bind(t, p, "ik", 2, record.Record{Value: []byte("b")}); got != (Bound{Partition: 2, Same: true}) {
		t.Fatalf("past the window: %+v, want a fresh binding", got)
	}
	h.clock.Store(20_000)
	bind(t, p, "other", 1, record.Record{})
	if e, ok, _ := p.lookupKey([]byte("ik")); ok {
		t.Fatalf("expired binding still there: %+v", e)
	}
}

// byHand drives a partition's state machine without raft, as a replica
// applies what a leader proposed.
type byHand struct {
	t     *testing.T
	db    *pebble.DB
	index uint64
}

func newByHand(t *testing.T) *byHand {
	db, err := pebble.Open("d", &pebble.Options{FS: vfs.NewMem(), Logger: nopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &byHand{t: t, db: db}
}

func (h *byHand) open() *Partition {
	h.t.Helper()
	p, err := Open(Config{Group: 5, DB: h.db, Host: nopWaker{}, Cache: NewCache(1 << 20), DedupeWindow: time.Hour, KeyIndex: true, Now: func() int64 { return 1000 }})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *byHand) apply(p *Partition, data [][]byte) {
	h.t.Helper()
	w := h.db.NewBatch()
	var ents []*pb.Entry
	for _, d := range data {
		h.index++
		ents = append(ents, &pb.Entry{Index: proto.Uint64(h.index), Term: proto.Uint64(1), Data: d})
	}
	if err := p.Apply(w, ents); err != nil {
		h.t.Fatal(err)
	}
	if err := w.Commit(pebble.Sync); err != nil {
		h.t.Fatal(err)
	}
	p.Durable()
}

// queueBind queues a bind and takes the proposals, without waiting.
func queueBind(p *Partition, bs []Binding) (*pendingBind, [][]byte) {
	pb := &pendingBind{bindings: bs, done: make(chan struct{})}
	p.mu.binds = append(p.mu.binds, pb)
	return pb, p.TakeProposals(nil)
}

// TestApplyDecidesBetweenABindAndABatch: a bind and a batch of one key,
// proposed by different incarnations that did not know of each other, are
// decided by log order on every replica: whichever is applied first wins.
func TestApplyDecidesBetweenABindAndABatch(t *testing.T) {
	r := record.Record{Value: []byte("v"), IdempotencyKey: []byte("ik")}
	b := []Binding{{Key: []byte("ik"), Target: 3, Hash: PayloadHash(&r)}}
	t.Run("bind first", func(t *testing.T) {
		h := newByHand(t)
		binder, appender := h.open(), h.open()
		pbind, d1 := queueBind(binder, b)
		a, err := appender.Enqueue(context.Background(), []record.Record{r})
		if err != nil {
			t.Fatal(err)
		}
		d2 := appender.TakeProposals(nil)
		h.apply(binder, append(d1, d2...))
		<-pbind.done
		if pbind.err != nil || pbind.out[0] != (Bound{Partition: 3, Same: true}) {
			t.Fatalf("bind: %+v %v", pbind.out, pbind.err)
		}
		if binder.Bounds().Next != 0 {
			t.Fatal("a batch of a bound key got an offset")
		}
		_ = a // proposed by another "node": its publisher is not here
	})
	t.Run("batch first", func(t *testing.T) {
		h := newByHand(t)
		binder, appender := h.open(), h.open()
		if _, err := appender.Enqueue(context.Background(), []record.Record{r}); err != nil {
			t.Fatal(err)
		}
		d1 := appender.TakeProposals(nil)
		pbind, d2 := queueBind(binder, b)
		h.apply(binder, append(d1, d2...))
		<-pbind.done
		if got := pbind.out[0]; got.Partition != binder.cfg.Index || !got.Stored || !got.Same || binder.Bounds().Next != 1 {
			t.Fatalf("bind after the batch: %+v, end %d", got, binder.Bounds().Next)
		}
	})
}

// TestBatchAfterAnotherIncarnationsBindIsChecked: a proposer whose batches
// usually skip the lookup at apply (they were checked against everything
// before them) must look up a batch checked before another incarnation's
// bind was applied.
func TestBatchAfterAnotherIncarnationsBindIsChecked(t *testing.T) {
	h := newByHand(t)
	leader, old := h.open(), h.open()
	// The leader's own batch first: later ones of it skip the lookup.
	if _, err := leader.Enqueue(context.Background(), keyed("x", 1)); err != nil {
		t.Fatal(err)
	}
	h.apply(leader, leader.TakeProposals(nil))
	r := record.Record{Value: []byte("v"), IdempotencyKey: []byte("ik")}
	if _, err := leader.Enqueue(context.Background(), []record.Record{r}); err != nil {
		t.Fatal(err)
	}
	d1 := leader.TakeProposals(nil)
	_, d2 := queueBind(old, []Binding{{Key: []byte("ik"), Target: 3, Hash: PayloadHash(&r)}})
	h.apply(leader, append(d2, d1...))
	if leader.Bounds().Next != 1 {
		t.Fatalf("end %d: the batch of a key bound before it was stored", leader.Bounds().Next)
	}
}

// TestSnapshotCarriesBindingsBelowTheJump: a replica that jumps gets the
// binding rows of bind entries below the jump, not those the retained log
// brings.
func TestSnapshotCarriesBindingsBelowTheJump(t *testing.T) {
	h := newByHand(t)
	p := h.open()
	_, d1 := queueBind(p, []Binding{{Key: []byte("below"), Target: 1}})
	h.apply(p, d1)
	_, d2 := queueBind(p, []Binding{{Key: []byte("above"), Target: 1}})
	h.apply(p, d2)
	data, err := p.SnapshotData(1)
	if err != nil {
		t.Fatal(err)
	}
	h2 := newByHand(t)
	q := h2.open()
	w := h2.db.NewBatch()
	if err := q.RestoreSnapshot(w, 1, data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	q.Durable()
	if _, ok, _ := q.lookupKey([]byte("below")); !ok {
		t.Fatal("binding below the jump missing")
	}
	if _, ok, _ := q.lookupKey([]byte("above")); ok {
		t.Fatal("binding of a retained entry in the snapshot")
	}
	// Applying the retained entry gives the same row as on the leader.
	h2.index = 1
	h2.apply(q, d2)
	want, _, _ := p.lookupKey([]byte("above"))
	if got, ok, _ := q.lookupKey([]byte("above")); !ok || got != want {
		t.Fatalf("row after replay %+v, leader's %+v", got, want)
	}
}
