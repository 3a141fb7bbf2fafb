package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestTransferLeaderHolds: a manual leader transfer is not undone by
// leader balancing. The transfer makes the node the partition's preferred
// leader on every member (its first replica), so balancing, which hands
// each partition to its preferred leader, keeps it there. The request is
// sent to a node that neither leads the partition nor is the target: it
// goes on to the metadata leader (the preference) and to the partition's
// leader (the hand-over).
func TestTransferLeaderHolds(t *testing.T) {
	const balance = 100 * time.Millisecond
	cl := enginetest.StartCluster(t, 3, func(_ uint64, c *engine.Config) {
		c.Cluster.LeaderBalanceInterval = balance
	})
	urls := cl.URLs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clients := map[uint64]*client.Client{}
	for i, u := range urls {
		clients[uint64(i+1)] = client.New(u)
	}
	c := clients[1]
	if _, err := c.CreateTopic(ctx, "moved", client.WithPartitions(1), client.WithReplicationFactor(3)); err != nil {
		t.Fatal(err)
	}
	// status returns partition 0's replicas and leader as node n sees them.
	status := func(n uint64) ([]uint64, uint64, error) {
		st, err := clients[n].ClusterStatus(ctx)
		if err != nil {
			return nil, 0, err
		}
		for _, p := range st.GetPartitions() {
			if p.GetTopic() == "moved" && p.GetPartition() == 0 {
				return p.GetReplicas(), p.GetLeader(), nil
			}
		}
		return nil, 0, fmt.Errorf("node %d does not know the partition", n)
	}
	var preferred uint64
	eventually(t, "the preferred leader leads", func() error {
		r, leader, err := status(1)
		if err != nil {
			return err
		}
		if leader == 0 || leader != r[0] {
			return fmt.Errorf("leader %d, replicas %v", leader, r)
		}
		preferred = r[0]
		return nil
	})
	target := preferred%3 + 1
	other := target%3 + 1 // neither the leader nor the target
	if other == preferred {
		other = other%3 + 1
	}
	if err := clients[other].TransferLeader(ctx, "moved", 0, target); err != nil {
		t.Fatal(err)
	}
	for n := uint64(1); n <= 3; n++ {
		eventually(t, fmt.Sprintf("node %d sees node %d preferred and leading", n, target), func() error {
			r, leader, err := status(n)
			if err != nil {
				return err
			}
			if len(r) != 3 || r[0] != target || leader != target {
				return fmt.Errorf("replicas %v, leader %d", r, leader)
			}
			return nil
		})
	}
	// Balancing rounds pass (each member's node must also be up for two
	// rounds before it is handed anything): the leadership stays.
	time.Sleep(10 * balance)
	for n := uint64(1); n <= 3; n++ {
		if r, leader, err := status(n); err != nil || leader != target || r[0] != target {
			t.Fatalf("node %d after balancing: replicas %v, leader %d (%v); want node %d to keep leading", n, r, leader, err, target)
		}
	}
	// Asking for the node that already leads is done at once.
	if err := clients[target].TransferLeader(ctx, "moved", 0, target); err != nil {
		t.Fatalf("transfer to the leader itself: %v", err)
	}
}
