package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/route"
)

// Idempotency keys are topic-wide (partition/bind.go). Before a publish
// appends anything, the idempotency key of each record routed away from
// the key's home partition (PartitionForKey of the idempotency key) is
// bound there, and the record goes where the answer says: its own target
// when the key was free, the first record's partition for a retry, nowhere
// (a ConflictError) for other contents. Records routed to the home
// partition, and records without an idempotency key, skip this step. A
// record the home partition finds bound elsewhere comes back as
// Append.Elsewhere and is sent there (moveElsewhere).
//
// Binding happens on the node that took the client's request; a publish
// forwarded to a partition's leader arrives bound.
//
// After the topic grew, a key's home under the new count may differ from
// its home under the old one, where a record published before the growth
// is known. For the dedupe window (plus growGrace) after a growth, a key
// is therefore bound in its homes under the previous counts too, oldest
// first, then under the current one (homeCounts): any two publishes of a
// key within the window meet in the home of the count that was current
// when the first was published, and the first home that knows the key
// decides where the record goes. A publish routed under the old count
// while the growth applied binds only there; growGrace covers it.

// bindKeys binds the keys of the records routed away from their keys' home
// partitions (under every count of homeCounts) and updates dest with where
// each belongs.
func (b *Broker) bindKeys(ctx context.Context, lt *liveTopic, recs []PublishRecord, dest []uint32) error {
	for _, n := range lt.homeCounts(b.Now()) {
		if err := b.bindKeysUnder(ctx, lt, n, recs, dest); err != nil {
			return err
		}
	}
	return nil
}

// bindKeysUnder binds the keys of the records routed away from their keys'
// home partitions under n partitions, and updates dest.
func (b *Broker) bindKeysUnder(ctx context.Context, lt *liveTopic, n uint32, recs []PublishRecord, dest []uint32) error {
	var homes map[uint32][]int
	for i := range recs {
		k := recs[i].IdempotencyKey
		if len(k) == 0 {
			continue
		}
		if h := PartitionForKey(k, n); h != dest[i] {
			if homes == nil {
				homes = make(map[uint32][]int)
			}
			homes[h] = append(homes[h], i)
		}
	}
	if len(homes) == 0 {
		return nil
	}
	type job struct {
		home uint32
		idx  []int
		out  []partition.Bound
		err  error
	}
	jobs := make([]job, 0, len(homes))
	for h, idx := range homes {
		jobs = append(jobs, job{home: h, idx: idx})
	}
	run := func(j *job) {
		bs := make([]partition.Binding, len(j.idx))
		for k, i := range j.idx {
			bs[k] = partition.Binding{Key: recs[i].IdempotencyKey, Target: dest[i], Hash: partition.PayloadHash(&recs[i].Record)}
		}
		j.out, j.err = b.bindPartition(ctx, lt, j.home, bs)
	}
	if len(jobs) == 1 {
		run(&jobs[0])
	} else {
		var wg sync.WaitGroup
		for k := range jobs {
			wg.Add(1)
			go func() { defer wg.Done(); run(&jobs[k]) }()
		}
		wg.Wait()
	}
	var conflict *ConflictError
	for _, j := range jobs {
		if j.err != nil {
			return b.publishError(lt.meta.Name, j.err)
		}
		if len(j.out) != len(j.idx) {
			return fmt.Errorf("%w: partition %d answered %d bindings for %d", ErrUnavailable, j.home, len(j.out), len(j.idx))
		}
		for k, i := range j.idx {
			bd := j.out[k]
			switch {
			case bd.Partition >= lt.meta.Partitions:
				return fmt.Errorf("%w: partition %d bound a key to partition %d of %d", ErrUnavailable, j.home, bd.Partition, lt.meta.Partitions)
			case !bd.Same:
				c := &ConflictError{Index: i, Key: string(recs[i].IdempotencyKey), TopicID: lt.meta.ID, Partition: bd.Partition, Offset: bd.Offset}
				if !bd.Stored {
					c.Offset, c.OffsetUnknown = b.storedOffset(ctx, lt, bd.Partition, recs[i].IdempotencyKey)
				}
				if conflict == nil || c.Index < conflict.Index {
					conflict = c
				}
			default:
				dest[i] = bd.Partition
			}
		}
	}
	if conflict != nil {
		return conflict
	}
	return nil
}

// bindPartition binds keys in their home partition, on its leader
// (route.Router.Write).
func (b *Broker) bindPartition(ctx context.Context, lt *liveTopic, home uint32, bs []partition.Binding) (out []partition.Bound, err error) {
	op := route.Op{Local: func() error {
		part := lt.parts[home]
		if part == nil {
			return b.noReplica(lt, home)
		}
		var err error
		out, err = part.Bind(ctx, bs)
		return err
	}}
	if b.cfg.PeerClients != nil {
		op.Remote = func(ctx context.Context, node uint64, addr string, relay bool) error {
			var err error
			out, err = b.cfg.PeerClients.Bind(ctx, node, addr, lt.meta.ID, home, bs, relay)
			return peerError(err, true)
		}
	}
	err = b.route.Write(ctx, b.routed(lt, home, false), op)
	return out, err
}

