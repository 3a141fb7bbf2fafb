package meta

import (
	"context"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/quota"
)

// Growing a topic's partitions.
//
// A growth is one metadata command: at apply, the new partitions get
// group ids from the counter and replicas placed as at creation (place),
// so every member computes the same; the count the topic had is kept in
// Epochs with the proposer's clock, because routing by hash changes with
// the count: a key, and an idempotency key's home partition, may map
// elsewhere afterwards. The broker reads Epochs to keep idempotency keys
// deduplicated across a growth (broker/idempotency.go).
//
// Partitions are never removed (ErrShrink): their records, offsets and
// message IDs stay valid. Asking for the count the topic has is a no-op,
// so a growth can be repeated safely. A topic keeping the key index
// refuses to grow (ErrGrowKeyIndex): key versions count per key and
// partition, so a key that moved would restart its versions in its new
// partition and an entity's history would be split.

// Grow gives a topic more partitions.
type Grow struct {
	Name       string `json:"name"`
	Partitions uint32 `json:"partitions"`
	// Time is the proposer's clock (Unix ns): when the previous count
	// ended (Epoch.Until).
	Time int64 `json:"time_ns"`
}

// Epoch is a partition count a topic had before it grew.
type Epoch struct {
	Partitions uint32 `json:"partitions"`
	// Until is when the count was replaced (Unix ns, the proposer's clock).
	Until int64 `json:"until_ns"`
}

// GrowTopic proposes giving a topic more partitions and waits until it is
// durable. It returns the topic (unchanged when it had that many).
func (m *Meta) GrowTopic(ctx context.Context, g Grow) (*Topic, error) {
	return m.propose(ctx, command{Grow: &g})
}

func (m *Meta) applyGrow(w *pebble.Batch, g *Grow) (*Topic, error) {
	old, ok := m.topics[g.Name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, echo.Quote(g.Name))
	}
	switch {
	case g.Partitions == old.Partitions:
		return old, nil
	case g.Partitions < old.Partitions:
		return nil, fmt.Errorf("%w: topic %s has %d, asked for %d", ErrShrink, echo.Quote(g.Name), old.Partitions, g.Partitions)
	case old.KeyIndex:
		return nil, fmt.Errorf("%w: topic %s", ErrGrowKeyIndex, echo.Quote(g.Name))
	}
	if old.Creator != "" {
		// The new partitions count against the creator's partition quota
		// (the topic itself is counted already).
		l := quota.Limits{Partitions: m.auth.applied.QuotaFor(old.Creator).Partitions}
		if err := quota.CheckTopics(old.Creator, l, countOwned(m.topics)[old.Creator], g.Partitions-old.Partitions); err != nil {
			return nil, err
		}
	}
	t := *old // topics are shared read-only: replace, never modify
	t.Groups = slices.Clone(old.Groups)
	t.Replicas = slices.Clone(old.Replicas)
	t.Epochs = append(slices.Clone(old.Epochs), Epoch{Partitions: old.Partitions, Until: g.Time})
	t.Partitions = g.Partitions
	active := slices.DeleteFunc(slices.Clone(m.st.Nodes), func(n Node) bool { return n.Leaving })
	placed := len(old.Replicas) > 0 && len(active) > 0
	if placed && int(t.ReplicationFactor) > len(active) {
		return nil, fmt.Errorf("%w: replication factor %d but the cluster has %d nodes (not leaving)", ErrNotEnoughNodes, t.ReplicationFactor, len(active))
	}
	m.addPartitions(&t, old.Partitions, g.Partitions, active, placed)
	if err := m.putTopic(w, &t, Change{Grown: &t}); err != nil {
		return nil, err
	}
	return &t, nil
}
