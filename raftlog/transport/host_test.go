package transport_test

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rewind-io/rewind/raftlog"
	"github.com/rewind-io/rewind/raftlog/transport"
	pb "go.etcd.io/raft/v3/raftpb"
)

// event is what the integration test's state machines report.
type event struct {
	Kind   string // "leader", "applied" or "dropped"
	Node   uint64
	Leader uint64
	Data   string
}

// listSM applies entries to an in-memory list (no state of its own on
// disk: the test never restarts a host).
type listSM struct {
	node   uint64
	events *recorder[event]
	mu     struct {
		sync.Mutex
		queue [][]byte
	}
	pending []string // loop-owned
}

func (sm *listSM) propose(h *raftlog.Host, group uint64, data string) {
	sm.mu.Lock()
	sm.mu.queue = append(sm.mu.queue, []byte(data))
	sm.mu.Unlock()
	h.Wake(group)
}

func (sm *listSM) TakeProposals(dst [][]byte) [][]byte {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	dst = append(dst, sm.mu.queue...)
	sm.mu.queue = nil
	return dst
}

func (sm *listSM) Dropped(data [][]byte, err error) {
	for _, d := range data {
		sm.events.add(event{Kind: "dropped", Node: sm.node, Data: string(d)})
	}
}

func (sm *listSM) Apply(w *pebble.Batch, ents []*pb.Entry) error {
	for _, e := range ents {
		sm.pending = append(sm.pending, string(e.GetData()))
	}
	return nil
}

func (sm *listSM) Durable() {
	for _, d := range sm.pending {
		sm.events.add(event{Kind: "applied", Node: sm.node, Data: d})
	}
	sm.pending = nil
}

func (sm *listSM) LeaderChanged(leader, term uint64) {
	sm.events.add(event{Kind: "leader", Node: sm.node, Leader: leader})
}

func (sm *listSM) Stopped(err error) {}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)           {}
func (quietPebble) Errorf(string, ...any)          {}
func (quietPebble) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// member is one node of the integration cluster: a host on its own Pebble
// store, wired to the others by a transport on loopback.
type member struct {
	id   uint64
	host *raftlog.Host
	tr   *transport.Transport
	sm   *listSM
	addr string
	srv  *http.Server
}

func (m *member) serve(t *testing.T, ln net.Listener) {
	mux := http.NewServeMux()
	mux.Handle(m.tr.Handler())
	m.srv = serve(t, ln, mux)
}

func startMember(t *testing.T, c *cluster, id uint64, ln net.Listener, events *recorder[event]) *member {
	t.Helper()
	m := &member{id: id, addr: ln.Addr().String(), sm: &listSM{node: id, events: events}}
	db, err := pebble.Open(t.TempDir(), &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// The transport and the host refer to each other; m.host is set before
	// the host starts sending or the server starts delivering.
	m.tr, err = transport.New(transport.Config{
		ClusterID: 42, NodeID: id, Resolve: c.resolve,
		Deliver:        func(envs []raftlog.Envelope) { m.host.Deliver(envs) },
		Unreachable:    func(node uint64) { m.host.ReportUnreachable(node) },
		SnapshotStatus: func(g, node uint64, failed bool) { m.host.ReportSnapshot(g, node, failed) },
	})
	if err != nil {
		t.Fatal(err)
	}
	m.host, err = raftlog.Open(raftlog.Config{NodeID: id, DB: db, Transport: m.tr, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.serve(t, ln)
	t.Cleanup(m.tr.Close)
	m.host.Start()
	t.Cleanup(func() { _ = m.host.Close() })
	return m
}

// leader waits until every member in ms names the same leader, and
// returns it.
func leader(t *testing.T, events *recorder[event], ms []*member) *member {
	t.Helper()
	var lead uint64
	events.wait(t, "an agreed leader", func(evs []event) bool {
		latest := map[uint64]uint64{}
		for _, e := range evs {
			if e.Kind == "leader" {
				latest[e.Node] = e.Leader
			}
		}
		lead = latest[ms[0].id]
		for _, m := range ms {
			if l, ok := latest[m.id]; !ok || l == 0 || l != lead {
				return false
			}
		}
		return true
	})
	for _, m := range ms {
		if m.id == lead {
			return m
		}
	}
	t.Fatalf("leader %d is not among the members waited for", lead)
	return nil
}

// applied reports whether every member of ms applied data.
func applied(evs []event, data string, ms []*member) bool {
	for _, m := range ms {
		if !slices.Contains(evs, event{Kind: "applied", Node: m.id, Data: data}) {
			return false
		}
	}
	return true
}

// commit proposes data on the leader of ms until all of ms apply it
// (raft drops a proposal that meets a leader change).
func commit(t *testing.T, events *recorder[event], ms []*member, data string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			t.Fatalf("%q dropped %d times", data, attempt)
		}
		l := leader(t, events, ms)
		l.sm.propose(l.host, 1, data)
		evs := events.wait(t, fmt.Sprintf("%q applied", data), func(evs []event) bool {
			return applied(evs, data, ms) || slices.Contains(evs, event{Kind: "dropped", Node: l.id, Data: data})
		})
		if applied(evs, data, ms) {
			return
		}
	}
}

// TestThreeHosts runs one group over three hosts wired by the transport:
// it elects a leader and commits on all three; with one follower's server
// stopped the other two still commit; once it is back the follower
// catches up.
func TestThreeHosts(t *testing.T) {
	var c cluster
	events := newRecorder[event]()
	var lns []net.Listener
	for id := uint64(1); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.set(id, ln.Addr().String())
		lns = append(lns, ln)
	}
	var ms []*member
	for i, ln := range lns {
		ms = append(ms, startMember(t, &c, uint64(i+1), ln, events))
	}
	for _, m := range ms {
		if err := m.host.AddGroup(raftlog.GroupConfig{ID: 1, Voters: []uint64{1, 2, 3}, SM: m.sm}); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, events, ms, "a")

	l := leader(t, events, ms)
	var down *member
	var up []*member
	for _, m := range ms {
		if m != l && down == nil {
			down = m
		} else {
			up = append(up, m)
		}
	}
	if err := down.srv.Close(); err != nil {
		t.Fatal(err)
	}
	commit(t, events, up, "b")
	if applied(events.all(), "b", []*member{down}) {
		t.Fatalf("node %d applied an entry while nobody could reach it", down.id)
	}

	ln, err := net.Listen("tcp", down.addr)
	if err != nil {
		t.Fatal(err)
	}
	down.serve(t, ln)
	events.wait(t, fmt.Sprintf("node %d catching up", down.id), func(evs []event) bool {
		return applied(evs, "b", []*member{down})
	})
	var failures uint64
	for _, m := range up {
		if ps, ok := m.tr.Stats().Peer(down.id); ok {
			failures += ps.Failures
		}
	}
	if failures == 0 {
		t.Fatalf("no stream to node %d failed while its server was down", down.id)
	}
}
