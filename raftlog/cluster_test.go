package raftlog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestCluster runs the scripts in testdata/cluster. Each starts with an
// empty cluster; see the top of each file for the behaviour it pins down.
func TestCluster(t *testing.T) {
	datadriven.Walk(t, "testdata/cluster", func(t *testing.T, path string) {
		c := newCluster(t, 1)
		defer c.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			c.t = t
			out := c.run(t, d)
			if len(c.violations) > 0 {
				t.Fatalf("%s: safety violated:\n%s", d.Pos, strings.Join(c.violations, "\n"))
			}
			return out
		})
	})
}

func scanNode(t *testing.T, c *cluster, d *datadriven.TestData, key string) *simNode {
	var id uint64
	d.ScanArgs(t, key, &id)
	return c.node(id)
}

func scanGroup(t *testing.T, d *datadriven.TestData) uint64 {
	var g uint64
	d.ScanArgs(t, "group", &g)
	return g
}

// upNode returns the node named by key, failing the test if it is down.
func upNode(t *testing.T, c *cluster, d *datadriven.TestData, key string) *simNode {
	n := scanNode(t, c, d, key)
	if !n.up() {
		d.Fatalf(t, "n%d is down", n.id)
	}
	return n
}

func (c *cluster) raftGroup(t *testing.T, d *datadriven.TestData, n *simNode, group uint64) *group {
	g, ok := n.h.groups[group]
	if !ok {
		d.Fatalf(t, "n%d does not run group %d", n.id, group)
	}
	n.h.touch(g) // the caller changes its raft state directly
	return g
}

func errOrOK(err error) string {
	if err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	return "ok\n"
}

func scanTransition(t *testing.T, d *datadriven.TestData) *pb.ConfChangeTransition {
	tr := "auto"
	d.MaybeScanArgs(t, "transition", &tr)
	switch tr {
	case "auto":
		return pb.ConfChangeTransitionAuto.Enum()
	case "implicit":
		return pb.ConfChangeTransitionJointImplicit.Enum()
	case "explicit":
		return pb.ConfChangeTransitionJointExplicit.Enum()
	}
	d.Fatalf(t, "unknown transition %q", tr)
	return nil
}

