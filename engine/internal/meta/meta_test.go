package meta

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/quota"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/plugins"
)

// The scripts under testdata/ drive the metadata state machine the way
// the raft host does, without raft: each command is encoded as a log
// entry, applied in a Pebble batch (on an in-memory filesystem), the batch
// committed, then Durable called. They print each command's result and
// the changes it reported (Config.OnChange).
//
// After every script, the harness checks two properties of the whole log
// it applied: reopening the state machine from its store yields the same
// state (a restart), and applying the same log to a fresh state machine
// on a fresh store, in one pass instead of one per entry, yields the same
// state and byte-identical store contents (every member of the metadata
// group computes the same catalog, ids and placement, however its raft
// loop batches the entries).
//
// Commands (one log entry each unless said otherwise):
//
//	init nodes=ID@ADDR,...
//	add-node id=ID addr=ADDR
//	leave id=ID
//	removed id=ID
//	create name=N partitions=P [rf=R] [creator=PRINCIPAL] [max-age=NS]
//	alter name=N [max-age=NS] [cleanup=C]
//	grow name=N partitions=P [time=T]
//	delete name=N
//	reassign topic=ID partition=P replicas=ID,...  (repeatable as
//	    topic=ID/P/ID+ID+... on one line: reassign moves=1/0/2+3,1/1/3)
//	plugin-upload name=N module=BYTES [time=T]
//	plugin-delete name=N [version=V]
//	auth-init superuser=NAME
//	auth-token principal=NAME id=HEX12
//	auth-quota principal=NAME|default [topics=N] [partitions=N]
//	state
//	    The durable state, as readers see it.
//	restart
//	    Reopens the state machine on the same store; prints nothing if
//	    the state is unchanged, else the difference.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, h.cmd)
		h.checkRestart(t)
		h.checkReplay(t)
	})
}

type nopHost struct{}

func (nopHost) Wake(uint64) {}

