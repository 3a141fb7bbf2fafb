package groups

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/engine/internal/stream"
	"github.com/rewind-io/rewind/raftlog"
)

// The scripts under testdata/ drive a Coordinator over real partitions: a
// Pebble store on an in-memory filesystem, a raft host running one
// single-voter group per partition, and a clock the script sets. Group
// commands go through a fake in front of the partitions
// (Config.groupCommand) that logs every command the coordinator proposes
// and can fail a chosen one, the way a command fails when this node is cut
// off from the partition's leader.
//
// The script plays the members' streams: every control message a member
// gets is printed under its name, and a revoke is acknowledged (its Done
// closed) at once unless the member is stuck.
//
// Commands:
//
//	topic partitions=N [revoke-timeout=DUR]
//	    A fresh store, host, topic (id 7) of N partitions and coordinator.
//	publish partition=P n=K
//	    Appends K records to partition P; prints its bounds.
//	truncate partition=P below=X
//	    Retention: removes partition P's records below offset X.
//	clock t=T
//	    Sets the clock (Unix ns) of the coordinator and the partitions.
//	join member=NAME [group=G] [start=earliest|latest|offset:N|time:T] [record]
//	    A member joins (JoinSpec.RecordStart with record).
//	leave member=NAME
//	stuck member=NAME
//	    The member stops acknowledging revokes (a stream blocked on a slow
//	    client).
//	commit [member=NAME] [gen=G] [group=G] offsets=P:OFF,...
//	    Commits with gen (default: the member's latest generation).
//	reset [group=G] to=earliest|latest|offset:N|shift:N|time:T|back:NANOS
//	      [partitions=P,...] [dry-run] [create]
//	fail partition=P [op=commit|fence|reset] [applied]
//	    The next command of that kind (any kind if none) to partition P
//	    fails with an unknown outcome; with applied it is applied first
//	    (the answer was lost, not the command).
//	coordinator
//	    Replaces the coordinator with a new one over the same partitions
//	    (the group's coordination moved to another node). The old
//	    coordinator's members are kept by name as zombies: they may still
//	    commit with the generation they were told.
//	delete [group=G] [force]
//	closeall
//	state [group=G]
//	    The coordinator's view (Live) and each partition's bounds and row.
//
// Every command that proposes prints the group commands it proposed, in
// order ("propose ..."; a commit's run in parallel, so they are sorted),
// then what each member received.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{t: t}
		defer h.close()
		datadriven.RunTest(t, path, h.cmd)
	})
}

const topicID = 7

// baseTime is the clock at the start of every script: member ids hold the
// clock in milliseconds, so a fixed clock makes them fixed too.
const baseTime = int64(1_000_000_000_000)

type harness struct {
	t     testing.TB
	db    *pebble.DB
	host  *raftlog.Host
	parts []*partition.Partition
	topic Topic
	clock atomic.Int64
	cfg   Config
	c     *Coordinator

	members []*tmember // in join order; zombies included

	mu struct {
		sync.Mutex
		proposed []string
		faults   []fault
	}
}

// tmember is a member as the script knows it.
type tmember struct {
	name   string
	m      *Member
	gen    uint64 // the latest generation it was told
	stuck  bool
	zombie bool // its coordinator was replaced
	got    []string
	parts  []uint32 // what its stream reads, from the control messages
}

// fault fails the next command of kind (any if empty) to partition.
type fault struct {
	partition uint32
	kind      partition.GroupOpKind
	applied   bool
}

var errCutOff = errors.New("fake: cut off from the partition's leader")

