package partition

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/rewind-io/rewind/engine/internal/record"
)

// The on-disk decoders get arbitrary bytes: an error or a value, never a
// panic.

func FuzzDecodeState(f *testing.F) {
	f.Add(State{LogStart: 1, Next: 9, Bytes: 5, LastIndex: 3}.encode())
	f.Add(State{LogStart: 1, Next: 9, Bytes: 5, LastIndex: 3, Payload: 4, PayloadKnown: true}.encode())
	v2 := State{LogStart: 1, Next: 9}.encode()[:stateV2Size]
	v2[0] = 2
	f.Add(v2)
	v3 := State{LogStart: 1, Next: 9, Payload: 4, PayloadKnown: true}.encode()[:stateV3Size]
	v3[0] = 3
	f.Add(v3)
	f.Add(State{ReadStart: 1, LogStart: 5, Next: 9}.encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := decodeState(b); err == nil && (s.LogStart > s.Next || s.ReadStart > s.LogStart) {
			t.Fatalf("accepted a state with read start %d, log start %d, end %d", s.ReadStart, s.LogStart, s.Next)
		}
	})
}

func FuzzDecodeRows(f *testing.F) {
	f.Add(indexRow{raftIndex: 3, appendTime: 7, span: 2, size: 100}.encode())
	f.Add(indexRow{raftIndex: 3, appendTime: 7, span: 2, size: 100, payload: 60, hasPayload: true}.encode()[:legacyIndexRowSize])
	f.Add(dedupeEntry{offset: 1, appendTime: 2, hash: 3}.encode())
	f.Add(dedupeEntry{offset: 1, appendTime: 2, hash: 3, bound: true, target: 4}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeIndexRow(b); err == nil && r.span == 0 {
			t.Fatal("accepted a row with an empty span")
		}
		_, _ = decodeDedupe(b)
	})
}

func FuzzDecodeBind(f *testing.F) {
	p := &Partition{cfg: Config{Now: func() int64 { return 7 }}}
	f.Add(p.bindEntry(1, &bindFlight{binds: []*pendingBind{{bindings: []Binding{{Key: []byte("k"), Target: 2, Hash: 3}, {Target: 1}}}}}))
	f.Add([]byte{kindBind})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, bs, err := decodeBind(b); err == nil {
			for _, x := range bs {
				if len(x.Key) > len(b) {
					t.Fatalf("key of %d bytes from %d", len(x.Key), len(b))
				}
			}
		}
	})
}

// FuzzApply applies arbitrary committed entries (what a damaged log could
// hold) to a partition driven by hand: Apply must return an error or apply
// them, never panic, and never move the log start back or past the end.
func FuzzApply(f *testing.F) {
	var bl record.Builder
	bl.Reset(1<<32|1, 100)
	bl.Add(&record.Record{Key: []byte("k"), Value: []byte("v"), IdempotencyKey: []byte("i")})
	batch := bl.Finish()
	env := make([]byte, batchEnvelope)
	env[0] = kindBatch
	f.Add(append(env, batch...))
	f.Add(commandEntry(kindGroup, 7, []byte(`{"kind":"commit","group":"g","gen":1,"offset":1}`)))
	f.Add(commandEntry(kindTruncate, 8, []byte(`{"offset":1}`)))
	f.Add(commandEntry(kindCompact, 9, []byte(`{"batches":[{"base":0,"raft_index":1,"drop":[0]}]}`)))
	bp := &Partition{cfg: Config{Now: func() int64 { return 100 }}}
	f.Add(bp.bindEntry(10, &bindFlight{binds: []*pendingBind{{bindings: []Binding{{Key: []byte("i"), Target: 2, Hash: 3}}}}}))
	f.Add([]byte{kindBatch})
	f.Add([]byte{9, 9, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return // raft never hands over an entry without data
		}
		db, err := pebble.Open("d", &pebble.Options{FS: vfs.NewMem(), Logger: nopLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		p, err := Open(Config{Group: 5, DB: db, Host: nopWaker{}, Cache: NewCache(1 << 20), DedupeWindow: time.Hour, KeyIndex: true,
			Now: func() int64 { return 1000 }})
		if err != nil {
			t.Fatal(err)
		}
		// A valid first batch, then the fuzzed entry twice (re-applies
		// must be harmless too).
		w := db.NewBatch()
		good := append(append([]byte(nil), env...), batch...)
		binary.LittleEndian.PutUint64(good[1:], 0)
		for i, d := range [][]byte{good, data, data} {
			e := &pb.Entry{Index: proto.Uint64(uint64(i + 1)), Term: proto.Uint64(1), Data: d}
			before := p.st
			if err := p.Apply(w, []*pb.Entry{e}); err != nil {
				return
			}
			if p.st.LogStart < before.LogStart || p.st.LogStart > p.st.Next || p.st.Next < before.Next {
				t.Fatalf("state went from %+v to %+v", before, p.st)
			}
			if err := w.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			p.Durable()
			w = db.NewBatch()
		}
	})
}
