package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/remote"
	"github.com/rewind-io/rewind/engine/internal/route"
	"github.com/rewind-io/rewind/engine/internal/sched"
	"github.com/rewind-io/rewind/engine/internal/stream"
	"github.com/rewind-io/rewind/raftlog"
)

// ReadFrom chooses the replica a stream reads a partition from.
type ReadFrom int

const (
	// ReadDefault takes the broker's setting: ReadLocalReplica with
	// Config.Cluster.FollowerReads, else ReadAuto.
	ReadDefault ReadFrom = iota
	// ReadLeader reads every partition from its leader: this node's replica
	// when it leads, otherwise through the leader (package remote).
	ReadLeader
	// ReadLocalReplica reads this node's replica of every partition it
	// holds (fetch from follower), and the others through their leaders.
	ReadLocalReplica
	// ReadAuto reads like ReadLeader, except that the history this node's
	// replica of a partition it does not lead holds is read from that
	// replica (stream.CatchUpFrom): the stream sees what a leader read
	// sees, and catching up costs the leader nothing.
	ReadAuto
)

// maxServingFetches bounds the fetches a leader reads the store for at
// once (each builds up to MaxBytes of batches); more wait their turn.
const maxServingFetches = 32

// streamFetchBytes is the fetch size one stream's remotely read partitions
// share: each fetches between 256 KiB and 4 MiB at a time (its tail at most
// 1 MiB), so with one fetch ahead a stream holds a few times this.
const streamFetchBytes = 8 << 20

// ReadStats counts a node's reads through partition leaders.
type ReadStats struct {
	// FetchesServed and BytesServed count the fetches this node answered
	// as a leader, and the record bytes they carried.
	FetchesServed, BytesServed uint64
	// RemoteReads counts partitions streams on this node read through
	// another node (or, after a leadership change, through itself).
	RemoteReads uint64
}

type readCounters struct {
	fetches, bytes, remote atomic.Uint64
}

// ReadStats returns the node's read counters.
func (b *Broker) ReadStats() ReadStats {
	return ReadStats{
		FetchesServed: b.reads.fetches.Load(), BytesServed: b.reads.bytes.Load(),
		RemoteReads: b.reads.remote.Load(),
	}
}