func (h *harness) open(n int, revokeTimeout time.Duration) {
	t := h.t
	t.Helper()
	db, err := store.Open(store.Config{Dir: "/data", FS: vfs.NewMem(), CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	host, err := raftlog.Open(raftlog.Config{NodeID: 1, DB: db, TickInterval: 10 * time.Millisecond})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	host.Start()
	h.db, h.host = db, host
	cache := partition.NewCache(1 << 20)
	h.parts = nil
	for i := range n {
		g := uint64(2 + i)
		p, err := partition.Open(partition.Config{
			Group: g, TopicID: topicID, Index: uint32(i), DB: db, Host: host, Cache: cache, Now: h.clock.Load,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := host.AddGroup(raftlog.GroupConfig{ID: g, Voters: []uint64{1}, SM: p}); err != nil {
			t.Fatal(err)
		}
		h.parts = append(h.parts, p)
	}
	h.topic = Topic{ID: topicID, Name: "t", Parts: h.parts}
	// Nothing publishes while a script's commit runs: a commit past the end
	// waits for nothing, so a short catch-up keeps scripts fast without
	// changing what they print (TestCommitWaitsForTheReplicaToCatchUp
	// covers the wait).
	h.cfg = Config{Now: h.clock.Load, RevokeTimeout: revokeTimeout, CommitCatchUp: time.Millisecond, groupCommand: h.groupCommand}
	h.c = New(h.cfg)
}

func (h *harness) close() {
	if h.host == nil {
		return
	}
	if err := h.host.Close(); err != nil {
		h.t.Errorf("host close: %v", err)
	}
	if err := h.db.Close(); err != nil {
		h.t.Errorf("store close: %v", err)
	}
	h.host, h.db, h.parts = nil, nil, nil
}

// groupCommand is the coordinator's way to the partitions: it logs the
// command and fails it if a fault matches.
func (h *harness) groupCommand(ctx context.Context, p *partition.Partition, op partition.GroupOp) (partition.GroupState, error) {
	h.mu.Lock()
	var f *fault
	for i := range h.mu.faults {
		if ff := h.mu.faults[i]; ff.partition == p.Index() && (ff.kind == "" || ff.kind == op.Kind) {
			f = &ff
			h.mu.faults = slices.Delete(h.mu.faults, i, i+1)
			break
		}
	}
	h.mu.Unlock()
	line := fmt.Sprintf("p%d %s gen=%d", p.Index(), op.Kind, op.Generation)
	if op.Kind == partition.OpCommit || op.Kind == partition.OpReset {
		line += fmt.Sprintf(" offset=%d", op.Offset)
	}
	if op.Kind == partition.OpReset {
		line += fmt.Sprintf(" epoch=%d", op.Epoch)
	}
	var st partition.GroupState
	var err error
	switch {
	case f != nil && f.applied:
		_, aerr := p.GroupCommand(ctx, op)
		err = fmt.Errorf("%w: %w (applied: %v)", partition.ErrOutcomeUnknown, errCutOff, aerr)
		line += ": applied, answer lost"
	case f != nil:
		err = fmt.Errorf("%w: %w", partition.ErrOutcomeUnknown, errCutOff)
		line += ": failed, not applied"
	default:
		st, err = p.GroupCommand(ctx, op)
		if err != nil {
			line += ": " + err.Error()
		}
	}
	h.mu.Lock()
	h.mu.proposed = append(h.mu.proposed, line)
	h.mu.Unlock()
	return st, err
}

func (h *harness) cmd(t *testing.T, d *datadriven.TestData) string {
	h.t = t
	if d.Cmd != "topic" && h.host == nil {
		d.Fatalf(t, "no topic yet")
	}
	switch d.Cmd {
	case "topic":
		h.close()
		var n int
		d.ScanArgs(t, "partitions", &n)
		timeout := 2 * time.Second
		if d.HasArg("revoke-timeout") {
			var s string
			d.ScanArgs(t, "revoke-timeout", &s)
			var err error
			if timeout, err = time.ParseDuration(s); err != nil {
				d.Fatalf(t, "%v", err)
			}
		}
		h.clock.Store(baseTime)
		h.members = nil
		h.mu.faults, h.mu.proposed = nil, nil
		h.open(n, timeout)
		return ""
	case "publish":
		var p, n int
		d.ScanArgs(t, "partition", &p)
		d.ScanArgs(t, "n", &n)
		recs := make([]record.Record, n)
		for i := range recs {
			recs[i] = record.Record{Key: []byte("k"), Value: []byte(fmt.Sprintf("p%d-%d", p, i))}
		}
		if _, err := h.parts[p].Append(context.Background(), recs); err != nil {
			d.Fatalf(t, "append: %v", err)
		}
		b := h.parts[p].Bounds()
		return fmt.Sprintf("p%d: [%d, %d)\n", p, b.LogStart, b.Next)
	case "truncate":
		var p int
		var below uint64
		d.ScanArgs(t, "partition", &p)
		d.ScanArgs(t, "below", &below)
		if err := h.parts[p].Truncate(context.Background(), below); err != nil {
			d.Fatalf(t, "truncate: %v", err)
		}
		b := h.parts[p].Bounds()
		return fmt.Sprintf("p%d: [%d, %d)\n", p, b.LogStart, b.Next)
	case "clock":
		var now int64
		d.ScanArgs(t, "t", &now)
		h.clock.Store(now)
		return ""
	case "join":
		return h.join(t, d)
	case "leave":
		m := h.member(t, d)
		return h.drive(func() error { h.c.Leave(m.m); return nil })
	case "stuck":
		h.member(t, d).stuck = true
		return ""
	case "commit":
		return h.commit(t, d)
	case "reset":
		return h.reset(t, d)
	case "fail":
		var f fault
		var p int
		d.ScanArgs(t, "partition", &p)
		f.partition = uint32(p)
		if d.HasArg("op") {
			var k string
			d.ScanArgs(t, "op", &k)
			f.kind = partition.GroupOpKind(k)
		}
		f.applied = d.HasArg("applied")
		h.mu.Lock()
		h.mu.faults = append(h.mu.faults, f)
		h.mu.Unlock()
		return ""
	case "coordinator":
		for _, m := range h.members {
			m.zombie = true
		}
		h.c = New(h.cfg)
		return ""
	case "delete":
		force := d.HasArg("force")
		name := groupArg(t, d)
		return h.drive(func() error { return h.c.Delete(name, force) })
	case "closeall":
		return h.drive(func() error { h.c.CloseAll(errors.New("coordinator moved")); return nil })
	case "state":
		return h.state(t, groupArg(t, d))
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
		return ""
	}
}

func groupArg(t *testing.T, d *datadriven.TestData) string {
	name := "g"
	d.MaybeScanArgs(t, "group", &name)
	return name
}

func (h *harness) member(t *testing.T, d *datadriven.TestData) *tmember {
	var name string
	d.ScanArgs(t, "member", &name)
	for _, m := range h.members {
		if m.name == name {
			return m
		}
	}
	d.Fatalf(t, "no member %q", name)
	return nil
}

func parseStart(t *testing.T, d *datadriven.TestData, s string) cursor.Start {
	kind, arg, _ := strings.Cut(s, ":")
	num := func() uint64 {
		v, err := strconv.ParseUint(arg, 10, 64)
		if err != nil {
			d.Fatalf(t, "start %q: %v", s, err)
		}
		return v
	}
	switch kind {
	case "earliest":
		return cursor.Start{Kind: cursor.Earliest}
	case "latest":
		return cursor.Start{Kind: cursor.Latest}
	case "offset":
		return cursor.Start{Kind: cursor.AtOffset, Offset: num()}
	case "time":
		return cursor.Start{Kind: cursor.AtTime, Time: int64(num())}
	case "token":
		return cursor.Start{Kind: cursor.FromToken}
	}
	d.Fatalf(t, "unknown start %q", s)
	return cursor.Start{}
}

func (h *harness) join(t *testing.T, d *datadriven.TestData) string {
	var name string
	d.ScanArgs(t, "member", &name)
	start := "latest"
	d.MaybeScanArgs(t, "start", &start)
	spec := JoinSpec{ClientName: name, Start: parseStart(t, d, start), RecordStart: d.HasArg("record")}
	group := groupArg(t, d)
	var m *Member
	out := h.drive(func() error {
		var err error
		m, err = h.c.Join(context.Background(), group, h.topic, spec)
		return err
	})
	if m == nil {
		return out
	}
	var sb strings.Builder
	h.print(&sb, h.added(name, m))
	return out + sb.String()
}

// added records a member that joined and receives its first assignment,
// queued before Join returned.
func (h *harness) added(name string, m *Member) *tmember {
	tm := &tmember{name: name, m: m}
	h.members = append(h.members, tm)
	h.drain(tm)
	return tm
}

func parseOffsets(t *testing.T, d *datadriven.TestData) map[uint32]uint64 {
	var s string
	d.ScanArgs(t, "offsets", &s)
	out := map[uint32]uint64{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, ":")
		p, err1 := strconv.ParseUint(k, 10, 32)
		off, err2 := strconv.ParseUint(v, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			d.Fatalf(t, "offsets: bad %q", kv)
		}
		out[uint32(p)] = off
	}
	return out
}

func (h *harness) commit(t *testing.T, d *datadriven.TestData) string {
	var gen uint64
	if d.HasArg("member") {
		gen = h.member(t, d).gen
	}
	d.MaybeScanArgs(t, "gen", &gen)
	offsets := parseOffsets(t, d)
	group := groupArg(t, d)
	var sb strings.Builder
	err := h.c.Commit(context.Background(), group, h.topic, gen, offsets)
	proposed := h.takeProposed()
	slices.Sort(proposed) // one goroutine per partition
	for _, p := range proposed {
		fmt.Fprintf(&sb, "propose %s\n", p)
	}
	fmt.Fprintf(&sb, "commit gen=%d: %s\n", gen, describe(err))
	return sb.String()
}

func parseTarget(t *testing.T, d *datadriven.TestData) Target {
	var s string
	d.ScanArgs(t, "to", &s)
	kind, arg, _ := strings.Cut(s, ":")
	num := func() int64 {
		v, err := strconv.ParseInt(arg, 10, 64)
		if err != nil {
			d.Fatalf(t, "to %q: %v", s, err)
		}
		return v
	}
	switch kind {
	case "earliest":
		return Target{Kind: ToEarliest}
	case "latest":
		return Target{Kind: ToLatest}
	case "offset":
		return Target{Kind: ToOffset, Offset: uint64(num())}
	case "shift":
		return Target{Kind: ToShift, Shift: num()}
	case "time":
		return Target{Kind: ToTime, Time: num()}
	case "back":
		return Target{Kind: ToTimeBack, Time: num()}
	}
	d.Fatalf(t, "unknown target %q", s)
	return Target{}
}

func (h *harness) reset(t *testing.T, d *datadriven.TestData) string {
	target := parseTarget(t, d)
	var parts []uint32
	if d.HasArg("partitions") {
		var s string
		d.ScanArgs(t, "partitions", &s)
		for _, f := range strings.Split(s, ",") {
			p, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				d.Fatalf(t, "partitions: %v", err)
			}
			parts = append(parts, uint32(p))
		}
	}
	group := groupArg(t, d)
	var plan Plan
	out := h.drive(func() error {
		var err error
		plan, err = h.c.Reset(context.Background(), group, h.topic, target, parts, d.HasArg("dry-run"), d.HasArg("create"))
		return err
	})
	var sb strings.Builder
	for _, r := range plan.Rows {
		fmt.Fprintf(&sb, "plan p%d: had-commit=%t current=%d new=%d reread=%d lag=%d clamped=%t log=[%d, %d)\n",
			r.Partition, r.HadCommit, r.Current, r.New, r.Reread, r.Lag, r.Clamped, r.LogStart, r.End)
	}
	if plan.Executed {
		fmt.Fprintf(&sb, "executed: generation=%d epoch=%d\n", plan.Generation, plan.Epoch)
	}
	return sb.String() + out
}

// drive runs op, which may wait for members to acknowledge revokes, while
// playing every member's stream; then prints the commands op proposed and
// what each member received, in join order (a member's messages are in the
// order it got them).
func (h *harness) drive(op func() error) string {
	done := make(chan error, 1)
	go func() { done <- op() }()
	var err error
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(done)}}
		for _, m := range h.members {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.m.Control)})
		}
		i, v, _ := reflect.Select(cases)
		if i == 0 {
			if !v.IsNil() {
				err = v.Interface().(error)
			}
			break
		}
		h.receive(h.members[i-1], v.Interface().(stream.Control))
	}
	var sb strings.Builder
	for _, p := range h.takeProposed() {
		fmt.Fprintf(&sb, "propose %s\n", p)
	}
	for _, m := range h.members {
		h.drain(m)
		h.print(&sb, m)
	}
	if err != nil {
		fmt.Fprintf(&sb, "error: %s\n", describe(err))
	}
	return sb.String()
}

