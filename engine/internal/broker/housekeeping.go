package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/tier"
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
	tick := time.NewTicker(b.cfg.Storage.HousekeepingInterval)
	defer tick.Stop()
	lastCompact := map[*partition.Partition]compactMark{}
	var lastTierGC time.Time
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		b.checkDisk()
		if b.diskOut.Load() {
			// Every write may fail: propose nothing (disk.go).
			continue
		}
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
			if b.diskFull.Load() {
				// Retention above frees space; what follows writes
				// (uploads record manifest rows, compaction rewrites
				// batches) and waits for space to return.
				continue
			}
			if err := b.tierOut(p); err != nil {
				b.log.Warn("tiered storage", "partition", p.Index(), "error", err)
			}
			// Compact when at least as many records arrived since the last
			// compaction as it kept (a dirty ratio of one half, as Kafka's
			// default): the work per appended record stays bounded however
			// large the compacted history is.
			mark := lastCompact[p]
			dirty := p.Bounds().Next - mark.end
			if p.Policy().Compact && dirty > 0 && dirty >= mark.kept && time.Since(mark.at) >= b.cfg.Storage.CompactionInterval {
				m, err := b.compact(p)
				if err != nil {
					b.log.Warn("compaction", "partition", p.Index(), "error", err)
				}
				m.at = time.Now()
				lastCompact[p] = m
			}
		}
		if b.cfg.Tier != nil && time.Since(lastTierGC) >= tierGCInterval {
			lastTierGC = time.Now()
			ctx, cancel := b.housekeepingContext()
			// Wall-clock time, not the broker clock: object times are the
			// store's.
			_, _ = b.CollectTierGarbage(ctx, time.Now().Add(-tierOrphanAge)) // logged there
			cancel()
		}
	}
}

// tierSegmentBytes is about how much history one segment object holds, and
// tierSegmentsPerPass how many a partition uploads per housekeeping pass.
const (
	tierSegmentBytes    = 16 << 20
	tierSegmentsPerPass = 4
)

// Every tierGCInterval a node looks for objects nothing refers to (no
// manifest row of a partition it leads names them, or, on the metadata
// leader, their topic was deleted) and deletes those older than
// tierOrphanAge: younger ones may be an upload still in flight (a former
// leader's, or one racing the topic's deletion).
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
		if errors.Is(err, partition.ErrStalePlan) {
			// Another leader recorded these offsets first (this one lost
			// its leadership between the object and the command): the
			// object is left for CollectTierGarbage.
			b.log.Info("tiered storage: upload refused as stale", "partition", p.Index(), "error", err)
		}
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

// CollectTierGarbage deletes the tier objects written before olderThan
// that nothing refers to any more, and returns how many it deleted: on
// each partition this node leads, the objects its manifest does not name
// (Partition.CollectTierGarbage); on the metadata leader, every object of
// a topic the catalog no longer holds (collectDeletedTopics). Housekeeping
// runs it every tierGCInterval with olderThan tierOrphanAge ago; errors
// are logged, and the first one returned, after every partition is tried.
func (b *Broker) CollectTierGarbage(ctx context.Context, olderThan time.Time) (int, error) {
	if b.cfg.Tier == nil {
		return 0, nil
	}
	b.mu.Lock()
	var parts []*partition.Partition
	for _, lt := range b.mu.topics {
		parts = append(parts, lt.hosted()...)
	}
	b.mu.Unlock()
	var errs []error
	total := 0
	for _, p := range parts {
		if p.Leader() != b.cfg.NodeID || p.Err() != nil {
			continue
		}
		n, err := p.CollectTierGarbage(ctx, olderThan)
		total += n
		if err != nil {
			b.log.Warn("tiered storage cleanup", "partition", p.Index(), "error", err)
			errs = append(errs, err)
		} else if n > 0 {
			b.log.Info("tiered storage cleanup", "partition", p.Index(), "deleted-objects", n)
		}
	}
	n, err := b.collectDeletedTopics(ctx, olderThan)
	total += n
	if err != nil {
		b.log.Warn("tiered storage cleanup of deleted topics", "error", err)
		errs = append(errs, err)
	} else if n > 0 {
		b.log.Info("tiered storage cleanup of deleted topics", "deleted-objects", n)
	}
	if len(errs) > 0 {
		return total, errs[0]
	}
	return total, nil
}

// tierTopicsPrefix is where every topic's objects are (tier.Prefix is
// tierTopicsPrefix + "<topic id>/<partition>/").
const tierTopicsPrefix = "topics/"

// collectDeletedTopics deletes the objects of topics the catalog no longer
// holds that were written before olderThan. Only the metadata leader does
// it, once it has applied everything it committed, so its catalog is
// current: a topic created since the catalog was read has no object older
// than olderThan (objects are written after their topic is created), and
// a deleted topic never comes back (topic ids are not reused). Younger
// objects of a deleted topic, an upload that raced the deletion, wait for
// a later pass. Names that are not a topic's object are left alone.
func (b *Broker) collectDeletedTopics(ctx context.Context, olderThan time.Time) (int, error) {
	st := b.cfg.Tier
	if st == nil {
		return 0, nil
	}
	if s, ok := b.host.Status(meta.GroupID); !ok || !s.Leading || s.Applied < s.Commit || s.Err != nil {
		return 0, nil
	}
	objs, err := st.List(ctx, tierTopicsPrefix)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, o := range objs {
		id, ok := topicOfObject(o.Name)
		if !ok || !o.Modified.Before(olderThan) {
			continue
		}
		if _, live := b.meta.TopicByID(id); live {
			continue
		}
		if err := st.Delete(ctx, o.Name); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}

// topicOfObject returns the topic id of an object named by tier.Name.
func topicOfObject(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, tierTopicsPrefix)
	if !ok {
		return 0, false
	}
	idText, _, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil || id == 0 || !strings.HasPrefix(name, strings.TrimSuffix(tier.Prefix(id, 0), "0/")) {
		return 0, false
	}
	return id, true
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
