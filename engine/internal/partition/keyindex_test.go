package partition

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/rewind-io/rewind/engine/internal/record"
)

func rec(key, value string, tags ...string) record.Record {
	r := record.Record{Key: []byte(key), Value: []byte(value)}
	for _, t := range tags {
		name := TagHeader
		if len(t) > 5 && t[:5] == "type=" {
			name, t = TypeHeader, t[5:]
		}
		r.Headers = append(r.Headers, record.Header{Key: []byte(name), Value: []byte(t)})
	}
	return r
}

// stored returns each record's (offset, version, has version) of a.
func stored(a *Append) []Stored {
	out := make([]Stored, len(a.Records))
	a.Each(func(i int, s Stored) { out[i] = s })
	return out
}

// versionsRead reads the visible log and returns "key@version" per record
// ("-" for keyless), checking that every delivered batch carries them.
func versionsRead(t *testing.T, p *Partition) []string {
	t.Helper()
	r := p.NewReader()
	defer r.Close()
	var out []string
	b := p.Bounds()
	for off := b.LogStart; off < b.Next; {
		batch, _, err := r.Read(off)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		vs := batch.Versions()
		it := batch.Records.Iter()
		var rc record.Record
		for it.Next(&rc) {
			v, ok := vs.Lookup(rc.OffsetDelta)
			switch {
			case len(rc.Key) == 0:
				out = append(out, "-")
			case !ok:
				t.Fatalf("record %q at %d has no version", rc.Key, batch.Base+uint64(rc.OffsetDelta))
			default:
				out = append(out, fmt.Sprintf("%s@%d", rc.Key, v))
			}
		}
		off = batch.End()
	}
	return out
}

