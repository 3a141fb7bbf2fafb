package meta

import (
	"github.com/rewind-io/rewind/engine/internal/quota"
)

// Topic and partition quotas (finding 7f of issue 24: a principal allowed
// to create topics made 4 x 1,024 partitions, and a node's memory went from
// 52 to 575 MB).
//
// A topic records the principal that created it (Topic.Creator), so what a
// principal owns is a count over the catalog: it survives restarts, every
// member computes the same one, and deleting a topic frees its share. The
// check runs in applyCreate, against the applied catalog and the applied
// authorization state: the metadata group applies creations one at a time
// in log order, so two creations racing through different members cannot
// both pass a quota that has room for one, and every member refuses the
// same ones. A refused creation changes nothing: no id or group is taken.
// A growth of a topic's partitions (grow.go) is checked the same way, its
// new partitions against the topic's creator's partition quota.
//
// The per-topic cap (broker.MaxPartitions, 1,024) is no quota: what each
// partition costs a node is bounded by the quotas above, whatever the
// topics; the cap bounds what one topic's count costs each request on it
// (docs/operations.md, "Partitions"; measured in docs/benchmarks.md).
//
// Why in the apply and not at the API node before proposing? Because a
// check there reads a catalog that does not yet hold the creations in
// flight: N concurrent requests would each see room for one.

// checkTopicQuota refuses s when its creator would pass its topic or
// partition quota (a *quota.Exceeded). Loop-owned: reads the applied state.
func (m *Meta) checkTopicQuota(s *Spec) error {
	if s.Creator == "" {
		return nil
	}
	l := m.auth.applied.QuotaFor(s.Creator)
	if l.Topics == 0 && l.Partitions == 0 {
		return nil
	}
	return quota.CheckTopics(s.Creator, l, countOwned(m.topics)[s.Creator], s.Partitions)
}

// countOwned counts, per principal, the topics of the catalog it created
// and their partitions (topics without a creator count for no one).
func countOwned(topics map[string]*Topic) map[string]quota.Owned {
	out := map[string]quota.Owned{}
	for _, t := range topics {
		if t.Creator == "" {
			continue
		}
		o := out[t.Creator]
		o.Topics++
		o.Partitions += uint64(t.Partitions)
		out[t.Creator] = o
	}
	return out
}

// Owned returns, for every principal that created topics that still exist
// (durable), how many and their partitions. Safe for concurrent use.
func (m *Meta) Owned() map[string]quota.Owned {
	m.mu.Lock()
	defer m.mu.Unlock()
	return countOwned(m.mu.topics)
}
