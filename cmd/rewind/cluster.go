package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

func newCluster(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect the cluster and move partition leadership"}
	cmd.AddCommand(newClusterStatus(g), newClusterTransferLeader(g), newClusterRemoveNode(g), newClusterRebalance(g))
	return cmd
}

// clusterView is what every member said, merged: for each partition the
// view at the highest term any member reported, the leader's own when it
// answered, and the members whose view is older (stale).
type clusterView struct {
	ClusterID      uint64                      `json:"cluster_id"`
	MetadataLeader uint64                      `json:"metadata_leader"`
	Nodes          []clusterNode               `json:"nodes"`
	Partitions     []*rewindv1.PartitionStatus `json:"-"`
	// Stale has, per partition in Partitions, the members whose view of
	// it is older than the one shown.
	Stale          [][]staleView    `json:"-"`
	PartitionsJSON []map[string]any `json:"partitions"`
}

type clusterNode struct {
	ID      uint64 `json:"id"`
	Address string `json:"address"`
	// Healthy: the node answered. Ready: it says it can serve (its own
	// /readyz); NotReady says why not.
	Healthy  bool   `json:"healthy"`
	Ready    bool   `json:"ready"`
	NotReady string `json:"not_ready,omitempty"`
	Error    string `json:"error,omitempty"`
}

// staleView is a member's view of a partition at a term older than the
// newest one heard of: it has not heard of the last election (it was
// stopped or cut off, or its answer raced the election).
type staleView struct {
	Node   uint64 `json:"node"`
	Leader uint64 `json:"leader"`
	Term   uint64 `json:"term"`
}

// memberStatusTimeout bounds each member's answer: a paused member must
// not hold the whole command.
const memberStatusTimeout = 3 * time.Second

// gatherStatus asks the server, then every member it lists.
func gatherStatus(ctx context.Context, g *globals) (*clusterView, error) {
	first, err := g.client().ClusterStatus(ctx)
	if err != nil {
		return nil, err
	}
	v := &clusterView{ClusterID: first.GetClusterId(), MetadataLeader: first.GetMetadataLeader()}
	answers := map[uint64]*client.ClusterStatus{first.GetNodeId(): first}
	for _, n := range first.GetNodes() {
		cn := clusterNode{ID: n.GetId(), Address: n.GetAddress()}
		st, ok := answers[n.GetId()]
		if !ok && n.GetAddress() != "" {
			mctx, cancel := context.WithTimeout(ctx, memberStatusTimeout)
			var err error
			st, err = g.clientAt(n.GetAddress()).ClusterStatus(mctx)
			cancel()
			if err != nil {
				cn.Error = err.Error()
			} else {
				answers[n.GetId()] = st
			}
		}
		cn.Healthy = st != nil
		if st != nil {
			cn.Ready, cn.NotReady = st.GetReady(), st.GetNotReady()
		}
		v.Nodes = append(v.Nodes, cn)
	}
	v.Partitions, v.Stale = mergePartitions(answers)
	for i, p := range v.Partitions {
		lag := map[string]any{}
		for _, r := range p.GetProgress() {
			var l any = r.GetLag()
			if r.GetLagUnknown() {
				l = nil // not known yet
			}
			lag[strconv.FormatUint(r.GetNode(), 10)] = l
		}
		pj := map[string]any{
			"topic": p.GetTopic(), "partition": p.GetPartition(), "replicas": p.GetReplicas(), "leader": p.GetLeader(),
			"preferred_leader": first0(p.GetReplicas()), "term": p.GetTerm(), "commit_index": p.GetCommitIndex(),
			"applied_index": p.GetAppliedIndex(), "last_index": p.GetLastIndex(), "log_start_offset": p.GetLogStartOffset(),
			"next_offset": p.GetNextOffset(), "lag": lag,
		}
		if len(v.Stale[i]) > 0 {
			pj["stale_views"] = v.Stale[i]
		}
		v.PartitionsJSON = append(v.PartitionsJSON, pj)
	}
	return v, nil
}