// readSources returns the sources a stream reads the selected partitions
// from, and the logs (every partition of the topic, indexed by number) its
// cursors are resolved against. Remote sources are opened lazily for
// partitions only the resolution looks at.
func (b *Broker) readSources(ctx context.Context, lt *liveTopic, sel []uint32, from ReadFrom) ([]stream.Source, []cursor.Log, error) {
	from = b.readFrom(from)
	remote := 0
	for _, p := range sel {
		if !b.readLocally(lt.parts[p], from) {
			remote++
		}
	}
	logs := make([]cursor.Log, len(lt.parts))
	for i := range lt.parts {
		logs[i] = &lazyLog{b: b, ctx: ctx, lt: lt, index: uint32(i), from: from, budget: remote}
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
	if b.cfg.Cluster.FollowerReads {
		return ReadLocalReplica
	}
	return ReadAuto
}

// readLocally reports whether a stream reads partition p from this node's
// replica.
func (b *Broker) readLocally(part *partition.Partition, from ReadFrom) bool {
	if part == nil {
		return false
	}
	return !b.clustered() || from == ReadLocalReplica || (part.Leader() == b.cfg.NodeID && part.LeaderApplied())
}

// lazyLog is one partition as a stream's cursors see it: its source is
// opened on first use.
type lazyLog struct {
	b     *Broker
	ctx   context.Context
	lt    *liveTopic
	index uint32
	from  ReadFrom
	// budget is how many partitions of the stream are read remotely: they
	// share the stream's read-ahead memory.
	budget int
	src    stream.Source
	log    cursor.Log
}

func (l *lazyLog) source() (stream.Source, error) {
	if l.src != nil {
		return l.src, nil
	}
	if part := l.lt.parts[l.index]; l.b.readLocally(part, l.from) {
		l.src, l.log = stream.Local(part), part
		return l.src, nil
	}
	if l.b.cfg.PeerClients == nil {
		return nil, fmt.Errorf("%w: partition %d of %q has no replica on node %d", ErrUnavailable, l.index, l.lt.meta.Name, l.b.cfg.NodeID)
	}
	share := streamFetchBytes / max(l.budget, 1)
	rs, err := remote.Open(l.ctx, remote.Config{
		Index: l.index, Leader: l.b.leaderOf(l.lt, l.index), Retryable: retryableRead,
		ReadBytes: min(max(share, 256<<10), 4<<20),
		TailBytes: min(max(share, 256<<10), 1<<20),
	})
	if err != nil {
		return nil, err
	}
	l.b.reads.remote.Add(1)
	l.src, l.log = rs, rs
	if part := l.lt.parts[l.index]; part != nil && l.from == ReadAuto {
		l.src = stream.CatchUpFrom(stream.Local(part), rs)
	}
	return l.src, nil
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

// leaderLink reaches the leader of one partition for a remote.Source
// (route.Router.Read): this node's replica when this node leads, otherwise
// the leader through the peer clients. The link remembers who led, across
// calls. It looks the topic up again on every call: replicas move.
type leaderLink struct {
	b     *Broker
	lt    *liveTopic // as the stream opened; current() has the latest
	index uint32
	link  route.Link
}

func (b *Broker) leaderOf(lt *liveTopic, p uint32) *leaderLink {
	return &leaderLink{b: b, lt: lt, index: p}
}

// current returns the topic as the node has it now.
func (l *leaderLink) current() *liveTopic {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if lt, ok := l.b.mu.topics[l.lt.meta.ID]; ok && int(l.index) < len(lt.parts) {
		return lt
	}
	return l.lt
}

// Calls to a leader have a deadline: a node that hangs without closing its
// connection must not stall a stream (the call is retried elsewhere).
const (
	fetchAnswerTimeout = 5 * time.Second
	locateTimeout      = 5 * time.Second
)

// call runs one read on the leader: local on this node, remote on another.
func (l *leaderLink) call(ctx context.Context, timeout time.Duration, local func() error, remote func(ctx context.Context, node uint64, addr string) error) error {
	op := route.Op{Local: local}
	if l.b.cfg.PeerClients != nil {
		op.Remote = func(ctx context.Context, node uint64, addr string, _ bool) error {
			return peerError(remote(ctx, node, addr), true)
		}
	}
	return l.b.route.Read(ctx, &l.link, l.b.routed(l.current(), l.index, true), timeout, op)
}

// Fetch implements remote.Leader.
func (l *leaderLink) Fetch(ctx context.Context, f remote.Fetch) (remote.Fetched, error) {
	var res remote.Fetched
	err := l.call(ctx, f.Wait+fetchAnswerTimeout, func() (err error) {
		res, err = l.b.ServeFetch(ctx, l.lt.meta.ID, l.index, f)
		return err
	}, func(ctx context.Context, node uint64, addr string) (err error) {
		res, err = l.b.cfg.PeerClients.Fetch(ctx, node, addr, l.lt.meta.ID, l.index, f)
		return err
	})
	return res, err
}

// SeekTime implements remote.Leader.
func (l *leaderLink) SeekTime(ctx context.Context, t int64) (uint64, error) {
	var off uint64
	err := l.call(ctx, locateTimeout, func() (err error) {
		off, _, err = l.b.ServeLocate(l.lt.meta.ID, l.index, &t, 0)
		return err
	}, func(ctx context.Context, node uint64, addr string) (err error) {
		off, _, err = l.b.cfg.PeerClients.Locate(ctx, node, addr, l.lt.meta.ID, l.index, &t, 0)
		return err
	})
	return off, err
}

// TimeOf implements remote.Leader.
func (l *leaderLink) TimeOf(ctx context.Context, offset uint64) (int64, error) {
	var at int64
	err := l.call(ctx, locateTimeout, func() (err error) {
		_, at, err = l.b.ServeLocate(l.lt.meta.ID, l.index, nil, offset)
		return err
	}, func(ctx context.Context, node uint64, addr string) (err error) {
		_, at, err = l.b.cfg.PeerClients.Locate(ctx, node, addr, l.lt.meta.ID, l.index, nil, offset)
		return err
	})
	return at, err
}

// ledPartition returns this node's replica of a partition if this node
// leads it, else a *NotLeaderError naming the leader it knows of.
func (b *Broker) ledPartition(topicID uint64, p uint32) (*partition.Partition, error) {
	_, part, err := b.ledTopicPartition(topicID, p)
	return part, err
}

// ledTopicPartition is ledPartition that also returns the topic.
func (b *Broker) ledTopicPartition(topicID uint64, p uint32) (*liveTopic, *partition.Partition, error) {
	b.mu.Lock()
	lt, ok := b.mu.topics[topicID]
	closed := b.mu.closed
	b.mu.Unlock()
	if closed {
		return nil, nil, ErrClosed
	}
	if !ok {
		if _, known := b.meta.TopicByID(topicID); known {
			return nil, nil, fmt.Errorf("%w: topic %d is starting", ErrUnavailable, topicID)
		}
		return nil, nil, fmt.Errorf("%w: %w: topic %d", ErrNoTopic, ErrTopicDeleted, topicID)
	}
	if int(p) >= len(lt.parts) {
		if err := b.growing(lt, p); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: partition %d does not exist (topic %q has %d)", ErrInvalid, p, lt.meta.Name, len(lt.parts))
	}
	part := lt.parts[p]
	nl := &NotLeaderError{Topic: lt.meta.Name, Partition: p, Node: b.cfg.NodeID}
	if part == nil {
		return nil, nil, nl
	}
	if nl.Leader = part.Leader(); nl.Leader != b.cfg.NodeID || !part.LeaderApplied() {
		// A new leader serves once it has applied an entry of its term:
		// before that it may not yet show all that was acknowledged.
		return nil, nil, nl
	}
	return lt, part, nil
}

// ReplayStats returns what the catch-up scheduler did (package sched).
func (b *Broker) ReplayStats() sched.Stats { return b.sched.Stats() }

// Delivered returns how many records this node's streams sent.
func (b *Broker) Delivered() uint64 { return b.delivered.Load() }

// Timings returns where this node's publishes spent their time: waiting
// for the raft loop, being stored, the raft loop's wake-ups and syncs.
func (b *Broker) Timings() (queue, store, wake, sync *raftlog.Histogram) {
	return &b.timings.Queue, &b.timings.Store, b.host.WakeDelays(), b.host.SyncDelays()
}

// Detector returns what the raft loop's failure detector did
// (raftlog/detector.go).
func (b *Broker) Detector() raftlog.DetectorStats { return b.host.DetectorStats() }

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
	select {
	case b.fetchGate <- struct{}{}:
		defer func() { <-b.fetchGate }()
	case <-ctx.Done():
		return remote.Fetched{}, ctx.Err()
	}
	if part.InTail(f.From) {
		// A reader at the tail: live work.
		defer b.sched.Live()()
	} else {
		// History: a catch-up turn, like a local stream's.
		turn, err := b.sched.CatchUp(ctx)
		if err != nil {
			return remote.Fetched{}, err
		}
		defer turn.End()
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
		sz := len(bt.Records.Bytes())
		if len(out.Batches) > 0 && n+sz > f.MaxBytes {
			break // the first batch always goes, however large
		}
		out.Batches = append(out.Batches, bt)
		n += sz
		off = bt.End()
	}
	b.reads.bytes.Add(uint64(n))
	return out, nil
}

// ServeStoredOffset answers, on the leader, where the record with
// idempotency key key is stored in partition p (found false: not there).
func (b *Broker) ServeStoredOffset(topicID uint64, p uint32, key []byte) (uint64, bool, error) {
	part, err := b.ledPartition(topicID, p)
	if err != nil {
		return 0, false, err
	}
	return part.StoredOffset(key)
}

// StoredOffset implements the leader side of storedOffset: where the
// leader of the link's partition has the key's record.
func (l *leaderLink) StoredOffset(ctx context.Context, key []byte) (off uint64, found bool, err error) {
	err = l.call(ctx, locateTimeout, func() (err error) {
		off, found, err = l.b.ServeStoredOffset(l.lt.meta.ID, l.index, key)
		return err
	}, func(ctx context.Context, node uint64, addr string) (err error) {
		off, found, err = l.b.cfg.PeerClients.StoredOffset(ctx, node, addr, l.lt.meta.ID, l.index, key)
		return err
	})
	return off, found, err
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