func TestKeyVersionsAreDensePerKey(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	ctx := context.Background()
	a, err := p.Append(ctx, []record.Record{rec("a", "1"), rec("b", "1"), rec("a", "2"), {Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	got := stored(a)
	want := []struct {
		v  uint64
		ok bool
	}{{0, true}, {0, true}, {1, true}, {0, false}}
	for i, w := range want {
		if got[i].Version != w.v || got[i].HasVersion != w.ok {
			t.Fatalf("record %d: version %d (%v), want %d (%v)", i, got[i].Version, got[i].HasVersion, w.v, w.ok)
		}
	}
	if _, err := p.Append(ctx, []record.Record{rec("a", "3")}); err != nil {
		t.Fatal(err)
	}
	// The versions survive a restart (they are read from the store, not
	// the cache) and carry on from the stored heads.
	h.restart()
	p = h.add(0, nil)
	a, err = p.Append(ctx, []record.Record{rec("b", "2"), rec("a", "4")})
	if err != nil {
		t.Fatal(err)
	}
	if s := stored(a); s[0].Version != 1 || s[1].Version != 3 {
		t.Fatalf("after restart: %+v", s)
	}
	if got, want := fmt.Sprint(versionsRead(t, p)), "[a@0 b@0 a@1 - a@2 b@1 a@3]"; got != want {
		t.Fatalf("read %s, want %s", got, want)
	}
	head, ok, err := p.KeyHead([]byte("a"))
	if err != nil || !ok || head != (KeyEntry{Version: 3, Offset: 6}) {
		t.Fatalf("head of a: %+v %v %v", head, ok, err)
	}
	es, err := p.KeyEntries([]byte("a"), 1, 2)
	if err != nil || fmt.Sprint(es) != "[{1 2} {2 4}]" {
		t.Fatalf("entries of a from 1: %v %v", es, err)
	}
	if v, ok, err := p.KeyVersionAt([]byte("a"), 3); err != nil || !ok || v != 2 {
		t.Fatalf("version of a at offset 3: %d %v %v", v, ok, err)
	}
	if _, ok, _ := p.KeyHead([]byte("zz")); ok {
		t.Fatal("a key never written has a head")
	}
}

func TestConditionalAppends(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	ctx := context.Background()
	appendIf := func(c Conditions, rs ...record.Record) (*Append, error) {
		t.Helper()
		a, err := p.EnqueueIf(ctx, rs, &c)
		if err != nil {
			t.Fatal(err)
		}
		return a, a.Wait(ctx)
	}
	k := func(key string, e Expectation, v uint64) Conditions {
		return Conditions{Keys: []KeyCondition{{Key: []byte(key), Expect: e, Version: v}}}
	}
	if _, err := appendIf(k("acc", ExpectNone, 0), rec("acc", "open")); err != nil {
		t.Fatalf("none on a new key: %v", err)
	}
	_, err := appendIf(k("acc", ExpectNone, 0), rec("acc", "open again"))
	var ce *ConditionError
	if !errors.As(err, &ce) || !ce.Exists || ce.Actual != 0 || string(ce.Key) != "acc" || !errors.Is(err, ErrCondition) {
		t.Fatalf("none on an existing key: %v", err)
	}
	if _, err := appendIf(k("acc", ExpectVersion, 0), rec("acc", "deposit")); err != nil {
		t.Fatalf("the loaded version: %v", err)
	}
	if _, err := appendIf(k("acc", ExpectVersion, 0), rec("acc", "withdraw")); !errors.As(err, &ce) || ce.Actual != 1 {
		t.Fatalf("a stale version: %v", err)
	}
	if _, err := appendIf(k("new", ExpectExists, 0), rec("new", "x")); !errors.As(err, &ce) || ce.Exists {
		t.Fatalf("exists on a new key: %v", err)
	}
	// Several keys, all or nothing: one stale expectation stores none.
	end := p.Bounds().Next
	both := Conditions{Keys: []KeyCondition{{Key: []byte("acc"), Expect: ExpectVersion, Version: 1}, {Key: []byte("other"), Expect: ExpectVersion, Version: 5}}}
	if _, err := appendIf(both, rec("acc", "move out"), rec("other", "move in")); !errors.As(err, &ce) || string(ce.Key) != "other" {
		t.Fatalf("multi-key with one stale: %v", err)
	}
	if p.Bounds().Next != end {
		t.Fatal("a refused multi-key append stored records")
	}
	both.Keys[1] = KeyCondition{Key: []byte("other"), Expect: ExpectNone}
	a, err := appendIf(both, rec("acc", "move out"), rec("other", "move in"))
	if err != nil {
		t.Fatalf("multi-key: %v", err)
	}
	if s := stored(a); s[0].Version != 2 || s[1].Version != 0 || s[1].Offset != s[0].Offset+1 {
		t.Fatalf("multi-key stored %+v", s)
	}
	// Unconditional appends queued with conditional ones go in their own
	// batches and are never refused.
	var plain []*Append
	for i := range 5 {
		a, err := p.Enqueue(ctx, []record.Record{rec("acc", fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		plain = append(plain, a)
		if _, err := p.EnqueueIf(ctx, []record.Record{rec("acc", "racing")}, &Conditions{Keys: []KeyCondition{{Key: []byte("acc"), Expect: ExpectVersion, Version: 2}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range plain {
		if err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTagConditions(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	ctx := context.Background()
	if _, err := p.Append(ctx, []record.Record{
		rec("", "c42 created", "course:42", "type=CourseCreated"),
		rec("", "s7 joined c42", "course:42", "student:7", "type=StudentSubscribed"),
		rec("", "s8 joined c43", "course:43", "student:8", "type=StudentSubscribed"),
	}); err != nil {
		t.Fatal(err)
	}
	q := Query{{Types: []string{"StudentSubscribed"}, Tags: []string{"course:42"}}}
	offs, err := p.QueryOffsets(q, NoPosition, ^uint64(0), 0)
	if err != nil || fmt.Sprint(offs) != "[1]" {
		t.Fatalf("query %v: %v %v", q, offs, err)
	}
	any := Query{{Tags: []string{"student:7"}}, {Types: []string{"CourseCreated"}}}
	if offs, err := p.QueryOffsets(any, NoPosition, ^uint64(0), 0); err != nil || fmt.Sprint(offs) != "[0 1]" {
		t.Fatalf("query %v: %v %v", any, offs, err)
	}
	// The DCB loop: read at position 2, append if nothing matching came
	// after it; a second writer with the same read is refused.
	cond := &Conditions{Tags: []TagCondition{{Query: Query{{Tags: []string{"course:42"}}}, After: 2}}}
	if _, err := p.EnqueueIf(ctx, []record.Record{rec("", "s9 joined c42", "course:42", "student:9")}, cond); err != nil {
		t.Fatal(err)
	}
	a, err := p.EnqueueIf(ctx, []record.Record{rec("", "s10 joined c42", "course:42", "student:10")}, cond)
	if err != nil {
		t.Fatal(err)
	}
	var ce *ConditionError
	if err := a.Wait(ctx); !errors.As(err, &ce) || !ce.Tag || ce.Offset != 3 {
		t.Fatalf("second writer: %v", err)
	}
	// A record matching only part of an item does not count.
	cond = &Conditions{Tags: []TagCondition{{Query: Query{{Tags: []string{"course:43", "student:7"}}}, After: NoPosition}}}
	if _, err := p.EnqueueIf(ctx, []record.Record{rec("", "x", "course:43")}, cond); err != nil {
		t.Fatal(err)
	}
}

// proposer queues an append on p and returns the entry it proposes.
func propose(t *testing.T, p *Partition, c *Conditions, rs ...record.Record) (*Append, []byte) {
	t.Helper()
	a, err := p.EnqueueIf(context.Background(), rs, c)
	if err != nil {
		t.Fatal(err)
	}
	d := p.TakeProposals(nil)
	if len(d) != 1 {
		t.Fatalf("%d entries proposed", len(d))
	}
	return a, d[0]
}

// TestConditionDecidedTheSameAcrossLeaders: two leaders (an old one that
// has not heard of the new one) both propose "append if the key is at
// version 0". Every replica applies the log in the same order and decides
// the same: the first entry wins, the second is refused, whichever
// replica, and also on a replica that restarted between the two entries
// (the decision reads the store, not memory).
func TestConditionDecidedTheSameAcrossLeaders(t *testing.T) {
	seed := func(h *byHand, p *Partition) {
		_, e := propose(t, p, nil, rec("k", "v0"))
		h.apply(p, [][]byte{e})
	}
	cond := &Conditions{Keys: []KeyCondition{{Key: []byte("k"), Expect: ExpectVersion, Version: 0}}}
	oldLeader, newLeader := newByHand(t), newByHand(t)
	po, pn := oldLeader.open(), newLeader.open()
	seed(oldLeader, po)
	seed(newLeader, pn)
	ao, eo := propose(t, po, cond, rec("k", "from the old leader"))
	an, en := propose(t, pn, cond, rec("k", "from the new leader"))
	// The new leader's entry is committed first (the old one's is
	// appended after it in the new term).
	log := [][]byte{en, eo}
	outcome := func(p *Partition) string {
		es, err := p.KeyEntries([]byte("k"), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(es, p.Bounds().Next)
	}
	var results []string
	for _, restartBetween := range []bool{false, true} {
		h := newByHand(t)
		p := h.open()
		seed(h, p)
		h.apply(p, log[:1])
		if restartBetween {
			p = h.open()
		}
		h.apply(p, log[1:])
		results = append(results, outcome(p))
	}
	oldLeader.apply(po, log)
	newLeader.apply(pn, log)
	results = append(results, outcome(po), outcome(pn))
	for _, r := range results[1:] {
		if r != results[0] {
			t.Fatalf("replicas decided differently: %q", results)
		}
	}
	if results[0] != "[{0 0} {1 1}] 2" {
		t.Fatalf("log %s, want the first entry only", results[0])
	}
	var ce *ConditionError
	if err := ao.Wait(context.Background()); !errors.As(err, &ce) || ce.Actual != 1 {
		t.Fatalf("old leader's append: %v", err)
	}
	if err := an.Wait(context.Background()); err != nil {
		t.Fatalf("new leader's append: %v", err)
	}
}

// TestRewrittenEntryIndexesTheSame: a replica that receives a batch after
// compaction rewrote it on the leader (a lagging follower reads it from
// the leader's store) gives the later records the same versions and
// decides tag conditions the same, thanks to the dropped records' ghosts.
func TestRewrittenEntryIndexesTheSame(t *testing.T) {
	leader := newByHand(t)
	lp := leader.open()
	_, e1 := propose(t, lp, nil, rec("k", "v0", "t:1"), rec("k", "v1"), rec("j", "v0"))
	// Compaction drops the first record of k (superseded by v1), here in
	// the pass that applied it.
	w := leader.db.NewBatch()
	leader.index++
	if err := lp.Apply(w, []*pb.Entry{{Index: proto.Uint64(leader.index), Term: proto.Uint64(1), Data: e1}}); err != nil {
		t.Fatal(err)
	}
	row, ok, err := lp.rowAt(0)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, _, _, err := lp.rewriteBatch(w, 0, row, func(d uint32) bool { return d == 0 }, true); err != nil {
		t.Fatal(err)
	}
	rewritten := lp.passEntries[row.raftIndex]
	if err := w.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	lp.Durable()
	_, e2 := propose(t, lp, &Conditions{Tags: []TagCondition{{Query: Query{{Tags: []string{"t:1"}}}, After: NoPosition}}}, rec("k", "v2"))
	leader.apply(lp, [][]byte{e2})

	lag := newByHand(t)
	fp := lag.open()
	lag.apply(fp, [][]byte{rewritten, e2})
	state := func(p *Partition) string {
		var out []string
		for _, k := range []string{"k", "j"} {
			es, err := p.KeyEntries([]byte(k), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(k, es))
		}
		return fmt.Sprint(out, p.Bounds().Next)
	}
	if got, want := state(fp), state(lp); got != want {
		t.Fatalf("lagging replica %s, leader %s", got, want)
	}
	if got := fmt.Sprint(versionsRead(t, lp)); got != "[k@1 j@0]" {
		t.Fatalf("leader read %s", got)
	}
	if lp.Bounds().Next != 3 {
		t.Fatal("the tag condition did not see the compacted record's tag")
	}
	h, ok, err := fp.KeyHead([]byte("k"))
	if err != nil || !ok || h.Version != 1 {
		t.Fatalf("lagging replica's head of k: %+v %v %v", h, ok, err)
	}
}

// TestSnapshotCarriesTheIndexes: a replica restored from a snapshot taken
// past some batches continues the versions from the leader's heads.
func TestSnapshotCarriesTheIndexes(t *testing.T) {
	leader := newByHand(t)
	lp := leader.open()
	var ents [][]byte
	for i := range 3 {
		_, e := propose(t, lp, nil, rec("k", fmt.Sprint(i), "t:x"))
		leader.apply(lp, [][]byte{e})
		ents = append(ents, e)
	}
	snap, err := lp.SnapshotData(2) // the jump: after entry 2
	if err != nil {
		t.Fatal(err)
	}
	e3data := ents[2]
	f := newByHand(t)
	fp := f.open()
	w := f.db.NewBatch()
	if err := fp.RestoreSnapshot(w, 2, snap); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	fp.Durable()
	f.index = 2
	f.apply(fp, [][]byte{e3data})
	_, e := propose(t, lp, nil, rec("k", "3"))
	leader.apply(lp, [][]byte{e})
	f.apply(fp, [][]byte{e})
	h, ok, err := fp.KeyHead([]byte("k"))
	if err != nil || !ok || h.Version != 3 || h.Offset != 3 {
		t.Fatalf("restored replica's head: %+v %v %v", h, ok, err)
	}
	if offs, err := fp.QueryOffsets(Query{{Tags: []string{"t:x"}}}, NoPosition, ^uint64(0), 0); err != nil || fmt.Sprint(offs) != "[0 1 2]" {
		t.Fatalf("restored replica's tag index: %v %v", offs, err)
	}
}

// TestConditionsAgainstAModel: random conditional and plain appends over a
// few keys and tags, checked against a model of the log.
func TestConditionsAgainstAModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			h := newByHand(t)
			p := h.open()
			heads := map[string]int{} // last version, -1 none
			var tagsAt [][]string
			keysN := []string{"a", "b", "c"}
			tagsN := []string{"x", "y", "z"}
			for step := range 200 {
				var rs []record.Record
				for range 1 + rng.IntN(3) {
					var tags []string
					for _, tg := range tagsN {
						if rng.IntN(3) == 0 {
							tags = append(tags, tg)
						}
					}
					rs = append(rs, rec(keysN[rng.IntN(len(keysN))], fmt.Sprint(step), tags...))
				}
				var c Conditions
				if rng.IntN(2) == 0 {
					key := keysN[rng.IntN(len(keysN))]
					kc := KeyCondition{Key: []byte(key), Expect: Expectation(rng.IntN(4))}
					kc.Version = uint64(max(0, heads[key]-1+rng.IntN(3)))
					c.Keys = append(c.Keys, kc)
				}
				if rng.IntN(2) == 0 {
					item := QueryItem{Tags: []string{tagsN[rng.IntN(len(tagsN))]}}
					c.Tags = append(c.Tags, TagCondition{Query: Query{item}, After: int64(len(tagsAt)) - 1 - int64(rng.IntN(4))})
				}
				// The model's verdict.
				ok := true
				for _, kc := range c.Keys {
					hv, has := heads[string(kc.Key)]
					has = has && hv >= 0
					switch kc.Expect {
					case ExpectNone:
						ok = ok && !has
					case ExpectExists:
						ok = ok && has
					case ExpectVersion:
						ok = ok && has && uint64(hv) == kc.Version
					}
				}
				for _, tc := range c.Tags {
					for off := max(0, tc.After+1); off < int64(len(tagsAt)); off++ {
						for _, tg := range tagsAt[off] {
							if tg == tc.Query[0].Tags[0] {
								ok = false
							}
						}
					}
				}
				a, e := propose(t, p, &c, rs...)
				h.apply(p, [][]byte{e})
				err := a.Wait(context.Background())
				if ok != (err == nil) {
					t.Fatalf("step %d: conditions %+v: model says %v, partition says %v", step, c, ok, err)
				}
				if !ok {
					continue
				}
				for i, s := range stored(a) {
					key := string(rs[i].Key)
					hv, has := heads[key]
					if !has {
						hv = -1
					}
					if s.Version != uint64(hv+1) {
						t.Fatalf("step %d: %s got version %d, want %d", step, key, s.Version, hv+1)
					}
					heads[key] = hv + 1
					var tags []string
					for _, hd := range rs[i].Headers {
						tags = append(tags, string(hd.Value))
					}
					tagsAt = append(tagsAt, tags)
				}
			}
		})
	}
}

func FuzzBatchExt(f *testing.F) {
	x := batchExt{conds: Conditions{
		Keys: []KeyCondition{{Key: []byte("k"), Expect: ExpectVersion, Version: 3}},
		Tags: []TagCondition{{Query: Query{{Types: []string{"T"}, Tags: []string{"a", "b"}}}, After: 5}},
	}, ghosts: []ghost{{delta: 2, key: []byte("k"), terms: [][]byte{[]byte("ta")}}}}
	f.Add(x.encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := decodeExt(b)
		if err != nil {
			return
		}
		y, err := decodeExt(x.encode())
		if err != nil || fmt.Sprint(x) != fmt.Sprint(y) {
			t.Fatalf("re-encoding changed %+v into %+v (%v)", x, y, err)
		}
	})
}

// wantVersions is what versionsRead returns for fill's records from
// offset from to 50 (key k<j> at offset 5i+j has version i).
func wantVersions(from int) string {
	var out []string
	for off := from; off < 50; off++ {
		out = append(out, fmt.Sprintf("k%d@%d", off%5, off/5))
	}
	return fmt.Sprint(out)
}

// TestKeyVersionsCoverTieredHistory: records whose batches live only in
// the object store keep their versions, and the index still finds them,
// also after a restart.
func TestKeyVersionsCoverTieredHistory(t *testing.T) {
	h, p, st, _ := tiered(t, 200)
	check := func(p *Partition) {
		t.Helper()
		if got := fmt.Sprint(versionsRead(t, p)); got != wantVersions(0) {
			t.Fatalf("tiered read: %s", got)
		}
		es, err := p.KeyEntries([]byte("k2"), 0, 0)
		if err != nil || len(es) != 10 || es[0] != (KeyEntry{Version: 0, Offset: 2}) {
			t.Fatalf("k2's entries: %v %v", es, err)
		}
	}
	check(p)
	h.restart()
	check(h.add(0, func(c *Config) { c.Tier = st }))
}

// TestKeyVersionsUnderRetention: retention removes records, not versions:
// the survivors keep their numbers, the key's earliest entry is the first
// still held, and new records continue from the head.
func TestKeyVersionsUnderRetention(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	fill(t, h, p, 10, 5)
	ctx := context.Background()
	if err := p.Truncate(ctx, 12); err != nil { // inside the third batch
		t.Fatal(err)
	}
	if got := fmt.Sprint(versionsRead(t, p)); got != wantVersions(12) {
		t.Fatalf("after retention: %s", got)
	}
	es, err := p.KeyEntries([]byte("k1"), 0, 1)
	if err != nil || len(es) != 1 || es[0] != (KeyEntry{Version: 3, Offset: 16}) {
		t.Fatalf("k1's earliest held: %v %v", es, err)
	}
	a, err := p.Append(ctx, []record.Record{rec("k1", "new")})
	if err != nil || stored(a)[0].Version != 10 {
		t.Fatalf("append after retention: %+v %v", stored(a), err)
	}
	// Everything removed: the key has no record held, its head remains.
	if err := p.Truncate(ctx, p.Bounds().Next); err != nil {
		t.Fatal(err)
	}
	if es, err := p.KeyEntries([]byte("k1"), 0, 0); err != nil || len(es) != 0 {
		t.Fatalf("entries after total retention: %v %v", es, err)
	}
	if h, ok, err := p.KeyHead([]byte("k1")); err != nil || !ok || h.Version != 10 {
		t.Fatalf("head after total retention: %+v %v %v", h, ok, err)
	}
	a, err = p.Append(ctx, []record.Record{rec("k1", "newer")})
	if err != nil || stored(a)[0].Version != 11 {
		t.Fatalf("append after total retention: %+v %v", stored(a), err)
	}
}

// TestKeyVersionsUnderCompaction: key compaction keeps each key's latest
// record with its number, and the key continues from it.
func TestKeyVersionsUnderCompaction(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.Policy = Policy{Compact: true} })
	fill(t, h, p, 10, 5)
	ctx := context.Background()
	plan, err := p.PlanCompaction(h.clock.Load(), 0)
	if err != nil || len(plan.Cmds) == 0 {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	if err := p.Compact(ctx, plan.Cmds...); err != nil {
		t.Fatal(err)
	}
	h.cache.Drop(p.Group())
	if got := fmt.Sprint(versionsRead(t, p)); got != "[k0@9 k1@9 k2@9 k3@9 k4@9]" {
		t.Fatalf("after compaction: %s", got)
	}
	a, err := p.Append(ctx, []record.Record{rec("k0", "after")})
	if err != nil || stored(a)[0].Version != 10 {
		t.Fatalf("append after compaction: %+v %v", stored(a), err)
	}
}

// TestQueryLastIsTheTailOfTheQuery: reading a query's last n backward
// returns exactly the last n of the whole forward read, and a bounded
// forward read its first n (also after a position), for items with one
// and several tags, types only, and mixes, and for ends inside the log:
// the chunked scans (64 candidates at a time) see what a full scan sees.
func TestQueryLastIsTheTailOfTheQuery(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		var rs []record.Record
		for range 50 {
			var tags []string
			for _, tg := range []string{"a", "b", "c"} {
				if rng.IntN(3) == 0 {
					tags = append(tags, tg)
				}
			}
			tags = append(tags, fmt.Sprint("type=T", rng.IntN(3)))
			rs = append(rs, rec("", "v", tags...))
		}
		if _, err := p.Append(context.Background(), rs); err != nil {
			t.Fatal(err)
		}
	}
	queries := []Query{
		{{Tags: []string{"a"}}},
		{{Tags: []string{"a", "b"}}},
		{{Tags: []string{"c"}, Types: []string{"T1"}}},
		{{Types: []string{"T0", "T2"}}},
		{{Tags: []string{"b", "c"}}, {Types: []string{"T1"}}},
	}
	for qi, q := range queries {
		for _, end := range []uint64{2000, 1234, 7} {
			all, err := p.QueryOffsets(q, NoPosition, end, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 5, 100, 5000} {
				got, err := p.QueryLast(q, end, n)
				if err != nil {
					t.Fatal(err)
				}
				want := all[max(0, len(all)-n):]
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("query %d, end %d, last %d: %v, want %v", qi, end, n, got, want)
				}
				// Forward, in chunks: the first n, and the first n after
				// a position.
				got, err = p.QueryOffsets(q, NoPosition, end, n)
				if err != nil {
					t.Fatal(err)
				}
				if want := all[:min(n, len(all))]; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("query %d, end %d, first %d: %v, want %v", qi, end, n, got, want)
				}
				if len(all) > 3 {
					after := int64(all[2])
					got, err = p.QueryOffsets(q, after, end, n)
					if err != nil {
						t.Fatal(err)
					}
					if want := all[3:min(3+n, len(all))]; fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("query %d, end %d, first %d after %d: %v, want %v", qi, end, n, after, got, want)
					}
				}
			}
		}
	}
}

// TestWithoutAKeyIndex: a partition created without the indexes writes no
// index rows and gives no versions, refuses conditions from its own
// publishers at once, and refuses a conditional entry another proposer
// sent, alike on every replica.
func TestWithoutAKeyIndex(t *testing.T) {
	h := newHarness(t, vfs.NewMem(), 64<<20)
	p := h.add(0, func(c *Config) { c.KeyIndex = false })
	ctx := context.Background()
	a, err := p.Append(ctx, []record.Record{rec("k", "v", "t:1")})
	if err != nil || stored(a)[0].HasVersion {
		t.Fatalf("append: %+v %v", stored(a), err)
	}
	if _, ok, err := p.KeyHead([]byte("k")); ok || err != nil {
		t.Fatalf("a partition without the index has a head: %v %v", ok, err)
	}
	cond := &Conditions{Keys: []KeyCondition{{Key: []byte("k"), Expect: ExpectNone}}}
	if _, err := p.EnqueueIf(ctx, []record.Record{rec("k", "w")}, cond); !errors.Is(err, ErrNoKeyIndex) {
		t.Fatalf("conditional append: %v", err)
	}
	// A conditional entry proposed elsewhere (a proposer that had the
	// index) is refused at apply.
	withIndex := newByHand(t)
	wp := withIndex.open()
	_, e := propose(t, wp, cond, rec("k", "w"))
	without := newByHand(t)
	np, err := Open(Config{Group: 5, DB: without.db, Host: nopWaker{}, Cache: NewCache(1 << 20), Now: func() int64 { return 1000 }})
	if err != nil {
		t.Fatal(err)
	}
	without.apply(np, [][]byte{e})
	if np.Bounds().Next != 0 {
		t.Fatal("a replica without the index stored a conditional batch")
	}
}
