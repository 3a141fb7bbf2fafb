package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/raft/v3/raftpb"
)

// countingSM is a state machine that appends every applied entry to a list
// stored under 'x' <group> <seq>, with the count under 'x' <group>. If apply
// were not exactly-once across a crash, the count and the list would
// disagree with the entries proposed.
type countingSM struct {
	group uint64
	db    *pebble.DB

	mu struct {
		sync.Mutex
		queue   [][]byte
		durable []string
		stopped error
	}
	// loop-owned
	count   uint64
	pending []string
	notify  chan struct{}
}

func newCountingSM(t *testing.T, db *pebble.DB, group uint64) *countingSM {
	sm := &countingSM{group: group, db: db, notify: make(chan struct{}, 1)}
	v, closer, err := db.Get(sm.countKey())
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		t.Fatal(err)
	default:
		sm.count = binary.BigEndian.Uint64(v)
		closer.Close()
	}
	return sm
}

func (sm *countingSM) countKey() []byte { return binary.BigEndian.AppendUint64([]byte{'x'}, sm.group) }

func (sm *countingSM) propose(h *Host, data string) {
	sm.mu.Lock()
	sm.mu.queue = append(sm.mu.queue, []byte(data))
	sm.mu.Unlock()
	h.Wake(sm.group)
}

func (sm *countingSM) TakeProposals(dst [][]byte) [][]byte {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	dst = append(dst, sm.mu.queue...)
	sm.mu.queue = nil
	return dst
}

func (sm *countingSM) Dropped(data [][]byte, err error) {
	// The host holds proposals back until a leader is known, so a single
	// voter never drops one.
	panic(fmt.Sprintf("group %d dropped %d proposals: %v", sm.group, len(data), err))
}

func (sm *countingSM) Apply(w *pebble.Batch, ents []*pb.Entry) error {
	for _, e := range ents {
		sm.count++
		k := binary.BigEndian.AppendUint64(sm.countKey(), sm.count)
		if err := w.Set(k, e.GetData(), nil); err != nil {
			return err
		}
		sm.pending = append(sm.pending, string(e.GetData()))
	}
	return w.Set(sm.countKey(), binary.BigEndian.AppendUint64(nil, sm.count), nil)
}

func (sm *countingSM) Durable() {
	sm.mu.Lock()
	sm.mu.durable = append(sm.mu.durable, sm.pending...)
	sm.mu.Unlock()
	sm.pending = nil
	select {
	case sm.notify <- struct{}{}:
	default:
	}
}

func (sm *countingSM) LeaderChanged(leader, term uint64) {}

func (sm *countingSM) Stopped(err error) {
	sm.mu.Lock()
	sm.mu.stopped = err
	sm.mu.Unlock()
}

func (sm *countingSM) durable() []string {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return append([]string(nil), sm.mu.durable...)
}

// waitDurable blocks until at least n entries are durable.
func (sm *countingSM) waitDurable(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if d := sm.durable(); len(d) >= n {
			return d
		}
		select {
		case <-sm.notify:
		case <-deadline:
			t.Fatalf("only %d of %d entries durable", len(sm.durable()), n)
		}
	}
}

// stored returns what the state machine's own keys hold.
func stored(t *testing.T, db *pebble.DB, group uint64) []string {
	t.Helper()
	prefix := binary.BigEndian.AppendUint64([]byte{'x'}, group)
	it, err := db.NewIter(&pebble.IterOptions{
		LowerBound: binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), 1),
		UpperBound: binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), ^uint64(0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for valid := it.First(); valid; valid = it.Next() {
		out = append(out, string(it.Value()))
	}
	return out
}