// mergePartitions picks, for every partition, the view to show from the
// members' answers (by node id): the one at the highest term (raft's terms
// only grow, so a lower one is older news, even from a node that believes
// it leads); at that term the leader's own (it has the replicas'
// progress), else one that names a leader. The members that hold a
// replica but report a lower term are returned as stale, by node id.
// Partitions come sorted by topic and number.
func mergePartitions(answers map[uint64]*client.ClusterStatus) ([]*rewindv1.PartitionStatus, [][]staleView) {
	type key struct {
		topic string
		p     uint32
	}
	rank := func(id uint64, p *rewindv1.PartitionStatus) [3]uint64 {
		own, named := uint64(0), uint64(0)
		if p.GetLeader() == id && len(p.GetProgress()) > 0 {
			own = 1
		}
		if p.GetLeader() != 0 {
			named = 1
		}
		return [3]uint64{p.GetTerm(), own, named}
	}
	less := func(a, b [3]uint64) bool { return slices.Compare(a[:], b[:]) < 0 }
	best := map[key]*rewindv1.PartitionStatus{}
	bestRank := map[key][3]uint64{}
	for _, id := range slices.Sorted(maps.Keys(answers)) {
		for _, p := range answers[id].GetPartitions() {
			k := key{p.GetTopic(), p.GetPartition()}
			if r := rank(id, p); best[k] == nil || less(bestRank[k], r) {
				best[k], bestRank[k] = p, r
			}
		}
	}
	out := slices.SortedFunc(maps.Values(best), func(a, b *rewindv1.PartitionStatus) int {
		return cmp.Or(cmp.Compare(a.GetTopic(), b.GetTopic()), cmp.Compare(a.GetPartition(), b.GetPartition()))
	})
	stale := make([][]staleView, len(out))
	for i, b := range out {
		for _, id := range slices.Sorted(maps.Keys(answers)) {
			for _, p := range answers[id].GetPartitions() {
				if p.GetTopic() == b.GetTopic() && p.GetPartition() == b.GetPartition() && p.GetHosted() && p.GetTerm() < b.GetTerm() {
					stale[i] = append(stale[i], staleView{Node: id, Leader: p.GetLeader(), Term: p.GetTerm()})
				}
			}
		}
	}
	return out, stale
}

