package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/remote"
	"github.com/rewind-io/rewind/engine/internal/stream"
)

// ReadFrom chooses the replica a stream reads a partition from.
type ReadFrom int

const (
	// ReadDefault takes the broker's setting (Config.FollowerReads).
	ReadDefault ReadFrom = iota
	// ReadLeader reads every partition from its leader: this node's replica
	// when it leads, otherwise through the leader (package remote).
	ReadLeader
	// ReadLocalReplica reads this node's replica of every partition it
	// holds (fetch from follower), and the others through their leaders.
	ReadLocalReplica
)

// Fetcher reads a partition on the node that leads it (the api package's
// PeerReader, over PartitionService). Errors that are ErrUnavailable are
// transient; a *NotLeaderError names the leader that node knows of.
type Fetcher interface {
	Fetch(ctx context.Context, node uint64, addr string, topicID uint64, partition uint32, f remote.Fetch) (remote.Fetched, error)
	// Locate resolves a time to an offset (at != nil) or an offset to its
	// append time.
	Locate(ctx context.Context, node uint64, addr string, topicID uint64, partition uint32, at *int64, offset uint64) (uint64, int64, error)
}

// ReadStats counts a node's reads through partition leaders.
type ReadStats struct {
	// FetchesServed, BatchesServed and BytesServed count the fetches this
	// node answered as a leader, and the batches and record bytes they
	// carried.
	FetchesServed, BatchesServed, BytesServed uint64
	// RemoteReads counts partitions streams on this node read through
	// another node (or, after a leadership change, through itself).
	RemoteReads uint64
}

type readCounters struct {
	fetches, batches, bytes, remote atomic.Uint64
}

// ReadStats returns the node's read counters.
func (b *Broker) ReadStats() ReadStats {
	return ReadStats{
		FetchesServed: b.reads.fetches.Load(), BatchesServed: b.reads.batches.Load(),
		BytesServed: b.reads.bytes.Load(), RemoteReads: b.reads.remote.Load(),
	}
}

// readSources returns the sources a stream reads the selected partitions
// from, and the logs (every partition of the topic, indexed by number) its
// cursors are resolved against. Remote sources are opened lazily for
// partitions only the resolution looks at.
func (b *Broker) readSources(ctx context.Context, lt *liveTopic, sel []uint32, from ReadFrom) ([]stream.Source, []cursor.Log, error) {
	from = b.readFrom(from)
	logs := make([]cursor.Log, len(lt.parts))
	for i := range lt.parts {
		logs[i] = &lazyLog{b: b, ctx: ctx, lt: lt, index: uint32(i), from: from}
	}
	srcs := make([]stream.Source, len(sel))
	for i, p := range sel {
		src, err := logs[p].(*lazyLog).source()
		if err != nil {
			return nil, nil, err
		}
		srcs[i] = src
	}
	return srcs, logs, nil
}

// readFrom resolves ReadDefault to the broker's setting.
func (b *Broker) readFrom(from ReadFrom) ReadFrom {
	if from != ReadDefault {
		return from
	}
	if b.cfg.FollowerReads {
		return ReadLocalReplica
	}
	return ReadLeader
}

// readLocally reports whether a stream reads partition p from this node's
// replica.
func (b *Broker) readLocally(part *partition.Partition, from ReadFrom) bool {
	if part == nil {
		return false
	}
	return !b.clustered() || from == ReadLocalReplica || part.Leader() == b.cfg.NodeID
}

// lazyLog is one partition as a stream's cursors see it: its source is
// opened on first use.
type lazyLog struct {
	b     *Broker
	ctx   context.Context
	lt    *liveTopic
	index uint32
	from  ReadFrom
	src   stream.Source
	log   cursor.Log
}

func (l *lazyLog) source() (stream.Source, error) {
	if l.src != nil {
		return l.src, nil
	}
	if part := l.lt.parts[l.index]; l.b.readLocally(part, l.from) {
		l.src, l.log = stream.Local(part), part
		return l.src, nil
	}
	if l.b.cfg.Fetch == nil {
		return nil, fmt.Errorf("%w: partition %d of %q has no replica on node %d", ErrUnavailable, l.index, l.lt.meta.Name, l.b.cfg.NodeID)
	}
	rs, err := remote.Open(l.ctx, remote.Config{
		Index: l.index, Leader: l.b.leaderOf(l.lt, l.index), Retryable: retryableRead,
	})
	if err != nil {
		return nil, err
	}
	l.b.reads.remote.Add(1)
	l.src, l.log = rs, rs
	return rs, nil
}