// run executes one script command. Commands that act on one node run its
// loop once and then deliver every message until the network is quiet,
// unless given nodeliver.
func (c *cluster) run(t *testing.T, d *datadriven.TestData) string {
	settle := func() {
		if !d.HasArg("nodeliver") {
			c.deliver()
		}
	}
	switch d.Cmd {
	case "nodes":
		var n int
		d.ScanArgs(t, "n", &n)
		if d.MaybeScanArgs(t, "election", &c.election) && len(c.nodes) > 0 {
			d.Fatalf(t, "election must be set before the first node")
		}
		if d.MaybeScanArgs(t, "detect", &c.detect) && len(c.nodes) > 0 {
			d.Fatalf(t, "detect must be set before the first node")
		}
		c.addNodes(n)
		return "ok\n"

	case "group":
		gc := GroupConfig{ForwardProposals: d.HasArg("forward")}
		d.ScanArgs(t, "id", &gc.ID)
		if d.HasArg("join") {
			gc.Join = true
			return errOrOK(c.addGroup(upNode(t, c, d, "node"), gc))
		}
		d.ScanArgs(t, "voters", &gc.Voters)
		for _, id := range gc.Voters {
			if err := c.addGroup(c.node(id), gc); err != nil {
				return errOrOK(err)
			}
		}
		return "ok\n"

	case "campaign":
		n := upNode(t, c, d, "node")
		err := c.raftGroup(t, d, n, scanGroup(t, d)).rn.Campaign()
		c.iterate(n)
		settle()
		return errOrOK(err)

	case "forget-leader":
		n := upNode(t, c, d, "node")
		err := c.raftGroup(t, d, n, scanGroup(t, d)).rn.ForgetLeader()
		c.iterate(n)
		return errOrOK(err)

	case "propose":
		n := upNode(t, c, d, "node")
		var data []string
		d.ScanArgs(t, "data", &data)
		err := c.propose(n, scanGroup(t, d), data...)
		settle()
		return errOrOK(err)

	case "proposals":
		n := upNode(t, c, d, "node")
		sm, ok := n.sms[scanGroup(t, d)]
		if !ok {
			d.Fatalf(t, "n%d does not run the group", n.id)
		}
		var b strings.Builder
		for _, o := range sm.outcomes {
			fmt.Fprintf(&b, "%s\n", o)
		}
		for _, p := range sm.inflight {
			fmt.Fprintf(&b, "%s: in flight\n", p.data)
		}
		for _, q := range sm.queue {
			fmt.Fprintf(&b, "%s: queued\n", q)
		}
		if b.Len() == 0 {
			return "none\n"
		}
		return b.String()

	case "tick":
		k := 1
		d.MaybeScanArgs(t, "n", &k)
		var ids []uint64
		d.MaybeScanArgs(t, "nodes", &ids)
		for range k {
			c.tickNodes(ids)
			settle()
		}
		return "ok\n"

	case "deliver":
		if d.HasArg("rounds") {
			var k int
			d.ScanArgs(t, "rounds", &k)
			for range k {
				c.deliverRoundTo(!d.HasArg("noiterate"))
			}
		} else {
			c.deliver()
		}
		return "ok\n"

	case "msgs":
		return c.fmtQueue()

	case "sends":
		// Prints the Send calls since the last sends command (the first
		// one starts recording).
		out := strings.Join(c.sends, "\n") + "\n"
		if !c.recordSends {
			out = "recording\n"
		}
		c.sends, c.recordSends = nil, true
		return out

	case "partition":
		var sets [][]uint64
		for _, a := range d.CmdArgs {
			var set []uint64
			for _, f := range strings.Split(strings.Trim(a.Key, "()"), ",") {
				id, err := strconv.ParseUint(f, 10, 64)
				if err != nil {
					d.Fatalf(t, "partition: bad set %q", a.Key)
				}
				set = append(set, id)
			}
			sets = append(sets, set)
		}
		c.partition(sets)
		return "ok\n"

	case "drop":
		var l link
		d.ScanArgs(t, "from", &l.from)
		d.ScanArgs(t, "to", &l.to)
		c.cut[l] = true
		return "ok\n"

	case "delay":
		var l link
		var rounds int
		d.ScanArgs(t, "from", &l.from)
		d.ScanArgs(t, "to", &l.to)
		d.ScanArgs(t, "rounds", &rounds)
		c.delay[l] = rounds
		return "ok\n"

	case "reorder":
		var seed uint64
		d.ScanArgs(t, "seed", &seed)
		c.reorder = true
		c.rng = rand.New(rand.NewPCG(seed, seed))
		return "ok\n"

	case "heal":
		c.heal()
		return "ok\n"

	case "stall":
		// The node's process stops: no ticks, no loop; messages sent to
		// it wait in its inbox.
		c.stalled[upNode(t, c, d, "node").id] = true
		return "ok\n"

	case "resume":
		n := upNode(t, c, d, "node")
		delete(c.stalled, n.id)
		// Like the host's ticker after a stall: one tick is pending,
		// the rest were dropped.
		n.h.tick()
		c.iterate(n)
		settle()
		return "ok\n"

	case "detector":
		// What each running node's failure detector did.
		var b strings.Builder
		for _, n := range c.nodes {
			if n.up() {
				s := n.h.DetectorStats()
				fmt.Fprintf(&b, "n%d: suspicions=%d withdrawn=%d campaigns=%d\n", n.id, s.Suspicions, s.Withdrawn, s.Campaigns)
			}
		}
		return b.String()

	case "crash":
		c.crash(scanNode(t, c, d, "node"), 0)
		return "ok\n"

	case "wipe":
		n := scanNode(t, c, d, "node")
		c.crash(n, 0)
		n.fs = vfs.NewCrashableMem()
		return "ok\n"

	case "restart":
		n := scanNode(t, c, d, "node")
		if n.up() {
			d.Fatalf(t, "n%d is up", n.id)
		}
		c.start(n)
		return "ok\n"

	case "status":
		return c.fmtStatus(scanGroup(t, d), d.HasArg("match"))

	case "log":
		var only uint64
		d.MaybeScanArgs(t, "node", &only)
		return c.fmtLog(scanGroup(t, d), only)

	case "counters":
		// What each running node counted for the group (Counters).
		group := scanGroup(t, d)
		var b strings.Builder
		for _, n := range c.nodes {
			if !n.up() {
				continue
			}
			if g, ok := n.h.groups[group]; ok {
				fmt.Fprintf(&b, "n%d: leader-changes=%d proposals-dropped=%d snapshots-sent=%d\n", n.id,
					g.counters.LeaderChanges.Load(), g.counters.ProposalsDropped.Load(), g.counters.SnapshotsSent.Load())
			}
		}
		return b.String()

	case "check":
		if p := c.check(scanGroup(t, d)); len(p) > 0 {
			return strings.Join(p, "\n") + "\n"
		}
		return "ok\n"

	case "truncate":
		n := upNode(t, c, d, "node")
		sm, ok := n.sms[scanGroup(t, d)]
		if !ok {
			d.Fatalf(t, "n%d does not run the group", n.id)
		}
		d.ScanArgs(t, "index", &sm.truncateAt)
		return "ok\n"

	case "add-replica", "remove-replica", "leave-joint":
		via := upNode(t, c, d, "via")
		group := scanGroup(t, d)
		cc := &pb.ConfChangeV2{Transition: scanTransition(t, d)}
		if d.Cmd != "leave-joint" {
			typ := pb.ConfChangeAddNode
			switch {
			case d.Cmd == "remove-replica":
				typ = pb.ConfChangeRemoveNode
			case d.HasArg("learner"):
				typ = pb.ConfChangeAddLearnerNode
			}
			var ids []uint64
			d.ScanArgs(t, "node", &ids)
			for _, id := range ids {
				cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: typ.Enum(), NodeId: proto.Uint64(id)})
			}
		}
		if d.HasArg("remove") {
			var ids []uint64
			d.ScanArgs(t, "remove", &ids)
			for _, id := range ids {
				cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(id)})
			}
		}
		err := c.call(via, func(h *Host) error { return h.ProposeConfChange(group, cc) })
		settle()
		return errOrOK(err)

	case "transfer-leader":
		from := upNode(t, c, d, "from")
		var to uint64
		d.ScanArgs(t, "to", &to)
		group := scanGroup(t, d)
		err := c.call(from, func(h *Host) error { return h.TransferLeader(group, to) })
		settle()
		return errOrOK(err)

	case "remove-group":
		n := upNode(t, c, d, "node")
		group := scanGroup(t, d)
		err := c.call(n, func(h *Host) error { return h.RemoveGroup(group) })
		if err == nil {
			delete(n.groups, group)
			delete(n.sms, group)
		}
		settle()
		return errOrOK(err)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// TestClusterRandomized runs proposals on random nodes through a network