func (h *harness) takeProposed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.mu.proposed
	h.mu.proposed = nil
	return p
}

// drain receives what is queued for m without waiting: every send of an
// operation happened before it returned.
func (h *harness) drain(m *tmember) {
	for {
		select {
		case ctl := <-m.m.Control:
			h.receive(m, ctl)
		default:
			return
		}
	}
}

func (h *harness) print(sb *strings.Builder, m *tmember) {
	for _, s := range m.got {
		fmt.Fprintf(sb, "%s: %s\n", m.name, s)
	}
	m.got = nil
}

// receive is m's stream applying a control message.
func (h *harness) receive(m *tmember, ctl stream.Control) {
	var parts []string
	if a := ctl.Assignment; a != nil {
		if a.MemberID != m.m.ID {
			h.t.Fatalf("%s got an assignment for member %s", m.m.ID, a.MemberID)
		}
		if a.Generation < m.gen {
			h.t.Fatalf("%s told generation %d after %d", m.name, a.Generation, m.gen)
		}
		m.gen = a.Generation
		parts = append(parts, fmt.Sprintf("gen=%d epoch=%d", a.Generation, a.Epoch))
		if len(a.Revoke) > 0 {
			parts = append(parts, fmt.Sprintf("revoke=%v", a.Revoke))
			m.parts = slices.DeleteFunc(m.parts, func(p uint32) bool { return slices.Contains(a.Revoke, p) })
		}
		if len(a.Add) > 0 {
			var adds []string
			for _, ad := range a.Add {
				s := fmt.Sprintf("p%d@%d", ad.Cursor.Partition, ad.Cursor.Next)
				if ad.Cursor.Clamped {
					s += "(clamped)"
				}
				adds = append(adds, s)
				m.parts = append(m.parts, ad.Cursor.Partition)
			}
			slices.Sort(m.parts)
			parts = append(parts, "add=["+strings.Join(adds, " ")+"]")
		}
	}
	for _, s := range ctl.Seeks {
		parts = append(parts, fmt.Sprintf("seek p%d@%d gen=%d epoch=%d", s.Partition, s.Offset, s.Generation, s.Epoch))
	}
	if ctl.Close != nil {
		parts = append(parts, "close: "+describe(ctl.Close))
	}
	if ctl.Done != nil {
		if m.stuck {
			parts = append(parts, "(not acknowledged: stuck)")
		} else {
			close(ctl.Done)
			parts = append(parts, "(acknowledged)")
		}
	}
	m.got = append(m.got, strings.Join(parts, " "))
}