func (l *lazyLog) opened() (cursor.Log, error) {
	if _, err := l.source(); err != nil {
		return nil, err
	}
	return l.log, nil
}

// Index implements cursor.Log.
func (l *lazyLog) Index() uint32 { return l.index }

// Bounds implements cursor.Log. A partition whose source cannot be opened
// has empty bounds here; its SeekTime and TimeOf fail, and a stream never
// reads it (only a message ID's partition is resolved without being read,
// through TimeOf).
func (l *lazyLog) Bounds() partition.State {
	lg, err := l.opened()
	if err != nil {
		return partition.State{}
	}
	return lg.Bounds()
}

// SeekTime implements cursor.Log.
func (l *lazyLog) SeekTime(t int64) (uint64, error) {
	lg, err := l.opened()
	if err != nil {
		return 0, err
	}
	return lg.SeekTime(t)
}

// TimeOf implements cursor.Log.
func (l *lazyLog) TimeOf(offset uint64) (int64, error) {
	lg, err := l.opened()
	if err != nil {
		return 0, err
	}
	return lg.TimeOf(offset)
}

// retryableRead reports whether a failed read of a leader may succeed if
// tried again (an election, a moved leadership, a node restarting).
func retryableRead(err error) bool {
	return errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrTopicDeleted)
}

// leaderLink reaches the leader of one partition for a remote.Source: this
// node's replica when this node leads, otherwise the leader over the
// Fetcher. It follows the leadership: the leader this node's replica knows
// of, the leader the last node asked named, or else the replicas in turn.
type leaderLink struct {
	b     *Broker
	lt    *liveTopic
	index uint32
	mu    sync.Mutex
	hint  uint64
	turn  int
}

func (b *Broker) leaderOf(lt *liveTopic, p uint32) *leaderLink {
	return &leaderLink{b: b, lt: lt, index: p}
}

