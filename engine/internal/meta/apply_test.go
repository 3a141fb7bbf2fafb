package meta

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/raftlog"
)

// An entry that does not decode, or decodes to no command, is not a
// result for its proposer: the apply fails, and the raft host stops the
// group (a build that cannot read its own log must not skip entries that
// other members applied).
func TestApplyRefusesEntriesItCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"garbage", "{not json", "meta: entry 3: "},
		{"empty command", `{"id":7}`, "meta: entry 3: empty command"},
		{"leave of node 0", `{"id":7,"leave":0}`, "meta: entry 3: empty command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			b := h.db.NewBatch()
			defer b.Close()
			err := h.m.Apply(b, []*pb.Entry{entry(3, []byte(tc.data))})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("apply: %v, want an error starting with %q", err, tc.want)
			}
		})
	}
}

// The metadata log is never truncated, so its only snapshot is the
// bootstrap one: empty. Restoring it over any metadata is refused rather
// than silently merged.
func TestSnapshotIsTheEmptyBootstrapOnly(t *testing.T) {
	h := newHarness(t)
	data, err := h.m.SnapshotData(1)
	if err != nil || data != nil {
		t.Fatalf("snapshot: %q %v, want empty", data, err)
	}
	b := h.db.NewBatch()
	defer b.Close()
	if err := h.m.RestoreSnapshot(b, 1, nil); err != nil {
		t.Fatalf("restore of the empty snapshot on an empty state: %v", err)
	}
	if err := h.m.RestoreSnapshot(b, 1, []byte("x")); err == nil {
		t.Fatal("restored a snapshot with data")
	}
	h.apply(t, command{Init: []Node{{ID: 1, Addr: "a"}}})
	if err := h.m.RestoreSnapshot(b, 9, nil); err == nil || !strings.Contains(err.Error(), "over existing metadata") {
		t.Fatalf("restore over members: %v", err)
	}
	h = newHarness(t)
	h.apply(t, command{Create: &Spec{Name: "t", Partitions: 1}})
	if err := h.m.RestoreSnapshot(b, 9, nil); err == nil {
		t.Fatal("restored over a topic")
	}
}

// Deleting a topic leaves a deletion marker for each of its partitions'
// groups in the same batch, so their data is deleted even after a crash
// between the delete and the cleanup.
func TestDeleteMarksEveryGroupForDeletion(t *testing.T) {
	h := newHarness(t)
	r := h.apply(t, command{Create: &Spec{Name: "t", Partitions: 3}}, command{Create: &Spec{Name: "u", Partitions: 1}})
	if r[0].err != nil || r[1].err != nil {
		t.Fatal(r[0].err, r[1].err)
	}
	if r := h.apply(t, command{Delete: "t"}); r[0].err != nil {
		t.Fatal(r[0].err)
	}
	for g, want := range map[uint64]bool{2: true, 3: true, 4: true, 5: false} {
		_, closer, err := h.db.Get(keys.DeletionKey(g))
		if got := err == nil; got != want {
			t.Errorf("group %d: marker %v, want %v (%v)", g, got, want, err)
		}
		if err == nil {
			closer.Close()
		}
	}
	if _, closer, err := h.db.Get(keys.TopicKey(1)); !errors.Is(err, pebble.ErrNotFound) {
		if err == nil {
			closer.Close()
		}
		t.Fatalf("topic record after delete: %v", err)
	}
}

// Readers see what is durable, not what is applied: between Apply and
// Durable (a pass whose batch is not committed yet) the catalog and the
// members readers see do not change.
func TestReadersSeeOnlyDurableState(t *testing.T) {
	h := newHarness(t)
	b := h.db.NewBatch()
	defer b.Close()
	ents := []*pb.Entry{
		entry(1, []byte(`{"id":1,"init":[{"id":1,"addr":"a"}]}`)),
		entry(2, []byte(`{"id":2,"create":{"Name":"t","Partitions":1}}`)),
	}
	if err := h.m.Apply(b, ents); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.m.Topic("t"); ok || len(h.m.Nodes()) != 0 || len(h.changes) != 0 {
		t.Fatal("applied state visible before Durable")
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	h.m.Durable()
	if _, ok := h.m.Topic("t"); !ok || len(h.m.Nodes()) != 1 || len(h.changes) != 1 {
		t.Fatalf("after Durable: topic %v nodes %v changes %d", ok, h.m.Nodes(), len(h.changes))
	}
}

// The proposing side, through a real raft host (one voter, Pebble on
// vfs.NewMem): each method's command comes back to its caller with the
// result of its apply, errors included, and a stopped group refuses new
// proposals as not proposed (safe to send again elsewhere).
func TestProposalsThroughRaft(t *testing.T) {
	h := newHarness(t)
	host, err := raftlog.Open(raftlog.Config{NodeID: 1, DB: h.db, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(Config{DB: h.db, Host: host, DefaultReplicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	host.Start()
	defer host.Close()
	if err := host.AddGroup(raftlog.GroupConfig{ID: GroupID, Voters: []uint64{1}, SM: m}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Init(ctx, []Node{{ID: 1, Addr: "a:1"}, {ID: 2, Addr: "b:1"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.AddNode(ctx, Node{ID: 3, Addr: "c:1"}); err != nil {
		t.Fatal(err)
	}
	topic, err := m.Create(ctx, Spec{Name: "t", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := &Topic{ID: 1, Name: "t", Partitions: 2, ReplicationFactor: 3, Groups: []uint64{2, 3},
		Replicas: [][]uint64{{2, 3, 1}, {3, 1, 2}}}
	if diff := cmp.Diff(want, topic); diff != "" {
		t.Fatalf("created (-want +got):\n%s", diff)
	}
	if got, ok := m.TopicByID(1); !ok || got != topic {
		t.Fatal("the created topic is not what readers see")
	}
	if _, err := m.Create(ctx, Spec{Name: "t", Partitions: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v", err)
	}
	if err := m.Leave(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := m.ReassignReplicas(ctx, []Reassign{{TopicID: 1, Partition: 1, Replicas: []uint64{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Forget(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if !m.Removed(3) || m.Removed(2) {
		t.Fatal("Removed")
	}
	if err := m.AddNode(ctx, Node{ID: 3, Addr: "c:1"}); !errors.Is(err, ErrRemovedID) {
		t.Fatalf("re-adding a removed id: %v", err)
	}
	altered, err := m.AlterTopic(ctx, Alter{Name: "t", Retention: Retention{MaxRecords: 5}})
	if err != nil || altered.Retention.MaxRecords != 5 || altered.Replicas[1][0] != 1 {
		t.Fatalf("alter: %+v %v", altered, err)
	}
	if deleted, err := m.Delete(ctx, "t"); err != nil || deleted.ID != 1 {
		t.Fatalf("delete: %+v %v", deleted, err)
	}
	if m.Leader() != 1 {
		t.Fatalf("leader %d", m.Leader())
	}
	m.Stopped(errors.New("test stop"))
	if _, err := m.Create(ctx, Spec{Name: "u", Partitions: 1}); !errors.Is(err, ErrNotProposed) || !errors.Is(err, ErrStopped) {
		t.Fatalf("create after stop: %v", err)
	}
}