// harness is one state machine on its own store, and the log applied to
// it.
type harness struct {
	db      *pebble.DB
	m       *Meta
	log     [][]byte
	changes []Change
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	db, err := store.Open(store.Config{Dir: "/data", FS: vfs.NewMem(), CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{db: db}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	h.m = h.open(t)
	return h
}

func (h *harness) open(t testing.TB) *Meta {
	t.Helper()
	m, err := Open(Config{
		DB: h.db, Host: nopHost{}, DefaultReplicas: 3,
		OnChange: func(cs []Change) { h.changes = append(h.changes, cs...) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// apply applies cmds as one raft entry each, in one batch (one pass of
// the raft loop), and returns their results.
func (h *harness) apply(t testing.TB, cmds ...command) []result {
	t.Helper()
	var ents []*pb.Entry
	for _, c := range cmds {
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		h.log = append(h.log, data)
		ents = append(ents, entry(uint64(len(h.log)), data))
	}
	return applyEntries(t, h.db, h.m, ents)
}

func entry(index uint64, data []byte) *pb.Entry {
	return &pb.Entry{Index: &index, Data: data}
}

func applyEntries(t testing.TB, db *pebble.DB, m *Meta, ents []*pb.Entry) []result {
	t.Helper()
	b := db.NewBatch()
	if err := m.Apply(b, ents); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	res := m.results
	m.Durable()
	return res
}

func (h *harness) cmd(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd == "state" {
		return dump(h.m)
	}
	if d.Cmd == "restart" {
		before := dump(h.m)
		h.m = h.open(t)
		return cmp.Diff(before, dump(h.m))
	}
	c := parseCommand(t, d)
	r := h.apply(t, c)[0]
	var sb strings.Builder
	if r.err != nil {
		fmt.Fprintf(&sb, "error: %s\n", describe(r.err))
	} else {
		sb.WriteString("ok")
		if r.topic != nil {
			sb.WriteString(" " + topicLine(r.topic))
		}
		for _, p := range r.plugins {
			fmt.Fprintf(&sb, " %s", pluginLine(p))
		}
		if r.unchanged || r.auth.Unchanged {
			sb.WriteString(" (unchanged)")
		}
		sb.WriteString("\n")
	}
	for _, ch := range h.changes {
		switch {
		case ch.Created != nil:
			fmt.Fprintf(&sb, "change: created %s\n", topicLine(ch.Created))
		case ch.Deleted != nil:
			fmt.Fprintf(&sb, "change: deleted %s\n", topicLine(ch.Deleted))
		case ch.Altered != nil:
			fmt.Fprintf(&sb, "change: altered %s\n", topicLine(ch.Altered))
		case ch.Reassigned != nil:
			fmt.Fprintf(&sb, "change: reassigned %s\n", topicLine(ch.Reassigned))
		case ch.Grown != nil:
			fmt.Fprintf(&sb, "change: grown %s\n", topicLine(ch.Grown))
		}
	}
	h.changes = nil
	return sb.String()
}

func parseNodes(t *testing.T, d *datadriven.TestData, s string) []Node {
	var out []Node
	for _, f := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(f, "@")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil {
			d.Fatalf(t, "node %q: want ID@ADDR", f)
		}
		out = append(out, Node{ID: n, Addr: addr})
	}
	return out
}

func parseIDs(t *testing.T, d *datadriven.TestData, s, sep string) []uint64 {
	var out []uint64
	for _, f := range strings.Split(s, sep) {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			d.Fatalf(t, "id %q: %v", f, err)
		}
		out = append(out, n)
	}
	return out
}

func parseCommand(t *testing.T, d *datadriven.TestData) command {
	var c command
	str := func(key string) string {
		var s string
		d.ScanArgs(t, key, &s)
		return s
	}
	u64 := func(key string) uint64 {
		var v uint64
		d.MaybeScanArgs(t, key, &v)
		return v
	}
	switch d.Cmd {
	case "init":
		c.Init = parseNodes(t, d, str("nodes"))
	case "add-node":
		c.AddNode = &Node{ID: u64("id"), Addr: str("addr")}
	case "leave":
		c.Leave = u64("id")
	case "removed":
		c.Removed = u64("id")
	case "create":
		s := &Spec{Name: str("name"), Partitions: uint32(u64("partitions")), ReplicationFactor: uint32(u64("rf")),
			Retention: Retention{MaxAgeNanos: int64(u64("max-age"))}, CreateTime: int64(u64("time"))}
		d.MaybeScanArgs(t, "creator", &s.Creator)
		d.MaybeScanArgs(t, "key-index", &s.KeyIndex)
		c.Create = s
	case "alter":
		a := &Alter{Name: str("name"), Retention: Retention{MaxAgeNanos: int64(u64("max-age"))}}
		d.MaybeScanArgs(t, "cleanup", &a.Retention.Cleanup)
		c.Alter = a
	case "grow":
		c.Grow = &Grow{Name: str("name"), Partitions: uint32(u64("partitions")), Time: int64(u64("time"))}
	case "delete":
		c.Delete = str("name")
	case "reassign":
		c.Reassign = []Reassign{}
		for _, mv := range strings.Split(str("moves"), ",") {
			f := strings.Split(mv, "/")
			if len(f) != 3 {
				d.Fatalf(t, "move %q: want TOPIC/PARTITION/ID+ID", mv)
			}
			ids := parseIDs(t, d, f[0]+"/"+f[1], "/")
			var replicas []uint64
			if f[2] != "" {
				replicas = parseIDs(t, d, f[2], "+")
			}
			c.Reassign = append(c.Reassign, Reassign{TopicID: ids[0], Partition: uint32(ids[1]), Replicas: replicas})
		}
	case "plugin-upload":
		mod := []byte(str("module"))
		sum := sha256.Sum256(mod)
		c.PluginUpload = &plugins.Upload{Name: str("name"), Module: mod, SHA256: hex.EncodeToString(sum[:]), UploadTime: int64(u64("time"))}
	case "plugin-delete":
		c.PluginDelete = &plugins.Delete{Name: str("name"), Version: uint32(u64("version"))}
	case "auth-init":
		c.Auth = &auth.Command{Init: &auth.Init{
			Superuser: str("superuser"), Token: token(str("superuser"), "000000000001"),
			ResumeKey: bytes.Repeat([]byte{7}, 32),
		}}
	case "auth-token":
		tok := token(str("principal"), str("id"))
		c.Auth = &auth.Command{CreateToken: &tok}
	case "auth-quota":
		q := &auth.SetQuota{Limits: quota.Limits{Topics: uint32(u64("topics")), Partitions: uint32(u64("partitions"))}}
		if p := str("principal"); p == "default" {
			q.Default = true
		} else {
			q.Principal = p
		}
		c.Auth = &auth.Command{SetQuota: q}
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return c
}

// token is a stored token with a fixed id and a hash derived from it, so
// scripts are deterministic (auth.NewToken draws both at random).
func token(principal, id string) auth.Token {
	sum := sha256.Sum256([]byte("secret-" + id))
	return auth.Token{ID: id, Principal: principal, Hash: sum[:], Created: 1}
}

func topicLine(t *Topic) string {
	s := fmt.Sprintf("%s id=%d partitions=%d rf=%d groups=%v", t.Name, t.ID, t.Partitions, t.ReplicationFactor, t.Groups)
	if t.Replicas != nil {
		s += fmt.Sprintf(" replicas=%v", t.Replicas)
	}
	if t.Retention != (Retention{}) {
		s += fmt.Sprintf(" retention=%+v", t.Retention)
	}
	if t.Creator != "" {
		s += " creator=" + t.Creator
	}
	if t.KeyIndex {
		s += " key-index"
	}
	if len(t.Epochs) > 0 {
		s += fmt.Sprintf(" epochs=%v", t.Epochs)
	}
	return s
}

func pluginLine(p *plugins.Plugin) string {
	return fmt.Sprintf("%s@v%d sha256=%s.. size=%d", p.Name, p.Version, p.SHA256[:8], p.Size)
}

// dump prints the durable state, as readers see it, in a fixed order.
func dump(m *Meta) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "next-topic-id=%d next-group-id=%d\n", m.st.NextTopicID, m.st.NextGroupID)
	for _, n := range m.Nodes() {
		fmt.Fprintf(&sb, "node %d@%s", n.ID, n.Addr)
		if n.Leaving {
			sb.WriteString(" leaving")
		}
		sb.WriteString("\n")
	}
	m.mu.Lock()
	removed := slices.Clone(m.mu.removed)
	m.mu.Unlock()
	if len(removed) > 0 {
		fmt.Fprintf(&sb, "removed %v\n", removed)
	}
	for _, t := range m.Topics() {
		if bt, ok := m.TopicByID(t.ID); !ok || bt != t {
			fmt.Fprintf(&sb, "topic %s: not found by its id %d\n", t.Name, t.ID)
		}
		fmt.Fprintf(&sb, "topic %s\n", topicLine(t))
	}
	for _, p := range m.Plugins().List("") {
		fmt.Fprintf(&sb, "plugin %s\n", pluginLine(p))
	}
	a := m.Auth()
	if a.Revision > 0 {
		fmt.Fprintf(&sb, "auth revision=%d superusers=%v", a.Revision, a.Superusers)
		for _, tk := range a.Tokens {
			fmt.Fprintf(&sb, " token=%s:%s", tk.ID, tk.Principal)
		}
		sb.WriteString("\n")
		if !a.DefaultQuota.IsZero() {
			fmt.Fprintf(&sb, "quota default: topics=%d partitions=%d\n", a.DefaultQuota.Topics, a.DefaultQuota.Partitions)
		}
		names := make([]string, 0, len(a.Quotas))
		for n := range a.Quotas {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintf(&sb, "quota %s: topics=%d partitions=%d\n", n, a.Quotas[n].Topics, a.Quotas[n].Partitions)
		}
	}
	owned := m.Owned()
	names := make([]string, 0, len(owned))
	for n := range owned {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&sb, "owned %s: topics=%d partitions=%d\n", n, owned[n].Topics, owned[n].Partitions)
	}
	return sb.String()
}

// describe prints err with the sentinels it matches.
func describe(err error) string {
	var classes []string
	for _, c := range []struct {
		name string
		err  error
	}{
		{"topic-exists", ErrTopicExists},
		{"no-topic", ErrNoTopic},
		{"not-enough-nodes", ErrNotEnoughNodes},
		{"removed-id", ErrRemovedID},
		{"node-exists", ErrNodeExists},
		{"no-node", ErrNoNode},
		{"shrink", ErrShrink},
		{"grow-key-index", ErrGrowKeyIndex},
		{"quota", quota.ErrExceeded},
		{"plugin-not-found", plugins.ErrNotFound},
		{"plugin-bad-ref", plugins.ErrBadRef},
		{"auth-not-initialized", auth.ErrNotInitialized},
		{"auth-invalid", auth.ErrInvalid},
	} {
		if errors.Is(err, c.err) {
			classes = append(classes, c.name)
		}
	}
	return fmt.Sprintf("[%s] %s", strings.Join(classes, ","), err)
}

// storeContents returns every key and value in db, in order.
func storeContents(t testing.TB, db *pebble.DB) string {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var sb strings.Builder
	for valid := it.First(); valid; valid = it.Next() {
		fmt.Fprintf(&sb, "%x = %x\n", it.Key(), it.Value())
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// checkRestart: a state machine reopened on the store has the state the
// running one has.
func (h *harness) checkRestart(t *testing.T) {
	t.Helper()
	want := dump(h.m)
	if diff := cmp.Diff(want, dump(h.open(t))); diff != "" {
		t.Errorf("state after a restart differs (-running +reopened):\n%s", diff)
	}
}

// checkReplay: the same log applied to a fresh state machine, all in one
// pass this time (the scripts apply one entry per pass), yields the same
// state and the same store.
func (h *harness) checkReplay(t *testing.T) {
	t.Helper()
	other := newHarness(t)
	var ents []*pb.Entry
	for i, data := range h.log {
		ents = append(ents, entry(uint64(i+1), data))
	}
	applyEntries(t, other.db, other.m, ents)
	if diff := cmp.Diff(dump(h.m), dump(other.m)); diff != "" {
		t.Errorf("the same log gave another state (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(storeContents(t, h.db), storeContents(t, other.db)); diff != "" {
		t.Errorf("the same log gave another store (-first +second):\n%s", diff)
	}
}
