//go:build failpoints

package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/failpoint"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestFailpointTierLeaderChangeMidUpload: the leader of a partition writes a
// segment object, then loses its leadership before its command to record
// it commits (the tier-uploaded pause point holds it there while the test
// transfers the leadership). The new leader moves the history on its own,
// over a longer range since more records arrived; the former leader's
// command, arriving late, is refused as stale. Every member then has the
// same manifest, each offset in exactly one row, every member replays the
// whole history exactly, and the former leader's object is an orphan that
// the cleanup deletes once old enough, and not before.
func TestFailpointTierLeaderChangeMidUpload(t *testing.T) {
	tierDir := t.TempDir()
	logs := make([]*enginetest.Buffer, 3)
	cl := enginetest.StartCluster(t, 3, func(id uint64, c *engine.Config) {
		c.Tier.URL = "file://" + tierDir
		c.Storage.HousekeepingInterval = 20 * time.Millisecond
		c.Cluster.LeaderBalanceInterval = -1 // the leadership stays where the test puts it
		logs[id-1] = &enginetest.Buffer{}
		c.Logger = hclog.New(&hclog.LoggerOptions{Output: logs[id-1], Level: hclog.Info})
	})
	urls, nodes := cl.URLs(), cl.Nodes()
	// Before the nodes stop (cleanups run last first): a held mover would
	// keep its node from closing.
	t.Cleanup(func() { failpoint.Clear(failpoint.TierUploaded) })
	if err := failpoint.Set(failpoint.TierUploaded, ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(urls[0])
	createTieredTopic(ctx, t, c)
	var want []string
	publish := func(n int) {
		t.Helper()
		for range n / 20 {
			msgs := make([]client.Message, 20)
			for j := range msgs {
				v := fmt.Sprintf("r%04d-padding-padding-padding-padding-padding", len(want))
				msgs[j].Value = []byte(v)
				want = append(want, v)
			}
			if _, err := c.Publish(ctx, "h", msgs...); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(300)
	select {
	case <-failpoint.Reached(failpoint.TierUploaded):
	case <-ctx.Done():
		t.Fatal("no leader uploaded a segment")
	}
	st, err := tier.NewFileStore(tierDir)
	if err != nil {
		t.Fatal(err)
	}
	stale := objects(t, st)
	if len(stale) != 1 {
		t.Fatalf("the store holds %v, want the one object of the held upload", stale)
	}
	_, parts, err := c.DescribeTopic(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	old := parts[0].Leader
	// More records while the old leader is held: the new leader's first
	// segment covers more than the held one.
	publish(300)
	next := old%3 + 1
	if err := client.New(urls[old-1]).TransferLeader(ctx, "h", 0, next); err != nil {
		t.Fatal(err)
	}
	// The new leader moves the history on its own, and every member
	// drops its local copy below what it recorded.
	for i, n := range nodes {
		eventually(t, fmt.Sprintf("member %d follows the new leader's move", i+1), func() error {
			_, ps, err := engine.BrokerOf(n.Node).DescribeTopic("h")
			if err != nil {
				return err
			}
			p := ps[0]
			if p.Leader != next || len(p.Tiered) == 0 || p.LocalStart != p.Tiered[len(p.Tiered)-1].End || p.State.Next != uint64(len(want)) {
				return fmt.Errorf("leader %d, local start %d, end %d, manifest %+v", p.Leader, p.LocalStart, p.State.Next, p.Tiered)
			}
			return nil
		})
	}
	// The old leader goes on: its command reaches the new leader late, and
	// is refused as stale.
	failpoint.Clear(failpoint.TierUploaded)
	eventually(t, "the old leader's upload refused as stale", func() error {
		if !strings.Contains(logs[old-1].String(), "upload refused as stale") || !strings.Contains(logs[old-1].String(), "already tiered in") {
			return fmt.Errorf("not in node %d's log yet", old)
		}
		return nil
	})

	var manifest []partition.TierSegment
	for i, n := range nodes {
		_, ps, err := engine.BrokerOf(n.Node).DescribeTopic("h")
		if err != nil {
			t.Fatal(err)
		}
		rows := ps[0].Tiered
		end := uint64(0)
		for _, r := range rows {
			if r.Base != end || r.Name == stale[0] {
				t.Fatalf("member %d: manifest %+v: want rows that follow each other from 0, none naming the held upload %s", i+1, rows, stale[0])
			}
			end = r.End
		}
		if i == 0 {
			manifest = rows
		} else if !slices.Equal(rows, manifest) {
			t.Fatalf("member %d's manifest %+v, member 1's %+v", i+1, rows, manifest)
		}
		// Its own replica, across the tier boundary.
		sub, err := client.New(urls[i]).Subscribe(ctx, "h", client.From(client.Earliest()), client.Until(client.End()), client.FollowerReads())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for r, err := range sub.Records() {
			if err != nil {
				t.Fatalf("member %d: replay: %v", i+1, err)
			}
			if r.Offset != uint64(n) || n >= len(want) || string(r.Value) != want[n] {
				t.Fatalf("member %d: replay from the earliest: %q at %d after %d records", i+1, r.Value, r.Offset, n)
			}
			n++
		}
		if n != len(want) {
			t.Fatalf("member %d: replay from the earliest: %d records, want %d", i+1, n, len(want))
		}
	}

	// The held upload's object is an orphan: young, it stays; old enough,
	// the new leader deletes it. The old leader collects nothing.
	var named []string
	for _, r := range manifest {
		named = append(named, r.Name)
	}
	if got := objects(t, st); !slices.Equal(got, append(slices.Clone(named), stale...)) && !slices.Equal(got, append(slices.Clone(stale), named...)) {
		t.Fatalf("the store holds %v, want the manifest's %v and the orphan %s", got, named, stale[0])
	}
	if n, err := engine.BrokerOf(nodes[next-1].Node).CollectTierGarbage(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("the cleanup deleted %d young objects (%v)", n, err)
	}
	if n, err := engine.BrokerOf(nodes[old-1].Node).CollectTierGarbage(ctx, time.Now().Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("the old leader, a follower now, deleted %d objects (%v)", n, err)
	}
	if n, err := engine.BrokerOf(nodes[next-1].Node).CollectTierGarbage(ctx, time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("the new leader's cleanup deleted %d objects (%v), want the orphan", n, err)
	}
	if got := objects(t, st); !slices.Equal(got, named) {
		t.Fatalf("after the cleanup the store holds %v, the manifest names %v", got, named)
	}
}

// objects lists the names of the history objects in a tier store (not
// the cluster marker).
func objects(t *testing.T, st tier.Store) []string {
	t.Helper()
	objs, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if o.Name != tier.MarkerName { // the cluster's marker, not history
			out = append(out, o.Name)
		}
	}
	return out
}
