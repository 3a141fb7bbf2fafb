package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestTopicQuotaCluster: three members with auth. Creations by one
// principal racing through every member at once cannot pass its topic
// quota together (the metadata group applies them one at a time), and what
// it owns is the same on every member: a creation through any of them is
// then refused, and each member's ListQuotas reports the same usage.
func TestTopicQuotaCluster(t *testing.T) {
	dirs := map[uint64]string{}
	urls := enginetest.StartCluster(t, 3, func(id uint64, c *engine.Config) {
		c.Auth.Enabled, c.Auth.RecheckInterval, c.Security.ClusterSecret = true, 100*time.Millisecond, testSecret
		dirs[id] = c.Dir
	}).URLs()
	rootTok := clusterRoot(t, dirs, urls[0])
	ctx := context.Background()
	root := client.New(urls[0], client.WithToken(rootTok))
	tok, _, err := root.CreateUser(ctx, "racer", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.GrantACL(ctx, &client.ACLRule{Principal: "racer", Kind: "topic", Pattern: "*", Operations: []string{"create"}}); err != nil {
		t.Fatal(err)
	}
	const limit, perNode = 2, 4
	if err := root.SetQuota(ctx, "racer", &client.Quota{Topics: limit}); err != nil {
		t.Fatal(err)
	}
	// Every member has the token, the rule and the quota before the race.
	for _, u := range urls {
		eventually(t, "racer's quota on "+u, func() error {
			qs, err := client.New(u, client.WithToken(rootTok)).ListQuotas(ctx)
			if err != nil {
				return err
			}
			if qs.GetQuotas()["racer"].GetTopics() != limit {
				return fmt.Errorf("no quota for racer yet")
			}
			_, err = client.New(u, client.WithToken(tok)).ListTopics(ctx)
			return err
		})
	}

	start := make(chan struct{})
	type outcome struct {
		name string
		err  error
	}
	outs := make([]outcome, 0, perNode*len(urls))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, u := range urls {
		for j := range perNode {
			wg.Go(func() {
				c := client.New(u, client.WithToken(tok))
				name := fmt.Sprintf("race-%d-%d", i+1, j)
				<-start
				_, err := c.CreateTopic(ctx, name, client.WithPartitions(1), client.WithReplicationFactor(1))
				mu.Lock()
				outs = append(outs, outcome{name, err})
				mu.Unlock()
			})
		}
	}
	close(start)
	wg.Wait()
	// Node 1's catalog, once it applied every creation that succeeded (each
	// returned when durable on the member it went through).
	exists := map[string]bool{}
	eventually(t, "node 1 applying the creations", func() error {
		topics, err := root.ListTopics(ctx)
		if err != nil {
			return err
		}
		clear(exists)
		for _, tp := range topics {
			exists[tp.Name] = true
		}
		if len(exists) > limit {
			t.Fatalf("%d topics exist after %d creations racing through 3 members against a quota of %d topics: %v", len(exists), len(outs), limit, outs)
		}
		for _, o := range outs {
			if o.err == nil && !exists[o.name] {
				return fmt.Errorf("%s not applied on node 1 yet", o.name)
			}
		}
		if len(exists) < limit {
			return fmt.Errorf("%d topics", len(exists))
		}
		return nil
	})
	for _, o := range outs {
		switch code := connect.CodeOf(o.err); {
		case o.err == nil, code == connect.CodeAlreadyExists: // (a retry of a creation that went through)
			if !exists[o.name] {
				t.Fatalf("%s succeeded but does not exist", o.name)
			}
		case code == connect.CodeResourceExhausted:
			if exists[o.name] {
				t.Fatalf("%s was refused but exists", o.name)
			}
		default:
			t.Fatalf("%s: %v, want success or ResourceExhausted", o.name, o.err)
		}
	}
	// Every member counts the same: a creation through any is refused, and
	// its ListQuotas (once its catalog applied the creations) says 2 topics.
	for i, u := range urls {
		_, err := client.New(u, client.WithToken(tok)).CreateTopic(ctx, fmt.Sprintf("late-%d", i+1), client.WithPartitions(1), client.WithReplicationFactor(1))
		wantExhausted(t, "a creation through "+u+" after the race", err, "may have 2 topics", "has 2")
		eventually(t, "racer's usage on "+u, func() error {
			qs, err := client.New(u, client.WithToken(rootTok)).ListQuotas(ctx)
			if err != nil {
				return err
			}
			for _, us := range qs.GetUsage() {
				if us.GetPrincipal() == "racer" && us.GetTopics() == limit && us.GetPartitions() == limit {
					return nil
				}
			}
			return fmt.Errorf("usage %v", qs.GetUsage())
		})
	}
}
