package broker

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/stream"
	"github.com/rewind-io/rewind/raftlog"
	"github.com/rewind-io/rewind/sandbox"
)

// What the node counts for its metrics (engine/internal/api/metrics.go
// exposes them). Every counter on a publish or delivery path is an atomic
// add: no lock, no allocation. The rest is read when scraped.

// topicCounters count one topic's traffic on this node. Every copy of a
// liveTopic shares its topic's.
type topicCounters struct {
	// published: the records this node appended as the leader of one of
	// the topic's partitions (duplicates of an idempotent retry are not
	// appended and not counted), so the sum over the nodes counts each
	// record once, however many nodes it was forwarded through.
	published stream.Counts
	// delivered: what this node's streams of the topic sent.
	delivered stream.Counts
}

// StreamKind classifies an open stream for metrics.
type StreamKind int

// The kinds of stream, each counted as the first that applies: a group
// member's stream, a stream with a filter, a stream that starts at the
// end of the log (latest), and a replay (a start in history).
const (
	StreamGroup StreamKind = iota
	StreamFiltered
	StreamLive
	StreamReplay
	numStreamKinds
)

func (k StreamKind) String() string {
	return [...]string{"group", "filtered", "live", "replay"}[k]
}

// StreamKinds lists every StreamKind.
var StreamKinds = []StreamKind{StreamGroup, StreamFiltered, StreamLive, StreamReplay}

func kindOf(sp *SubscribeParams) StreamKind {
	switch {
	case sp.Group != "":
		return StreamGroup
	case sp.Filter != nil:
		return StreamFiltered
	case sp.Start.Kind == cursor.Latest:
		return StreamLive
	}
	return StreamReplay
}

// streamCounters count open streams by kind, and the history they read.
type streamCounters struct {
	open        [numStreamKinds]atomic.Int64
	replayBytes atomic.Uint64
}

// TopicTraffic is a topic's traffic through this node since it started.
type TopicTraffic struct {
	Topic                            string
	PublishedRecords, PublishedBytes uint64
	DeliveredRecords, DeliveredBytes uint64
}

// Traffic returns the traffic of every topic this node runs, by name.
// Counts start at zero when the node starts (and when a topic is
// created again under the same name).
func (b *Broker) Traffic() []TopicTraffic {
	b.mu.Lock()
	out := make([]TopicTraffic, 0, len(b.mu.topics))
	for _, lt := range b.mu.topics {
		c := lt.counters
		out = append(out, TopicTraffic{
			Topic:            lt.meta.Name,
			PublishedRecords: c.published.Records.Load(), PublishedBytes: c.published.Bytes.Load(),
			DeliveredRecords: c.delivered.Records.Load(), DeliveredBytes: c.delivered.Bytes.Load(),
		})
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(a, c TopicTraffic) int { return strings.Compare(a.Topic, c.Topic) })
	return out
}

// OpenStreams returns how many streams of each kind run on this node.
func (b *Broker) OpenStreams() map[StreamKind]int64 {
	out := make(map[StreamKind]int64, numStreamKinds)
	for _, k := range StreamKinds {
		out[k] = b.streamCounts.open[k].Load()
	}
	return out
}

// ReplayReadBytes returns the encoded bytes of the batches this node's
// streams read while catching up (history rather than the live tail).
func (b *Broker) ReplayReadBytes() uint64 { return b.streamCounts.replayBytes.Load() }

// FilterStats returns what the node's WebAssembly filters did.
func (b *Broker) FilterStats() sandbox.Stats { return b.sandbox.Stats() }

// RaftGroupStats is one raft group on this node.
type RaftGroupStats struct {
	Term uint64
	// Leader is the leader this node knows (0: none); Leading is set when
	// it is this node.
	Leader  uint64
	Leading bool
	// ApplyLag is how many committed entries are not applied yet.
	ApplyLag uint64
}

// RaftCounters are counted raft events (raftlog.Counters).
type RaftCounters struct {
	LeaderChanges, ProposalsDropped, SnapshotsSent uint64
}