// that drops, delays and reorders messages, partitions itself, and crashes
// nodes (losing their unsynced writes), with elections left to raft's own
// timeouts. It then heals everything and checks raft's safety on what the
// state machines applied: every node applied the same entry at each index
// two of them applied, no entry was applied twice, no proposal reported lost
// was applied, and at the end every node applied the same log.
//
// The seed (logged; RAFTLOG_CLUSTER_SEED replays it) fixes the network and
// the workload. Raft's election timeouts come from crypto/rand and cannot be
// seeded, so a replay may elect different leaders; the checked properties
// hold whatever raft chooses.
func TestClusterRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RAFTLOG_CLUSTER_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for run := range 4 {
		runRandomized(t, run, rng.Uint64())
	}
}

func runRandomized(t *testing.T, run int, seed uint64) {
	c := newCluster(t, seed)
	defer c.close()
	if run%2 == 1 {
		// Every other run with the failure detector on: its elections
		// come on top of raft's own, and safety must hold the same.
		c.detect = 5
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	nodes := 3 + 2*rng.IntN(2)
	voters := make([]uint64, nodes)
	all := make([]uint64, nodes+1)
	for i := range all {
		all[i] = uint64(i + 1)
	}
	copy(voters, all)
	// The last node joins group 10 by a conf change during the run.
	c.addNodes(nodes + 1)
	joiner := c.node(uint64(nodes + 1))
	groups := []uint64{10, 20}
	for _, g := range groups {
		for _, id := range voters {
			// Group 20 forwards followers' proposals to the leader.
			if err := c.addGroup(c.node(id), GroupConfig{ID: g, Voters: voters, ForwardProposals: g == 20}); err != nil {
				t.Fatal(err)
			}
		}
	}
	live := func() []*simNode {
		var out []*simNode
		for _, n := range c.nodes {
			if n.up() {
				out = append(out, n)
			}
		}
		return out
	}
	// join proposes adding the joiner to group 10 through whichever live
	// node leads it, until the change is applied there.
	join := func() {
		if !joiner.up() {
			return
		}
		if _, ok := joiner.groups[10]; !ok {
			if err := c.addGroup(joiner, GroupConfig{ID: 10, Join: true}); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range live() {
			if s, ok := n.h.Status(10); ok && s.Leading && !slices.Contains(s.Voters, joiner.id) {
				cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(joiner.id)}}}
				// Refused while another change is pending; tried again later.
				_ = c.call(n, func(h *Host) error { return h.ProposeConfChange(10, cc) })
			}
		}
	}
	proposed := 0
	for step := range 1500 {
		switch r := rng.IntN(100); {
		case r < 35:
			if l := live(); len(l) > 0 {
				n := l[rng.IntN(len(l))]
				g := groups[rng.IntN(len(groups))]
				if _, ok := n.sms[g]; ok {
					proposed++
					if err := c.propose(n, g, fmt.Sprintf("r%d-%d", run, proposed)); err != nil {
						t.Fatal(err)
					}
				}
			}
		case r < 73:
			c.tick()
		case r < 76:
			// Split the nodes in two at random (either side may be empty).
			c.heal()
			var a, b []uint64
			for _, id := range all {
				if rng.IntN(2) == 0 {
					a = append(a, id)
				} else {
					b = append(b, id)
				}
			}
			c.partition([][]uint64{a, b})
		case r < 79:
			c.heal()
		case r < 82:
			c.dropRate = []float64{0, 0.05, 0.2}[rng.IntN(3)]
			c.reorder = rng.IntN(2) == 0
		case r < 84:
			l := link{all[rng.IntN(len(all))], all[rng.IntN(len(all))]}
			c.delay[l] = rng.IntN(4)
		case r < 86:
			if l := live(); len(l) > len(all)/2+1 {
				c.crash(l[rng.IntN(len(l))], rng.IntN(101))
				c.stats.crashes++
			}
		case r < 89:
			for _, n := range c.nodes {
				if !n.up() {
					c.start(n)
					break
				}
			}
		case r < 93:
			if l := live(); len(l) > 0 {
				n := l[rng.IntN(len(l))]
				g := groups[rng.IntN(len(groups))]
				if s, ok := n.h.Status(g); ok && s.Applied > 3 {
					n.sms[g].truncateAt = s.Applied - uint64(rng.IntN(4))
				}
			}
		case r < 95:
			if step > 300 {
				join()
			}
		}
		// Sometimes leave what arrived in the inboxes, so that the next
		// proposal's pass steps messages and takes proposals together.
		c.deliverRoundTo(rng.IntN(4) != 0)
		if len(c.violations) > 0 {
			t.Fatalf("run %d step %d: safety violated:\n%s", run, step, strings.Join(c.violations, "\n"))
		}
	}

	// Heal, restart everyone, and let the cluster converge.
	c.heal()
	for _, n := range c.nodes {
		if !n.up() {
			c.start(n)
		}
	}
	converged := func() bool {
		for _, g := range groups {
			var want *Status
			for _, n := range c.nodes {
				if _, runs := n.groups[g]; !runs {
					continue
				}
				s, ok := n.h.Status(g)
				if !ok || s.Leader == 0 || s.Applied != s.Commit || len(s.VotersOutgoing) > 0 {
					return false
				}
				if g == 10 && !slices.Contains(s.Voters, joiner.id) {
					return false
				}
				if want == nil {
					want = &s
				} else if s.Leader != want.Leader || s.Applied != want.Applied {
					return false
				}
			}
		}
		return true
	}
	for i := 0; !converged(); i++ {
		if i > 2000 {
			var b strings.Builder
			for _, g := range groups {
				b.WriteString(c.fmtStatus(g, true))
			}
			t.Fatalf("run %d (seed %d): no convergence:\n%s", run, seed, b.String())
		}
		join()
		c.tick()
		c.deliver()
	}
	// One proposal per group through its leader, so every node applies an
	// entry of the last term (settling proposals still in flight).
	for _, g := range groups {
		s, _ := c.nodes[0].h.Status(g)
		if err := c.propose(c.node(s.Leader), g, fmt.Sprintf("r%d-final-%d", run, g)); err != nil {
			t.Fatal(err)
		}
		c.deliver()
		c.tick()
		c.deliver()
	}
	for _, g := range groups {
		if p := c.check(g); len(p) > 0 {
			t.Fatalf("run %d (seed %d) group %d:\n%s", run, seed, g, strings.Join(p, "\n"))
		}
		checkConverged(t, c, g)
	}
	t.Logf("run %d: %d+1 nodes, %d proposals, applied %d/%d, %d crashes, %d snapshots restored, %d lost, highest term %d",
		run, nodes, proposed, len(c.history[10]), len(c.history[20]), c.stats.crashes, c.stats.snapshots,
		len(c.lost[10])+len(c.lost[20]), c.highestTerm(groups))
}

