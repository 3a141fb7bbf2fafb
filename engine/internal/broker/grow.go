package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/quota"
)

// Growing a topic's partitions (package meta's grow.go has the command).
//
// What changes for publishers and readers:
//
//  1. Routing by hash uses the new count at once: a key, and an
//     idempotency key's home partition, may map to another partition. A
//     key's records stay in order within one partition-count epoch; a key
//     that moved has its older records in its old partition.
//  2. Idempotency keys stay deduplicated across the growth: for the dedupe
//     window (plus growGrace) after it, a publish also binds each
//     idempotency key in its home partitions under the previous counts,
//     oldest first (idempotency.go), so a retry of a record stored before
//     the growth finds it.
//  3. Topics keeping the key index refuse to grow: key versions count per
//     key and partition, so a key that moved would restart its versions.
//  4. Subscriber groups are rebalanced over all partitions (groups.Grow).
//     A stream that is already open, and one resumed from a token, reads
//     the partitions it started with; a new subscription reads them all.

// growGrace is how long after the dedupe window a growth still sends
// idempotency keys to their homes under the previous count: it covers a
// publish routed under the old count that was still in flight (a
// publish's deadline) and the difference between the clocks of the node
// that grew the topic and the one publishing.
const growGrace = time.Hour

// GrowTopic gives topic name partitions partitions in all, more than it
// has (the count it has is a no-op, fewer is ErrInvalid), and returns once
// this node runs its replicas of the new ones. A topic that keeps the key
// index refuses with ErrFailedPrecondition; the creator's partition quota
// may refuse with a *quota.Exceeded.
func (b *Broker) GrowTopic(ctx context.Context, name string, partitions uint32) (*TopicInfo, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if partitions == 0 || partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions: use 1 to %d", ErrInvalid, partitions, MaxPartitions)
	}
	cur, ok := b.meta.Topic(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, echo.Quote(name))
	}
	if err := checkGrow(cur, partitions); err != nil || partitions == cur.Partitions {
		return cur, err
	}
	t, err := b.meta.GrowTopic(ctx, meta.Grow{Name: name, Partitions: partitions, Time: b.Now()})
	switch {
	case errors.Is(err, meta.ErrNoTopic):
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, echo.Quote(name))
	case errors.Is(err, meta.ErrShrink), errors.Is(err, meta.ErrGrowKeyIndex):
		// Another growth came first: checkGrow against it says why.
		if now, ok := b.meta.Topic(name); ok {
			if err := checkGrow(now, partitions); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, meta.ErrNotEnoughNodes):
		return nil, fmt.Errorf("%w: %w", ErrFailedPrecondition, err)
	case errors.Is(err, quota.ErrExceeded):
		return nil, err // the creator's partition quota; nothing changed
	case err != nil:
		return nil, unavailable(err)
	}
	if err := b.growTopic(t); err != nil {
		return nil, err
	}
	return t, nil
}

// checkGrow says why t cannot have partitions partitions, or nil.
func checkGrow(t *meta.Topic, partitions uint32) error {
	switch {
	case partitions < t.Partitions:
		return fmt.Errorf("%w: topic %s has %d partitions; partitions can be added, never removed (their records, offsets and message IDs would go): ask for more than %d",
			ErrInvalid, echo.Quote(t.Name), t.Partitions, t.Partitions)
	case partitions > t.Partitions && t.KeyIndex:
		return fmt.Errorf("%w: topic %s keeps the key index, whose key versions count per key and partition: with more partitions keys would move, their versions would restart in their new partitions and entity histories would split. Create a new topic with more partitions and copy the records; a topic created with --key-index=false can grow",
			ErrFailedPrecondition, echo.Quote(t.Name))
	}
	return nil
}

// growTopic runs this node's replicas of t's new partitions and gives the
// topic's subscriber groups the new partitions. It is a no-op when they
// run already (the request and reconcile both call it).
func (b *Broker) growTopic(t *meta.Topic) error {
	b.mu.Lock()
	old, ok := b.mu.topics[t.ID]
	if !ok {
		b.mu.Unlock()
		return b.startTopic(t)
	}
	if len(old.parts) >= len(t.Groups) {
		b.mu.Unlock()
		return nil
	}
	lt := &liveTopic{meta: t, parts: slices.Clone(old.parts), counters: old.counters, spread: old.spread.grown(t.Partitions)}
	pending, openErr := b.openReplicas(lt, len(old.parts), len(t.Groups), false)
	_, startErr := b.startGroups(pending)
	err := errors.Join(openErr, startErr)
	b.mu.topics[t.ID] = lt
	b.mu.Unlock()
	if lt.hostsAll() {
		b.groups.Grow(lt.groupTopic())
	}
	return err
}

// homeCounts returns the partition counts under which an idempotency key
// published at now may have a home holding a record still within the
// dedupe window: the previous counts that ended less than the window (plus
// growGrace) before now, oldest first, then the current one.
func (lt *liveTopic) homeCounts(now int64) []uint32 {
	var out []uint32
	floor := now - lt.meta.DedupeWindowNanos - int64(growGrace)
	for _, e := range lt.meta.Epochs {
		if e.Until >= floor && e.Partitions < lt.meta.Partitions {
			out = append(out, e.Partitions)
		}
	}
	return append(out, lt.meta.Partitions)
}

// growing returns an ErrUnavailable when partition p, beyond what this
// node runs of lt, exists in the catalog: the topic grew and this node
// has not started the new partitions yet (another node, which has, may
// route there). Otherwise nil: p does not exist.
func (b *Broker) growing(lt *liveTopic, p uint32) error {
	if t, ok := b.meta.TopicByID(lt.meta.ID); ok && p < t.Partitions {
		return fmt.Errorf("%w: partition %d of topic %q is starting on node %d (the topic grew to %d partitions)", ErrUnavailable, p, lt.meta.Name, b.cfg.NodeID, t.Partitions)
	}
	return nil
}