func first0(s []uint64) uint64 {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

func newClusterStatus(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show members, their health, and every partition's leader, replicas, raft indexes and lag",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			v, err := gatherStatus(cmd.Context(), g)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(v)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "cluster %016x, metadata leader %d\n\n", v.ClusterID, v.MetadataLeader)
			fmt.Fprintln(w, "NODE\tADDRESS\tHEALTH")
			for _, n := range v.Nodes {
				h := "ready"
				switch {
				case !n.Healthy:
					h = "down: " + n.Error
				case !n.Ready:
					h = "not ready: " + n.NotReady
				}
				fmt.Fprintf(w, "%d\t%s\t%s\n", n.ID, n.Address, h)
			}
			fmt.Fprintln(w, "\nTOPIC\tPARTITION\tLEADER\tREPLICAS\tTERM\tCOMMIT\tAPPLIED\tOFFSETS\tLAG")
			for _, p := range v.Partitions {
				var lag []string
				for _, r := range p.GetProgress() {
					if r.GetLagUnknown() {
						lag = append(lag, fmt.Sprintf("%d:?", r.GetNode()))
						continue
					}
					lag = append(lag, fmt.Sprintf("%d:%d", r.GetNode(), r.GetLag()))
				}
				leader := strconv.FormatUint(p.GetLeader(), 10)
				if p.GetLeader() == 0 {
					leader = "none"
				} else if p.GetLeader() != first0(p.GetReplicas()) {
					leader += " (preferred " + strconv.FormatUint(first0(p.GetReplicas()), 10) + ")"
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%v\t%d\t%d\t%d\t%d-%d\t%s\n", p.GetTopic(), p.GetPartition(), leader, p.GetReplicas(),
					p.GetTerm(), p.GetCommitIndex(), p.GetAppliedIndex(), p.GetLogStartOffset(), p.GetNextOffset(), strings.Join(lag, " "))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			for i, p := range v.Partitions {
				for _, sv := range v.Stale[i] {
					fmt.Printf("stale: node %d sees partition %d of %q led by %d at term %d (the newest term heard of is %d)\n",
						sv.Node, p.GetPartition(), p.GetTopic(), sv.Leader, sv.Term, p.GetTerm())
				}
			}
			return nil
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func newClusterTransferLeader(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "transfer-leader TOPIC PARTITION NODE",
		Short: "Make a replica a partition's preferred leader and hand it the leadership (balancing keeps it there)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := strconv.ParseUint(args[1], 10, 32)
			if err != nil {
				return fmt.Errorf("partition %q: %w", args[1], err)
			}
			node, err := strconv.ParseUint(args[2], 10, 64)
			if err != nil {
				return fmt.Errorf("node %q: %w", args[2], err)
			}
			v, err := gatherStatus(cmd.Context(), g)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(v.Partitions, func(s *rewindv1.PartitionStatus) bool {
				return s.GetTopic() == args[0] && s.GetPartition() == uint32(p)
			})
			if i < 0 {
				return fmt.Errorf("no partition %d of topic %q", p, args[0])
			}
			leader := v.Partitions[i].GetLeader()
			if leader == 0 {
				return fmt.Errorf("partition %d of %q has no leader now; try again", p, args[0])
			}
			// The leader is asked even when it is the node: the transfer
			// also makes the node the preferred leader, which balancing
			// keeps.
			j := slices.IndexFunc(v.Nodes, func(n clusterNode) bool { return n.ID == leader })
			if j < 0 || v.Nodes[j].Address == "" {
				return fmt.Errorf("no address for the leader, node %d", leader)
			}
			if err := g.clientAt(v.Nodes[j].Address).TransferLeader(cmd.Context(), args[0], uint32(p), node); err != nil {
				return err
			}
			if leader == node {
				fmt.Printf("node %d leads partition %d of %s, and is now its preferred leader\n", node, p, args[0])
				return nil
			}
			fmt.Printf("node %d is now the preferred leader of partition %d of %s; asked node %d to hand it over\n", node, p, args[0], leader)
			return nil
		},
	}
}

func newClusterRemoveNode(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "remove-node NODE",
		Short: "Move every replica off a node, then remove it from the cluster (its id is never reused)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return fmt.Errorf("node %q: %w", args[0], err)
			}
			moved, shrunk, err := g.client().RemoveNode(cmd.Context(), node)
			if err != nil {
				return err
			}
			fmt.Printf("removed node %d: %s moved to other nodes, %s kept one replica fewer; the node may be stopped\n", node, plural(moved, "partition replica"), plural(shrunk, "partition"))
			return nil
		},
	}
}

func newClusterRebalance(g *globals) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Move replicas so every member keeps about as many as the others (after nodes joined)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			moves, err := g.client().Rebalance(cmd.Context(), dryRun)
			if err != nil {
				return err
			}
			if len(moves) == 0 {
				fmt.Println("balanced: nothing to move")
				return nil
			}
			for _, m := range moves {
				fmt.Printf("%s/%d: node %d -> node %d\n", m.GetTopic(), m.GetPartition(), m.GetFrom(), m.GetTo())
			}
			if dryRun {
				fmt.Printf("%s planned (dry run)\n", plural(len(moves), "move"))
			} else {
				fmt.Printf("%s moved\n", plural(len(moves), "replica"))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only show the moves")
	return cmd
}
