package broker

import (
	"slices"
	"strings"

	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/tier"
)

// PartitionTierLag is one partition's upload lag on this node.
type PartitionTierLag struct {
	Topic     string
	Partition uint32
	partition.TierLag
}

// TierLags returns the upload lag (partition.TierLag) of every partition
// this node keeps that has local limits, by topic and partition. A
// partition whose lag cannot be read now (its state moving under a
// truncation) is left out of this call.
func (b *Broker) TierLags() []PartitionTierLag {
	if b.cfg.Tier == nil {
		return nil
	}
	type part struct {
		topic string
		index uint32
		p     *partition.Partition
	}
	var parts []part
	b.mu.Lock()
	for _, lt := range b.mu.topics {
		for i, p := range lt.parts {
			if p != nil {
				parts = append(parts, part{lt.meta.Name, uint32(i), p})
			}
		}
	}
	b.mu.Unlock()
	now := b.Now()
	var out []PartitionTierLag
	for _, pt := range parts {
		lag, ok, err := pt.p.UploadLag(now)
		if err != nil || !ok {
			continue
		}
		out = append(out, PartitionTierLag{Topic: pt.topic, Partition: pt.index, TierLag: lag})
	}
	slices.SortFunc(out, func(a, c PartitionTierLag) int {
		if n := strings.Compare(a.Topic, c.Topic); n != 0 {
			return n
		}
		return int(a.Partition) - int(c.Partition)
	})
	return out
}

// TierCacheStats returns what the node's tier cache did, and false
// without a tier.
func (b *Broker) TierCacheStats() (tier.CacheStats, bool) {
	if b.cfg.TierCache == nil {
		return tier.CacheStats{}, false
	}
	return b.cfg.TierCache.Stats(), true
}
