package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rewind-io/rewind/engine/offline"
	"github.com/rewind-io/rewind/internal/failpoint"
	"github.com/rewind-io/rewind/internal/identity"
	"github.com/rewind-io/rewind/scenarios/history"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// statusOf asks node nd alone for its view of the cluster. An answer that
// names another node or cluster is an error: while nd is down another
// process may have its port, and its view recorded as nd's would be a
// false alarm (two leaders in one term).
func (c *cluster) statusOf(ctx context.Context, nd *node) (*client.ClusterStatus, error) {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := client.New("http://"+nd.addr, client.WithPublishRetry(1, 0, time.Second)).ClusterStatus(sctx)
	if err != nil {
		return nil, err
	}
	if st.GetNodeId() != nd.id || st.GetClusterId() != c.id {
		return nil, fmt.Errorf("%s answered as node %d of cluster %s, not node %d of %s",
			nd.addr, st.GetNodeId(), identity.FormatCluster(st.GetClusterId()), nd.id, identity.FormatCluster(c.id))
	}
	return st, nil
}

// partitionsOf picks topic's partitions out of a status answer.
func partitionsOf(st *client.ClusterStatus, topic string) []*rewindv1.PartitionStatus {
	var out []*rewindv1.PartitionStatus
	for _, ps := range st.GetPartitions() {
		if ps.GetTopic() == topic {
			out = append(out, ps)
		}
	}
	return out
}

// waitLeaders waits until every partition of topic has a leader that every
// node keeping a replica of it knows.
func waitLeaders(ctx context.Context, c *cluster, topic string, partitions uint32, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		ok := true
		for _, nd := range c.members() {
			st, err := c.statusOf(ctx, nd)
			if err != nil {
				ok = false
				break
			}
			known := 0
			for _, ps := range partitionsOf(st, topic) {
				if ps.GetLeader() != 0 || !ps.GetHosted() {
					known++ // a node without a replica need not know
				}
			}
			if known < int(partitions) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s: not every partition had a leader after %s", topic, within)
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

// watchLeaders records every node's view of every partition's leader,
// every 250 ms, until ctx ends.
func watchLeaders(ctx context.Context, c *cluster, rec *recorder, topic string) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		for _, nd := range c.members() {
			if !c.up(nd.id) {
				continue
			}
			st, err := c.statusOf(ctx, nd)
			if err != nil {
				continue
			}
			now := time.Now()
			for _, ps := range partitionsOf(st, topic) {
				rec.leader(history.LeaderObs{At: now, Node: nd.id, Topic: topic, Partition: ps.GetPartition(), Term: ps.GetTerm(), Leader: ps.GetLeader()})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// converge waits until, on every node, every partition of topic has a
// leader and every replica holds the same records (the same next offset,
// everything applied), and returns the end offset of each partition and
// the nodes that keep a replica of it.
func converge(ctx context.Context, c *cluster, topic string, partitions uint32, within time.Duration) (ends map[uint32]uint64, hosts map[uint32][]uint64, err error) {
	deadline := time.Now().Add(within)
	var last string
	for {
		ends, hosts = map[uint32]uint64{}, map[uint32][]uint64{}
		ok := true
		for _, nd := range c.members() {
			st, err := c.statusOf(ctx, nd)
			if err != nil {
				ok, last = false, fmt.Sprintf("node %d: %v", nd.id, err)
				break
			}
			pss := partitionsOf(st, topic)
			if len(pss) < int(partitions) {
				ok, last = false, fmt.Sprintf("node %d knows %d partitions", nd.id, len(pss))
				break
			}
			for _, ps := range pss {
				p := ps.GetPartition()
				if ps.GetHosted() {
					hosts[p] = append(hosts[p], nd.id)
				}
				switch e, seen := ends[p]; {
				case !ps.GetHosted():
				case ps.GetLeader() == 0:
					ok, last = false, fmt.Sprintf("node %d knows no leader of partition %d", nd.id, p)
				case ps.GetAppliedIndex() < ps.GetCommitIndex() || ps.GetCommitIndex() < ps.GetLastIndex():
					ok, last = false, fmt.Sprintf("node %d: partition %d not applied (%d/%d/%d)", nd.id, p, ps.GetAppliedIndex(), ps.GetCommitIndex(), ps.GetLastIndex())
				case seen && e != ps.GetNextOffset():
					ok, last = false, fmt.Sprintf("partition %d: replicas end at %d and %d", p, e, ps.GetNextOffset())
				default:
					ends[p] = ps.GetNextOffset()
				}
			}
		}
		if ok {
			return ends, hosts, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			// What was seen last: the caller reads those replicas anyway,
			// for the checkers to say how they differ.
			return ends, hosts, fmt.Errorf("the replicas did not converge within %s after the faults healed: %s", within, last)
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

// waitFollowers waits (up to within) until every follower has read up to
// ends.
func waitFollowers(rec *recorder, ends map[uint32]uint64, within time.Duration) {
	deadline := time.Now().Add(within)
	for !rec.followedAll(ends) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// stopForReading stops every member (SIGTERM, as an operator would) so
// that its store can be read. With powerLoss the nodes hold unsynced writes
// in memory (the power-loss failpoint): it is cleared first, so that what
// the nodes applied reaches their files as they close.
func stopForReading(ctx context.Context, c *cluster, powerLoss bool) error {
	var errs []error
	for _, nd := range c.members() {
		if powerLoss {
			if err := c.failpoint(ctx, nd.id, failpoint.PowerLoss, "", false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, nd := range c.members() {
		if err := c.stop(nd.id, 30*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sortedHosts lists the nodes that keep some partition, in order.
func sortedHosts(hosts map[uint32][]uint64) []uint64 {
	var ids []uint64
	for _, hs := range hosts {
		for _, id := range hs {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// readReplicas reads, from stopped node nd's data directory, its replicas
// of the partitions of topic that hosts says it keeps. A partition it
// should keep and has no state for is an empty replica (the log checker
// says what is missing).
func readReplicas(nd *node, topic string, hosts map[uint32][]uint64) ([]history.Replica, error) {
	parts, err := offline.Read(nd.dir, topic)
	if err != nil {
		return nil, fmt.Errorf("read node %d's replicas from %s: %w", nd.id, nd.dir, err)
	}
	byPart := map[uint32]offline.Partition{}
	for _, p := range parts {
		byPart[p.Partition] = p
	}
	var ps []uint32
	for p, hs := range hosts {
		if slices.Contains(hs, nd.id) {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	var out []history.Replica
	for _, p := range ps {
		op := byPart[p]
		r := history.Replica{Node: nd.id, Topic: topic, Partition: p, Start: op.Start, End: op.End}
		for _, x := range op.Records {
			r.Records = append(r.Records, history.Record{Partition: p, Offset: x.Offset, Key: string(x.Key), Value: compact(string(x.Value)),
				IdemKey: x.IdempotencyKey, AppendTime: time.Unix(0, x.AppendTime), KeyVersion: x.KeyVersion})
		}
		out = append(out, r)
	}
	return out, nil
}