// PartitionRaftStats aggregates the raft groups of the partitions this
// node keeps a replica of: with many partitions, a series per group is
// too many (docs/operations.md).
type PartitionRaftStats struct {
	// Groups counts the running groups; Leading those this node leads;
	// NoLeader those that know no leader.
	Groups, Leading, NoLeader int
	// MaxApplyLag is the largest ApplyLag of any of them.
	MaxApplyLag uint64
}

// RaftStats is the raft state of the node: the metadata group on its
// own, the partitions' groups together.
type RaftStats struct {
	Meta               RaftGroupStats
	MetaCounters       RaftCounters
	Partitions         PartitionRaftStats
	PartitionsCounters RaftCounters
}

func countersOf(c *raftlog.Counters) RaftCounters {
	return RaftCounters{LeaderChanges: c.LeaderChanges.Load(), ProposalsDropped: c.ProposalsDropped.Load(), SnapshotsSent: c.SnapshotsSent.Load()}
}

func groupStatsOf(st raftlog.Status) RaftGroupStats {
	return RaftGroupStats{Term: st.Term, Leader: st.Leader, Leading: st.Leading, ApplyLag: st.Commit - min(st.Applied, st.Commit)}
}

// RaftStats returns the raft state of the node's groups.
func (b *Broker) RaftStats() RaftStats {
	rs := RaftStats{MetaCounters: countersOf(&b.metaRaft), PartitionsCounters: countersOf(&b.partRaft)}
	if st, ok := b.host.Status(meta.GroupID); ok {
		rs.Meta = groupStatsOf(st)
	}
	b.mu.Lock()
	var groups []uint64
	for _, lt := range b.mu.topics {
		for _, p := range lt.hosted() {
			groups = append(groups, p.Group())
		}
	}
	b.mu.Unlock()
	for _, g := range groups {
		st, ok := b.host.Status(g)
		if !ok || st.Err != nil {
			continue
		}
		gs := groupStatsOf(st)
		rs.Partitions.Groups++
		if gs.Leading {
			rs.Partitions.Leading++
		}
		if gs.Leader == 0 {
			rs.Partitions.NoLeader++
		}
		rs.Partitions.MaxApplyLag = max(rs.Partitions.MaxApplyLag, gs.ApplyLag)
	}
	return rs
}

// GroupLag is a subscriber group's lag in one partition.
type GroupLag struct {
	Group, Topic string
	Partition    uint32
	// Records is how many records follow the committed offset (from the
	// log start when the group committed none there, or when retention
	// removed its committed offset).
	Records uint64
	// Nanos is the age of the oldest of them: now minus the append time
	// of the record at the committed offset; 0 when caught up.
	Nanos int64
}

// GroupLags returns the lag of every group in every partition it has
// rows or members in, by group, topic and partition, at most limit of
// them (omitted says how many more there were). Only the node that
// coordinates groups (the metadata leader) answers: ok is false on the
// others, so that a cluster's lag is exposed once.
func (b *Broker) GroupLags(limit int) (lags []GroupLag, omitted int, ok bool, err error) {
	if b.coordinates() != nil {
		return nil, 0, false, nil
	}
	gt, err := b.groupTopics()
	if err != nil {
		return nil, 0, true, err
	}
	names := make([]string, 0, len(gt))
	for g := range gt {
		names = append(names, g)
	}
	slices.Sort(names)
	now := b.Now()
	for _, g := range names {
		lts := slices.Clone(gt[g])
		slices.SortFunc(lts, func(a, c *liveTopic) int { return strings.Compare(a.meta.Name, c.meta.Name) })
		for _, lt := range lts {
			for i, p := range lt.parts {
				if len(lags) >= limit {
					omitted++
					continue
				}
				st, has, err := p.GroupState(g)
				if err != nil {
					return nil, 0, true, err
				}
				gp := partitionLag(p, st, has && st.Committed, now)
				lags = append(lags, GroupLag{Group: g, Topic: lt.meta.Name, Partition: uint32(i), Records: gp.Lag, Nanos: gp.LagNanos})
			}
		}
	}
	return lags, omitted, true, nil
}
