package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

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
// leader's own view when the leader answered.
type clusterView struct {
	ClusterID      uint64                      `json:"cluster_id"`
	MetadataLeader uint64                      `json:"metadata_leader"`
	Nodes          []clusterNode               `json:"nodes"`
	Partitions     []*rewindv1.PartitionStatus `json:"-"`
	PartitionsJSON []map[string]any            `json:"partitions"`
}

type clusterNode struct {
	ID      uint64 `json:"id"`
	Address string `json:"address"`
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
}

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
			var err error
			st, err = client.New(n.GetAddress()).ClusterStatus(ctx)
			if err != nil {
				cn.Error = err.Error()
			} else {
				answers[n.GetId()] = st
			}
		}
		cn.Healthy = st != nil
		v.Nodes = append(v.Nodes, cn)
	}
	type key struct {
		topic string
		p     uint32
	}
	best := map[key]*rewindv1.PartitionStatus{}
	for id, st := range answers {
		for _, p := range st.GetPartitions() {
			k := key{p.GetTopic(), p.GetPartition()}
			cur := best[k]
			// The leader's own answer wins; else the highest term seen.
			if cur == nil || (p.GetLeader() == id && len(p.GetProgress()) > 0) ||
				(len(cur.GetProgress()) == 0 && p.GetTerm() > cur.GetTerm()) {
				best[k] = p
			}
		}
	}
	for _, p := range best {
		v.Partitions = append(v.Partitions, p)
	}
	slices.SortFunc(v.Partitions, func(a, b *rewindv1.PartitionStatus) int {
		return cmp.Or(cmp.Compare(a.GetTopic(), b.GetTopic()), cmp.Compare(a.GetPartition(), b.GetPartition()))
	})
	for _, p := range v.Partitions {
		lag := map[string]any{}
		for _, r := range p.GetProgress() {
			var l any = r.GetLag()
			if r.GetLagUnknown() {
				l = nil // not known yet
			}
			lag[strconv.FormatUint(r.GetNode(), 10)] = l
		}
		v.PartitionsJSON = append(v.PartitionsJSON, map[string]any{
			"topic": p.GetTopic(), "partition": p.GetPartition(), "replicas": p.GetReplicas(), "leader": p.GetLeader(),
			"preferred_leader": first0(p.GetReplicas()), "term": p.GetTerm(), "commit_index": p.GetCommitIndex(),
			"applied_index": p.GetAppliedIndex(), "last_index": p.GetLastIndex(), "log_start_offset": p.GetLogStartOffset(),
			"next_offset": p.GetNextOffset(), "lag": lag,
		})
	}
	return v, nil
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
				h := "up"
				if !n.Healthy {
					h = "down: " + n.Error
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
			return w.Flush()
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func newClusterTransferLeader(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "transfer-leader TOPIC PARTITION NODE",
		Short: "Hand a partition's leadership to another of its replicas",
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
			if leader == node {
				fmt.Printf("node %d already leads partition %d of %s\n", node, p, args[0])
				return nil
			}
			j := slices.IndexFunc(v.Nodes, func(n clusterNode) bool { return n.ID == leader })
			if j < 0 || v.Nodes[j].Address == "" {
				return fmt.Errorf("no address for the leader, node %d", leader)
			}
			if err := client.New(v.Nodes[j].Address).TransferLeader(cmd.Context(), args[0], uint32(p), node); err != nil {
				return err
			}
			fmt.Printf("asked node %d to hand partition %d of %s to node %d\n", leader, p, args[0], node)
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
