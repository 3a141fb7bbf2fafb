package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/partition"
)

// policyOf turns a topic's retention record into a partition policy.
func policyOf(t *meta.Topic) partition.Policy {
	r := t.Retention
	dr := time.Duration(r.DeleteRetentionNanos)
	if dr == 0 {
		dr = DefaultDeleteRetention
	}
	return partition.Policy{
		Delete: r.Deletes(), MaxAge: time.Duration(r.MaxAgeNanos), MaxBytes: r.MaxBytes, MaxRecords: r.MaxRecords,
		Compact: r.Compacts(), DeleteRetention: dr,
	}
}

// DefaultDeleteRetention is how long tombstones survive compaction unless a
// topic says otherwise.
const DefaultDeleteRetention = 24 * time.Hour

// applyPolicy gives an altered topic's partitions their new policy.
func (b *Broker) applyPolicy(t *meta.Topic) {
	b.mu.Lock()
	lt := b.mu.topics[t.ID]
	b.mu.Unlock()
	if lt == nil {
		return
	}
	for _, p := range lt.parts {
		p.SetPolicy(policyOf(t))
	}
}

// validateRetention reports what is wrong with a retention policy.
func validateRetention(r meta.Retention) error {
	switch r.Cleanup {
	case "", "delete", "compact", "compact,delete":
	default:
		return fmt.Errorf("%w: cleanup policy %q: use delete, compact or compact,delete", ErrInvalid, r.Cleanup)
	}
	if r.MaxAgeNanos < 0 || r.DeleteRetentionNanos < 0 {
		return fmt.Errorf("%w: negative retention duration", ErrInvalid)
	}
	return nil
}

// AlterTopic replaces a topic's retention policy.
func (b *Broker) AlterTopic(ctx context.Context, name string, r meta.Retention) (*TopicInfo, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if err := validateRetention(r); err != nil {
		return nil, err
	}
	t, err := b.meta.AlterTopic(ctx, meta.Alter{Name: name, Retention: r})
	if errors.Is(err, meta.ErrNoTopic) {
		return nil, fmt.Errorf("%w: %q", ErrNoTopic, name)
	}
	if err != nil {
		return nil, unavailable(err)
	}
	b.applyPolicy(t)
	return t, nil
}

// housekeeping enforces retention and runs compaction on the partitions
// this node leads, and watches free disk space.
func (b *Broker) housekeeping() {
	defer b.wg.Done()
	tick := time.NewTicker(b.cfg.HousekeepingInterval)
	defer tick.Stop()
	lastCompact := map[*partition.Partition]compactMark{}
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		b.checkDisk()
		b.mu.Lock()
		var parts []*partition.Partition
		for _, lt := range b.mu.topics {
			parts = append(parts, lt.parts...)
		}
		b.mu.Unlock()
		for _, p := range parts {
			if p.Leader() != b.cfg.NodeID || p.Err() != nil {
				continue
			}
			if err := b.retain(p); err != nil {
				b.log.Warn("retention", "partition", p.Index(), "error", err)
			}
			mark, due := lastCompact[p], false
			if next := p.Bounds().Next; next != mark.next && time.Since(mark.at) >= b.cfg.CompactionInterval {
				due = true
				lastCompact[p] = compactMark{next: next, at: time.Now()}
			}
			if due {
				if err := b.compact(p); err != nil {
					b.log.Warn("compaction", "partition", p.Index(), "error", err)
				}
			}
		}
	}
}

type compactMark struct {
	next uint64
	at   time.Time
}

func (b *Broker) housekeepingContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	go func() {
		select {
		case <-b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// retain removes what the partition's limits no longer keep.
func (b *Broker) retain(p *partition.Partition) error {
	x, ok, err := p.PlanRetention(b.Now())
	if err != nil || !ok {
		return err
	}
	ctx, cancel := b.housekeepingContext()
	defer cancel()
	if err := p.Truncate(ctx, x); err != nil && !errors.Is(err, partition.ErrStalePlan) {
		return err
	}
	b.log.Debug("retention", "partition", p.Index(), "log-start", x)
	return nil
}

// compact compacts one partition, one batch per raft command, so that
// publishes keep their latency while it runs.
func (b *Broker) compact(p *partition.Partition) error {
	cmds, err := p.PlanCompaction(b.Now(), 0)
	if err != nil || len(cmds) == 0 {
		return err
	}
	ctx, cancel := b.housekeepingContext()
	defer cancel()
	for _, c := range cmds {
		if err := p.Compact(ctx, c); err != nil && !errors.Is(err, partition.ErrStalePlan) {
			return err
		}
	}
	b.log.Debug("compaction", "partition", p.Index(), "batches", len(cmds))
	return nil
}

// checkDisk sets or clears the disk-full flag.
func (b *Broker) checkDisk() {
	if b.cfg.MinFreeBytes < 0 {
		return
	}
	free, err := b.cfg.FreeBytes()
	if err != nil {
		return // unknown: do not block publishes on a failed probe
	}
	full := free < uint64(b.cfg.MinFreeBytes)
	if b.diskFull.Swap(full) != full {
		if full {
			b.log.Error("disk almost full: refusing publishes", "free-bytes", free, "min-free-bytes", b.cfg.MinFreeBytes)
		} else {
			b.log.Info("disk space back: accepting publishes", "free-bytes", free)
		}
	}
}