// target returns the node to ask.
func (l *leaderLink) target() uint64 {
	if part := l.lt.parts[l.index]; part != nil {
		if id := part.Leader(); id != 0 {
			return id
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hint != 0 {
		return l.hint
	}
	reps := l.lt.meta.ReplicasOf(int(l.index))
	if len(reps) == 0 {
		return 0
	}
	return reps[l.turn%len(reps)]
}

// learn records what asking node taught: who leads, or that it is of no
// help.
func (l *leaderLink) learn(node uint64, err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var nl *NotLeaderError
	if errors.As(err, &nl) && nl.Leader != 0 && nl.Leader != node {
		l.hint = nl.Leader
		return
	}
	l.hint = 0
	l.turn++
}

func (l *leaderLink) call(fn func(node uint64, addr string) error) error {
	node := l.target()
	if node == 0 {
		return fmt.Errorf("%w: no leader known for partition %d of %q", ErrUnavailable, l.index, l.lt.meta.Name)
	}
	addr, _ := l.b.Addr(node)
	err := fn(node, addr)
	l.learn(node, err)
	return err
}

// Fetch implements remote.Leader.
func (l *leaderLink) Fetch(ctx context.Context, f remote.Fetch) (remote.Fetched, error) {
	var res remote.Fetched
	err := l.call(func(node uint64, addr string) (err error) {
		if node == l.b.cfg.NodeID {
			res, err = l.b.ServeFetch(ctx, l.lt.meta.ID, l.index, f)
		} else {
			res, err = l.b.cfg.Fetch.Fetch(ctx, node, addr, l.lt.meta.ID, l.index, f)
		}
		return err
	})
	return res, err
}

// SeekTime implements remote.Leader.
func (l *leaderLink) SeekTime(ctx context.Context, t int64) (uint64, error) {
	var off uint64
	err := l.call(func(node uint64, addr string) (err error) {
		if node == l.b.cfg.NodeID {
			off, _, err = l.b.ServeLocate(l.lt.meta.ID, l.index, &t, 0)
		} else {
			off, _, err = l.b.cfg.Fetch.Locate(ctx, node, addr, l.lt.meta.ID, l.index, &t, 0)
		}
		return err
	})
	return off, err
}

// TimeOf implements remote.Leader.
func (l *leaderLink) TimeOf(ctx context.Context, offset uint64) (int64, error) {
	var at int64
	err := l.call(func(node uint64, addr string) (err error) {
		if node == l.b.cfg.NodeID {
			_, at, err = l.b.ServeLocate(l.lt.meta.ID, l.index, nil, offset)
		} else {
			_, at, err = l.b.cfg.Fetch.Locate(ctx, node, addr, l.lt.meta.ID, l.index, nil, offset)
		}
		return err
	})
	return at, err
}

// ledPartition returns this node's replica of a partition if this node
// leads it, else a *NotLeaderError naming the leader it knows of.
func (b *Broker) ledPartition(topicID uint64, p uint32) (*partition.Partition, error) {
	b.mu.Lock()
	lt, ok := b.mu.topics[topicID]
	closed := b.mu.closed
	b.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if !ok {
		if _, known := b.meta.TopicByID(topicID); known {
			return nil, fmt.Errorf("%w: topic %d is starting", ErrUnavailable, topicID)
		}
		return nil, fmt.Errorf("%w: %w: topic %d", ErrNoTopic, ErrTopicDeleted, topicID)
	}
	if int(p) >= len(lt.parts) {
		return nil, fmt.Errorf("%w: partition %d does not exist (topic %q has %d)", ErrInvalid, p, lt.meta.Name, len(lt.parts))
	}
	part := lt.parts[p]
	nl := &NotLeaderError{Topic: lt.meta.Name, Partition: p, Node: b.cfg.NodeID}
	if part == nil {
		return nil, nl
	}
	if nl.Leader = part.Leader(); nl.Leader != b.cfg.NodeID {
		return nil, nl
	}
	return part, nil
}

// ServeFetch answers a fetch of a partition this node leads: it waits up to
// f.Wait for a record at f.From, then returns the bounds and the batches
// from f.From up to f.MaxBytes.
func (b *Broker) ServeFetch(ctx context.Context, topicID uint64, p uint32, f remote.Fetch) (remote.Fetched, error) {
	part, err := b.ledPartition(topicID, p)
	if err != nil {
		return remote.Fetched{}, err
	}
	if f.Wait > 0 && part.Bounds().Next <= f.From {
		ch := make(chan struct{}, 1)
		cancel := part.Notify(ch)
		t := time.NewTimer(f.Wait)
	wait:
		for part.Bounds().Next <= f.From && part.Err() == nil {
			select {
			case <-ch:
			case <-t.C:
				break wait
			case <-ctx.Done():
				break wait
			}
		}
		t.Stop()
		cancel()
	}
	if err := part.Err(); err != nil {
		return remote.Fetched{}, unavailable(err)
	}
	// The watermark first: a record applied after it was taken was in
	// flight then (or proposed later), so its time is not below it.
	out := remote.Fetched{Watermark: part.TimeWatermark()}
	out.Bounds = part.Bounds()
	vis := out.Bounds
	b.reads.fetches.Add(1)
	if f.MaxBytes <= 0 || f.From < vis.LogStart || f.From >= vis.Next {
		return out, nil
	}
	rd := part.NewReader()
	defer rd.Close()
	n := 0
	for off := f.From; off < vis.Next && n < f.MaxBytes; {
		bt, _, err := rd.Read(off)
		if errors.Is(err, partition.ErrBelowStart) && len(out.Batches) == 0 {
			// Retention passed f.From meanwhile: say so with fresh bounds.
			out.Bounds = part.Bounds()
			return out, nil
		}
		if err != nil {
			if len(out.Batches) > 0 {
				break
			}
			return remote.Fetched{}, err
		}
		out.Batches = append(out.Batches, bt)
		n += len(bt.Records.Bytes())
		off = bt.End()
	}
	b.reads.batches.Add(uint64(len(out.Batches)))
	b.reads.bytes.Add(uint64(n))
	return out, nil
}

// ServeLocate resolves, on the leader, a time to an offset (at != nil) or
// an offset to its append time.
func (b *Broker) ServeLocate(topicID uint64, p uint32, at *int64, offset uint64) (uint64, int64, error) {
	part, err := b.ledPartition(topicID, p)
	if err != nil {
		return 0, 0, err
	}
	if at != nil {
		off, err := part.SeekTime(*at)
		return off, *at, err
	}
	t, err := part.TimeOf(offset)
	return offset, t, err
}