func (h *harness) state(t *testing.T, group string) string {
	li, err := h.c.Live(group, h.topic)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "generation=%d epoch=%d\n", li.Generation, li.Epoch)
	for _, mi := range li.Members {
		name := "?"
		for _, m := range h.members {
			if m.m.ID == mi.ID {
				name = m.name
			}
		}
		if mi.ClientName != name {
			t.Fatalf("member %s has client name %q", name, mi.ClientName)
		}
		fmt.Fprintf(&sb, "member %s: partitions=%v\n", name, mi.Partitions)
	}
	for _, p := range h.parts {
		b := p.Bounds()
		st, ok, err := p.GroupState(group)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "p%d [%d, %d): ", p.Index(), b.LogStart, b.Next)
		if !ok {
			sb.WriteString("no row\n")
			continue
		}
		if st.Committed {
			fmt.Fprintf(&sb, "offset=%d", st.Offset)
		} else {
			sb.WriteString("no commit")
		}
		fmt.Fprintf(&sb, " fence=%d epoch=%d\n", st.Fence, st.Epoch)
	}
	return sb.String()
}

// describe prints err with the classes it belongs to, so a script checks
// both what the caller reads and what errors.Is tells the API edge.
func describe(err error) string {
	if err == nil {
		return "ok"
	}
	var classes []string
	for _, c := range []struct {
		name string
		err  error
	}{
		{"fenced", partition.ErrFenced},
		{"unknown-generation", ErrUnknownGeneration},
		{"no-group", ErrNoGroup},
		{"has-members", ErrHasMembers},
		{"deleted", ErrDeleted},
		{"invalid", cursor.ErrInvalid},
		{"outcome-unknown", partition.ErrOutcomeUnknown},
	} {
		if errors.Is(err, c.err) {
			classes = append(classes, c.name)
		}
	}
	if oor := (*cursor.OutOfRangeError)(nil); errors.As(err, &oor) {
		classes = append(classes, "out-of-range")
	}
	lines := strings.Split(err.Error(), "\n")
	slices.Sort(lines) // errors.Join of parallel commits
	return fmt.Sprintf("[%s] %s", strings.Join(classes, ","), strings.Join(lines, "; "))
}