func (c *cluster) highestTerm(groups []uint64) uint64 {
	var term uint64
	for _, n := range c.nodes {
		for _, g := range groups {
			if s, ok := n.h.Status(g); ok {
				term = max(term, s.Term)
			}
		}
	}
	return term
}

// checkConverged checks that every node of group holds the same rows after
// the highest snapshot any of them restored, and that no proposal taken
// while leading is left unsettled.
func checkConverged(t *testing.T, c *cluster, group uint64) {
	t.Helper()
	var floor uint64
	states := map[uint64]smState{}
	for _, n := range c.nodes {
		if _, runs := n.groups[group]; !runs {
			continue
		}
		st, err := readSMState(n.db, group)
		if err != nil {
			t.Fatal(err)
		}
		states[n.id] = st
		floor = max(floor, st.snapshot)
	}
	var want []smRow
	first := true
	for _, n := range c.nodes {
		st, ok := states[n.id]
		if !ok {
			continue
		}
		var got []smRow
		for _, r := range st.rows {
			if r.index > floor {
				got = append(got, r)
			}
		}
		if first {
			want, first = got, false
		} else if !slices.Equal(got, want) {
			t.Fatalf("group %d: n%d applied %v after %d, others %v", group, n.id, got, floor, want)
		}
		s, _ := n.h.Status(group)
		for _, p := range n.sms[group].inflight {
			// A proposal taken while leading is settled once an entry of
			// a later term is applied.
			if p.term != 0 && s.Term > p.term {
				t.Fatalf("group %d: n%d proposal %q of term %d unsettled at term %d", group, n.id, p.data, p.term, s.Term)
			}
		}
	}
}