// storedOffset looks up, on this node's replica of partition p, the offset
// of the record stored with key: for a conflict's message, best effort
// (unknown when this node has no replica, or the record is not stored).
func (b *Broker) storedOffset(ctx context.Context, lt *liveTopic, p uint32, key []byte) (offset uint64, unknown bool) {
	if part := lt.parts[p]; part != nil {
		if off, ok, err := part.StoredOffset(key); err == nil && ok {
			return off, false
		}
	}
	if !b.clustered() {
		return 0, true
	}
	// This node's replica lags, or it holds none: the partition's leader
	// has every acknowledged record.
	ctx, cancel := context.WithTimeout(ctx, locateTimeout)
	defer cancel()
	off, found, err := b.leaderOf(lt, p).StoredOffset(ctx, key)
	if err != nil || !found {
		return 0, true
	}
	return off, false
}

// ServeBind binds keys in home partition p of topic topicID, which this
// node must lead (another node's bindKeys), unless ctx is relayed
// (WithRelayed): then a node that does not lead p forwards the bindings
// once to the leader.
func (b *Broker) ServeBind(ctx context.Context, topicID uint64, p uint32, bs []partition.Binding) ([]partition.Bound, error) {
	lt, part, err := b.ledTopicPartition(topicID, p)
	var nl *NotLeaderError
	if relayed(ctx) && errors.As(err, &nl) {
		b.mu.Lock()
		lt = b.mu.topics[topicID]
		b.mu.Unlock()
		if lt == nil {
			return nil, err
		}
		if err := b.checkBindings(lt, p, bs); err != nil {
			return nil, err
		}
		return b.bindPartition(ctx, lt, p, bs)
	}
	if err != nil {
		return nil, err
	}
	if err := b.checkBindings(lt, p, bs); err != nil {
		return nil, err
	}
	out, err := part.Bind(ctx, bs)
	if errors.Is(err, partition.ErrNotLeader) {
		return nil, &NotLeaderError{Topic: lt.meta.Name, Partition: p, Node: b.cfg.NodeID, Leader: part.Leader()}
	}
	return out, err
}

// checkBindings checks bindings another node sent for home partition p of
// lt: p must be each key's home under the current count or a previous one
// (the sender binds there for a while after a growth).
func (b *Broker) checkBindings(lt *liveTopic, p uint32, bs []partition.Binding) error {
	n := uint32(len(lt.parts))
	if err := b.growing(lt, n); err != nil {
		return err // the sender may route by a count this node has not started yet
	}
	home := func(key []byte) bool {
		if PartitionForKey(key, n) == p {
			return true
		}
		return slices.ContainsFunc(lt.meta.Epochs, func(e meta.Epoch) bool { return PartitionForKey(key, e.Partitions) == p })
	}
	seen := make(map[string]bool, len(bs))
	for i, bd := range bs {
		switch {
		case len(bd.Key) == 0 || len(bd.Key) > MaxIdempotencyKey:
			return fmt.Errorf("%w: binding %d: idempotency key of %d bytes", ErrInvalid, i, len(bd.Key))
		case !home(bd.Key):
			return fmt.Errorf("%w: binding %d: partition %d is not the key's home", ErrInvalid, i, p)
		case bd.Target >= n || bd.Target == p:
			return fmt.Errorf("%w: binding %d: target partition %d", ErrInvalid, i, bd.Target)
		case seen[string(bd.Key)]:
			return fmt.Errorf("%w: binding %d: key bound twice", ErrInvalid, i)
		}
		seen[string(bd.Key)] = true
	}
	if lt.meta.DedupeWindowNanos <= 0 {
		return fmt.Errorf("%w: topic %q does not deduplicate", ErrInvalid, lt.meta.Name)
	}
	return nil
}

// moved is a record of a publish to be sent to the partition its key is
// bound to.
type moved struct {
	index     int // in the request
	partition uint32
}

// moveElsewhere publishes the moved records to their partitions and fills
// in their results. A record moves once: its key is bound to a partition
// that is not its home, where no binding can send it on.
func (b *Broker) moveElsewhere(ctx context.Context, lt *liveTopic, recs []PublishRecord, ms []moved, out []PublishResult) error {
	ctx = notForwarded(ctx)
	slices.SortStableFunc(ms, func(x, y moved) int { return cmp.Compare(x.partition, y.partition) })
	for len(ms) > 0 {
		p := ms[0].partition
		k := 1
		for k < len(ms) && ms[k].partition == p {
			k++
		}
		idx := make([]int, k)
		rs := make([]PublishRecord, k)
		for j, m := range ms[:k] {
			idx[j] = m.index
			rs[j] = recs[m.index]
		}
		ms = ms[k:]
		a, res, err := b.publishPartition(ctx, lt, p, records(rs), nil)
		again, err := b.partitionOutcome(lt, p, idx, a, res, err, out)
		if err != nil {
			return err
		}
		if len(again) > 0 {
			return fmt.Errorf("%w: partition %d sent a record on again", ErrUnavailable, p)
		}
	}
	return nil
}
