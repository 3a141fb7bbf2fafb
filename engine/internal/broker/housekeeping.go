package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rewind-io/rewind/engine/internal/echo"
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
		LocalMaxAge: time.Duration(r.LocalMaxAgeNanos), LocalMaxBytes: r.LocalMaxBytes,
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
	for _, p := range lt.hosted() {
		p.SetPolicy(policyOf(t))
	}
}

// withDefaults fills a retention policy's defaults, so that what is stored
// (and shown) is what applies.
func withDefaults(r meta.Retention) meta.Retention {
	if r.Cleanup == "" {
		r.Cleanup = "delete"
	}
	if r.Cleanup == "delete,compact" {
		r.Cleanup = "compact,delete"
	}
	if r.Compacts() && r.DeleteRetentionNanos == 0 {
		r.DeleteRetentionNanos = int64(DefaultDeleteRetention)
	}
	return r
}

// validateRetention reports what is wrong with a retention policy.
func validateRetention(r meta.Retention) error {
	switch r.Cleanup {
	case "", "delete", "compact", "compact,delete":
	default:
		return fmt.Errorf("%w: cleanup policy %s: use delete, compact or compact,delete", ErrInvalid, echo.Quote(r.Cleanup))
	}
	if r.MaxAgeNanos < 0 || r.DeleteRetentionNanos < 0 || r.LocalMaxAgeNanos < 0 {
		return fmt.Errorf("%w: negative retention duration", ErrInvalid)
	}
	return nil
}

// checkTiering refuses local limits on a node without a tier store: they
// would never let anything leave the local disks.
func (b *Broker) checkTiering(r meta.Retention) error {
	if r.Tiers() && b.cfg.Tier == nil {
		return fmt.Errorf("%w: local retention limits need tiered storage: start the servers with --tier URL", ErrFailedPrecondition)
	}
	return nil
}

// AlterTopic replaces a topic's retention policy.
func (b *Broker) AlterTopic(ctx context.Context, name string, r meta.Retention) (*TopicInfo, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	r = withDefaults(r)
	if err := validateRetention(r); err != nil {
		return nil, err
	}
	if err := b.checkTiering(r); err != nil {
		return nil, err
	}
	t, err := b.meta.AlterTopic(ctx, meta.Alter{Name: name, Retention: r})
	if errors.Is(err, meta.ErrNoTopic) {
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, echo.Quote(name))
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
	lastTierGC := map[*partition.Partition]time.Time{}
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
			parts = append(parts, lt.hosted()...)
		}
		b.mu.Unlock()
		for _, p := range parts {
			if p.Leader() != b.cfg.NodeID || p.Err() != nil {
				continue
			}
			if err := b.retain(p); err != nil {
				b.log.Warn("retention", "partition", p.Index(), "error", err)
			}
			if err := b.tierOut(p); err != nil {
				b.log.Warn("tiered storage", "partition", p.Index(), "error", err)
			}
			if p.TierStore() != nil && time.Since(lastTierGC[p]) >= tierGCInterval {
				lastTierGC[p] = time.Now()
				ctx, cancel := b.housekeepingContext()
				n, err := p.CollectTierGarbage(ctx, time.Now().Add(-tierOrphanAge))
				cancel()
				if err != nil {
					b.log.Warn("tiered storage cleanup", "partition", p.Index(), "error", err)
				} else if n > 0 {
					b.log.Info("tiered storage cleanup", "partition", p.Index(), "deleted-objects", n)
				}
			}
			// Compact when at least as many records arrived since the last
			// compaction as it kept (a dirty ratio of one half, as Kafka's
			// default): the work per appended record stays bounded however
			// large the compacted history is.
			mark := lastCompact[p]
			dirty := p.Bounds().Next - mark.end
			if p.Policy().Compact && dirty > 0 && dirty >= mark.kept && time.Since(mark.at) >= b.cfg.CompactionInterval {
				m, err := b.compact(p)
				if err != nil {
					b.log.Warn("compaction", "partition", p.Index(), "error", err)
				}
				m.at = time.Now()
				lastCompact[p] = m
			}
		}
	}
}

// tierSegmentBytes is about how much history one segment object holds, and
// tierSegmentsPerPass how many a partition uploads per housekeeping pass.
const (
	tierSegmentBytes    = 16 << 20
	tierSegmentsPerPass = 4
)

// A partition's leader looks for objects no manifest row names every
// tierGCInterval, and deletes those older than tierOrphanAge (younger
// ones may be a former leader's upload still in flight).
const (
	tierGCInterval = 10 * time.Minute
	tierOrphanAge  = time.Hour
)

// tierOut moves what the partition's local limits no longer keep to the
// object store: it uploads the sealed range below the local boundary, then
// removes locally what the manifest now covers.
func (b *Broker) tierOut(p *partition.Partition) error {
	x, ok, err := p.PlanLocal(b.Now())
	if err != nil || !ok {
		return err
	}
	ctx, cancel := b.housekeepingContext()
	defer cancel()
	for range tierSegmentsPerPass {
		_, ok, err := p.UploadTier(ctx, p.TierStore(), x, tierSegmentBytes)
		if err != nil && !errors.Is(err, partition.ErrStalePlan) {
			return err
		}
		if !ok || err != nil {
			break
		}
	}
	rows := p.Tiered()
	if len(rows) == 0 {
		return nil
	}
	end := min(x, rows[len(rows)-1].End)
	if end <= p.LocalStart() {
		return nil
	}
	if err := p.TruncateLocal(ctx, end); err != nil && !errors.Is(err, partition.ErrStalePlan) {
		return err
	}
	return nil
}

// compactChunk is how many batches one compaction command rewrites.
const compactChunk = 16

type compactMark struct {
	end  uint64 // the end offset the last compaction covered
	kept uint64 // records it kept
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
func (b *Broker) compact(p *partition.Partition) (compactMark, error) {
	plan, err := p.PlanCompaction(b.Now(), 0)
	mark := compactMark{end: plan.End, kept: uint64(plan.Kept)}
	if err != nil || len(plan.Cmds) == 0 {
		return mark, err
	}
	cmds := plan.Cmds
	ctx, cancel := b.housekeepingContext()
	defer cancel()
	// A few batches per raft command, and a pause as long as each command
	// took: compaction gets at most half of the raft loop, publishes the
	// rest.
	for len(cmds) > 0 {
		n := min(len(cmds), compactChunk)
		t0 := time.Now()
		if err := p.Compact(ctx, cmds[:n]...); err != nil && !errors.Is(err, partition.ErrStalePlan) {
			return mark, err
		}
		cmds = cmds[n:]
		select {
		case <-time.After(time.Since(t0)):
		case <-b.stop:
			return mark, nil
		}
	}
	b.log.Debug("compaction", "partition", p.Index(), "batches", len(plan.Cmds), "kept", plan.Kept)
	return mark, nil
}

// DiskFull reports whether publishes are refused for lack of disk space.
func (b *Broker) DiskFull() bool { return b.diskFull.Load() }

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