func openDB(t testing.TB, fs vfs.FS) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func startHost(t testing.TB, db *pebble.DB) *Host {
	t.Helper()
	h, err := Open(Config{NodeID: 1, DB: db, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	return h
}

func TestHostSingleVoterProposeAndRestart(t *testing.T) {
	fs := vfs.NewMem()
	db := openDB(t, fs)
	h := startHost(t, db)
	sms := map[uint64]*countingSM{}
	for g := uint64(1); g <= 3; g++ {
		sms[g] = newCountingSM(t, db, g)
		if err := h.AddGroup(GroupConfig{ID: g, Voters: []uint64{1}, SM: sms[g]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.AddGroup(GroupConfig{ID: 1, Voters: []uint64{1}, SM: sms[1]}); !errors.Is(err, ErrGroupExists) {
		t.Fatalf("second AddGroup: %v, want ErrGroupExists", err)
	}
	want := map[uint64][]string{}
	for i := range 300 {
		g := uint64(i%3 + 1)
		d := fmt.Sprintf("g%d-%d", g, i)
		want[g] = append(want[g], d)
		sms[g].propose(h, d)
	}
	for g, sm := range sms {
		if diff := cmp.Diff(want[g], sm.waitDurable(t, len(want[g]))); diff != "" {
			t.Fatalf("group %d durable (-want +got):\n%s", g, diff)
		}
		st, ok := h.Status(g)
		if !ok || st.Leader != 1 || st.Applied != st.Commit || st.Applied == 0 {
			t.Fatalf("group %d status %+v", g, st)
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for g, sm := range sms {
		if !errors.Is(sm.mu.stopped, ErrStopped) {
			t.Fatalf("group %d: Stopped(%v), want ErrStopped", g, sm.mu.stopped)
		}
	}

	// Reopen: nothing is applied twice, new proposals continue the sequence.
	h = startHost(t, db)
	defer h.Close()
	for g := uint64(1); g <= 3; g++ {
		sms[g] = newCountingSM(t, db, g)
		if err := h.AddGroup(GroupConfig{ID: g, SM: sms[g]}); err != nil {
			t.Fatal(err)
		}
		d := fmt.Sprintf("g%d-after", g)
		want[g] = append(want[g], d)
		sms[g].propose(h, d)
		sms[g].waitDurable(t, 1)
		if diff := cmp.Diff(want[g], stored(t, db, g)); diff != "" {
			t.Fatalf("group %d stored after restart (-want +got):\n%s", g, diff)
		}
	}
}

func TestHostRemoveGroupDeletesState(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	h := startHost(t, db)
	defer h.Close()
	sm := newCountingSM(t, db, 7)
	if err := h.AddGroup(GroupConfig{ID: 7, Voters: []uint64{1}, SM: sm}); err != nil {
		t.Fatal(err)
	}
	sm.propose(h, "a")
	sm.waitDurable(t, 1)
	if err := h.RemoveGroup(7); err != nil {
		t.Fatal(err)
	}
	if err := h.RemoveGroup(7); err != nil {
		t.Fatalf("second RemoveGroup: %v", err)
	}
	if !errors.Is(sm.mu.stopped, ErrStopped) {
		t.Fatalf("Stopped(%v), want ErrStopped", sm.mu.stopped)
	}
	start, end := groupSpan(7)
	it, _ := db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	defer it.Close()
	if it.First() {
		t.Fatalf("key %x left after RemoveGroup", it.Key())
	}
	if _, ok := h.Status(7); ok {
		t.Fatal("status of a removed group")
	}
}

// TestHostCrashKeepsEveryDurableEntryOnce crashes the store at random points
// while proposals stream in (unsynced writes are lost, as after a power cut),
// reopens it, and checks that every entry the host declared durable is
// applied exactly once, in order, and that nothing else appears.
func TestHostCrashKeepsEveryDurableEntryOnce(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for round := range 8 {
		fs := vfs.NewCrashableMem()
		db := openDB(t, fs)
		h := startHost(t, db)
		sm := newCountingSM(t, db, 1)
		if err := h.AddGroup(GroupConfig{ID: 1, Voters: []uint64{1}, SM: sm}); err != nil {
			t.Fatal(err)
		}
		var proposed []string
		n := 50 + rng.IntN(200)
		crashAt := rng.IntN(n)
		var crashed *vfs.MemFS
		var durableAtCrash []string
		for i := range n {
			d := fmt.Sprintf("r%d-%d", round, i)
			proposed = append(proposed, d)
			sm.propose(h, d)
			if i == crashAt {
				durableAtCrash = sm.durable()
				crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})
			}
		}
		sm.waitDurable(t, n)
		h.Close()
		db.Close()

		db = openDB(t, crashed)
		h = startHost(t, db)
		sm = newCountingSM(t, db, 1)
		if err := h.AddGroup(GroupConfig{ID: 1, SM: sm}); err != nil {
			t.Fatal(err)
		}
		sm.propose(h, "after-crash")
		for i := 1; ; i++ {
			if d := sm.waitDurable(t, i); d[len(d)-1] == "after-crash" {
				break
			}
		}
		got := stored(t, db, 1)
		if got[len(got)-1] != "after-crash" {
			t.Fatalf("round %d: last stored %q", round, got[len(got)-1])
		}
		got = got[:len(got)-1]
		// What survived is a prefix of what was proposed (order kept, no
		// duplicates), and contains everything durable at the crash.
		if len(got) > len(proposed) || !slicesEqual(got, proposed[:len(got)]) {
			t.Fatalf("round %d: stored %v is not a prefix of proposed", round, got)
		}
		if len(got) < len(durableAtCrash) {
			t.Fatalf("round %d: %d entries durable before the crash, %d survived", round, len(durableAtCrash), len(got))
		}
		h.Close()
		db.Close()
	}
}

func slicesEqual(a, b []string) bool { return cmp.Equal(a, b) }

func TestStorageRefusesCommitBeyondLog(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	defer db.Close()
	b := db.NewBatch()
	st, _, err := openStorage(db, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.bootstrap(b, []uint64{1}); err != nil {
		t.Fatal(err)
	}
	ents := []*pb.Entry{entry(2, 1, "a"), entry(3, 1, "b")}
	if err := st.append(b, ents); err != nil {
		t.Fatal(err)
	}
	if err := st.setHardState(b, &pb.HardState{Term: u64(1), Commit: u64(3)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	// Reopen: fine. Then lose the last entry: refused.
	if _, _, err := openStorage(db, 3); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(entryKey(3, 3), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openStorage(db, 3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a truncated log: %v, want ErrCorrupt", err)
	}
}

func TestStorageEntriesAndTerms(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	defer db.Close()
	st, _, err := openStorage(db, 5)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	var ents []*pb.Entry
	for i := uint64(1); i <= 10; i++ {
		ents = append(ents, entry(i, 1+i/4, fmt.Sprint(i)))
	}
	if err := st.append(b, ents); err != nil {
		t.Fatal(err)
	}
	// Overwrite a suffix with a new term, as a new leader would.
	if err := st.append(b, []*pb.Entry{entry(8, 9, "x8"), entry(9, 9, "x9")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	check := func(st *storage) {
		t.Helper()
		if li, _ := st.LastIndex(); li != 9 {
			t.Fatalf("last index %d, want 9", li)
		}
		got, err := st.Entries(2, 10, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var datas []string
		for _, e := range got {
			datas = append(datas, string(e.GetData()))
		}
		if diff := cmp.Diff([]string{"2", "3", "4", "5", "6", "7", "x8", "x9"}, datas); diff != "" {
			t.Fatalf("entries (-want +got):\n%s", diff)
		}
		if term, _ := st.Term(8); term != 9 {
			t.Fatalf("term(8) = %d", term)
		}
		if term, _ := st.Term(3); term != 1 {
			t.Fatalf("term(3) = %d", term)
		}
		// maxSize returns at least one entry, then stops.
		if got, _ := st.Entries(2, 10, 0); len(got) != 1 {
			t.Fatalf("maxSize 0 gave %d entries", len(got))
		}
	}
	check(st)
	st.trimCacheTo(9, 0) // force disk reads
	check(st)
	st2, _, err := openStorage(db, 5)
	if err != nil {
		t.Fatal(err)
	}
	check(st2)
}

func entry(index, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: u64(index), Term: u64(term), Type: pb.EntryNormal.Enum(), Data: []byte(data)}
}

func u64(v uint64) *uint64 { return &v }

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)           {}
func (quietPebble) Errorf(string, ...any)          {}
func (quietPebble) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// FuzzDecodeEntry feeds arbitrary stored entry values to the decoder.
func FuzzDecodeEntry(f *testing.F) {
	f.Add([]byte{0, 1, 'x'})
	f.Add([]byte{2, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, v []byte) {
		if e, err := decodeEntry(7, v); err == nil && e.GetIndex() != 7 {
			t.Fatalf("index %d", e.GetIndex())
		}
	})
}

// TestTruncateLogRemovesTheFrontOfTheLog runs a state machine that releases
// its log as it applies: entries below the released index are gone from the
// store, the group keeps working, and it reopens.
func TestTruncateLogRemovesTheFrontOfTheLog(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	h := startHost(t, db)
	sm := &truncatingSM{countingSM: newCountingSM(t, db, 4)}
	if err := h.AddGroup(GroupConfig{ID: 4, Voters: []uint64{1}, SM: sm}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		sm.propose(h, fmt.Sprint("e", i))
	}
	sm.waitDurable(t, 30)
	st, _ := h.Status(4)
	sm.floor.Store(st.Applied - 5)
	sm.propose(h, "last")
	sm.waitDurable(t, 31)
	if _, err := ReadEntryData(db, 4, 3); err == nil {
		t.Fatal("entry 3 survived the truncation")
	}
	if _, err := ReadEntryData(db, 4, st.Applied); err != nil {
		t.Fatalf("entry %d (kept) is gone: %v", st.Applied, err)
	}
	h.Close()
	h = startHost(t, db)
	defer h.Close()
	sm2 := newCountingSM(t, db, 4)
	if err := h.AddGroup(GroupConfig{ID: 4, SM: sm2}); err != nil {
		t.Fatalf("reopen after truncation: %v", err)
	}
	sm2.propose(h, "after")
	sm2.waitDurable(t, 1)
}

type truncatingSM struct {
	*countingSM
	floor atomic.Uint64
}

func (s *truncatingSM) TruncateLog() uint64 { return s.floor.Load() }

// fillableFS is an in-memory filesystem whose WAL writes fail with ENOSPC
// once full is set: a disk that filled up.
func fillableFS() (vfs.FS, *atomic.Bool) {
	full := new(atomic.Bool)
	return errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".log") {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	})), full
}

// TestHostStopsAndReportsAFailedWALWrite fills the disk under the store
// (every WAL write fails with ENOSPC): the host stops at once, Done is
// closed, Err names the disk error, and no group's status says it still
// leads (callers waiting for leadership to move must not wait on it).
func TestHostStopsAndReportsAFailedWALWrite(t *testing.T) {
	fs, full := fillableFS()
	db := openDB(t, fs)
	h := startHost(t, db)
	sm := newCountingSM(t, db, 1)
	if err := h.AddGroup(GroupConfig{ID: 1, Voters: []uint64{1}, SM: sm}); err != nil {
		t.Fatal(err)
	}
	sm.propose(h, "before")
	sm.waitDurable(t, 1)
	if st, _ := h.Status(1); !st.Leading {
		t.Fatalf("status before the fault: %+v", st)
	}
	full.Store(true)
	sm.propose(h, "doomed")
	<-h.Done()
	err := h.Err()
	if err == nil || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		t.Fatalf("Err after a failed WAL write: %v, want one naming %q", err, syscall.ENOSPC)
	}
	if st, _ := h.Status(1); st.Leading || st.Err == nil {
		t.Fatalf("status after the host stopped: %+v, want not leading, with the error", st)
	}
	if got := sm.durable(); len(got) != 1 {
		t.Fatalf("durable after the fault: %v", got)
	}
	if err := h.TransferLeader(1, 2); !errors.Is(err, ErrStopped) {
		t.Fatalf("TransferLeader on a stopped host: %v, want ErrStopped", err)
	}
	if err := h.Close(); err == nil {
		t.Fatal("Close did not return the fatal error")
	}
}

// TestHostStopsWhenRemovingAGroupFailsToWrite fills the disk, then removes
// a group: its deletion's WAL write fails, RemoveGroup returns the disk
// error and the host stops with it, as when a pass's write fails. Before,
// Pebble's fatal logger panicked on the host's loop, outside any guard,
// and killed the process with a stack trace.
func TestHostStopsWhenRemovingAGroupFailsToWrite(t *testing.T) {
	fs, full := fillableFS()
	db := openDB(t, fs)
	h := startHost(t, db)
	sm := newCountingSM(t, db, 1)
	if err := h.AddGroup(GroupConfig{ID: 1, Voters: []uint64{1}, SM: sm}); err != nil {
		t.Fatal(err)
	}
	sm.propose(h, "before")
	sm.waitDurable(t, 1)
	full.Store(true)
	if err := h.RemoveGroup(1); err == nil || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		t.Fatalf("RemoveGroup on a full disk: %v, want an error naming %q", err, syscall.ENOSPC)
	}
	<-h.Done()
	if err := h.Err(); err == nil || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		t.Fatalf("Err after a failed removal: %v, want one naming %q", err, syscall.ENOSPC)
	}
	if err := h.Close(); err == nil {
		t.Fatal("Close did not return the fatal error")
	}
}

// TestHostAddGroupsTogether: groups added in one AddGroups call start
// together, each with its own error, and when it returns every group has
// applied what was committed before the restart, as AddGroup promises.
func TestHostAddGroupsTogether(t *testing.T) {
	db := openDB(t, vfs.NewMem())
	h := startHost(t, db)
	const n = 40
	var gcs []GroupConfig
	sms := map[uint64]*countingSM{}
	for g := uint64(1); g <= n; g++ {
		sms[g] = newCountingSM(t, db, g)
		gcs = append(gcs, GroupConfig{ID: g, Voters: []uint64{1}, SM: sms[g]})
	}
	for i, err := range h.AddGroups(gcs) {
		if err != nil {
			t.Fatalf("group %d: %v", gcs[i].ID, err)
		}
	}
	for g := uint64(1); g <= n; g++ {
		sms[g].propose(h, fmt.Sprint("g", g))
		sms[g].waitDurable(t, 1)
	}
	commits := map[uint64]uint64{}
	for g := uint64(1); g <= n; g++ {
		st, _ := h.Status(g)
		commits[g] = st.Commit
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h = startHost(t, db)
	defer h.Close()
	gcs = gcs[:0]
	for g := uint64(1); g <= n; g++ {
		sms[g] = newCountingSM(t, db, g)
		gcs = append(gcs, GroupConfig{ID: g, SM: sms[g]})
	}
	gcs = append(gcs, GroupConfig{ID: 1, SM: sms[1]}, GroupConfig{ID: n + 1})
	errs := h.AddGroups(gcs)
	for i, err := range errs[:n] {
		g := gcs[i].ID
		st, ok := h.Status(g)
		if err != nil || !ok || st.Applied < commits[g] {
			t.Fatalf("group %d after the restart: %v, status %+v; want applied up to %d when AddGroups returns", g, err, st, commits[g])
		}
	}
	if !errors.Is(errs[n], ErrGroupExists) || errs[n+1] == nil {
		t.Fatalf("a group twice: %v; a group without a state machine: %v", errs[n], errs[n+1])
	}
	for g := uint64(1); g <= n; g++ {
		if got := stored(t, db, g); len(got) != 1 || got[0] != fmt.Sprint("g", g) {
			t.Fatalf("group %d stored %v", g, got)
		}
	}
}

// TestConfigFailureDetectTicks checks the failure detector's window
// against the ticks it must sit between, and its defaults.
func TestConfigFailureDetectTicks(t *testing.T) {
	db := &pebble.DB{} // Validate only checks that one is given
	for _, tc := range []struct {
		cfg     Config
		wantErr bool
		want    int // FailureDetectTicks after defaults
	}{
		{Config{}, false, 5},
		{Config{ElectionTicks: 20}, false, 10},
		{Config{ElectionTicks: 3}, false, -1}, // 1 tick would not outlast a heartbeat: off
		{Config{FailureDetectTicks: -1}, false, -1},
		{Config{FailureDetectTicks: 9}, false, 9},
		{Config{FailureDetectTicks: 10}, true, 0},
		{Config{FailureDetectTicks: 1}, true, 0},
		{Config{FailureDetectTicks: 3, HeartbeatTicks: 3, ElectionTicks: 10}, true, 0},
	} {
		tc.cfg.NodeID, tc.cfg.DB = 1, db
		err := tc.cfg.Validate()
		if (err != nil) != tc.wantErr {
			t.Errorf("%+v: Validate() = %v, want error %t", tc.cfg, err, tc.wantErr)
			continue
		}
		if err == nil {
			if got := tc.cfg.withDefaults().FailureDetectTicks; got != tc.want {
				t.Errorf("%+v: FailureDetectTicks %d after defaults, want %d", tc.cfg, got, tc.want)
			}
		}
	}
}
