package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// eventually retries f until it returns nil or a minute passes.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// clusterRoot returns the bootstrap token of a cluster with auth: the one
// file that holds a token the cluster takes (a member whose bootstrap
// proposal lost deletes its file, but may hold it for a moment).
func clusterRoot(t *testing.T, dirs map[uint64]string, url string) string {
	t.Helper()
	var root string
	eventually(t, "bootstrap token", func() error {
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, engine.BootstrapTokenFile))
			if err != nil {
				continue
			}
			tok := strings.TrimSpace(string(b))
			if _, err := newRPCs(url, tok).topics.ListTopics(context.Background(), &rewindv1.ListTopicsRequest{}); err == nil {
				root = tok
				return nil
			}
		}
		return fmt.Errorf("no bootstrap token the cluster takes yet")
	})
	return root
}

// TestAuthCluster: three members with auth. Exactly one writes the
// bootstrap token; a token created through one member works on the others
// (tokens and rules replicate in the metadata group); a publish through a
// member that does not lead the partition is forwarded with the caller's
// credentials; a read-only principal is refused a replay on every member.
func TestAuthCluster(t *testing.T) {
	dirs := map[uint64]string{}
	urls := enginetest.StartCluster(t, 3, func(id uint64, c *engine.Config) {
		c.Auth.Enabled, c.Auth.RecheckInterval, c.Security.ClusterSecret = true, 100*time.Millisecond, testSecret
		dirs[id] = c.Dir
	}).URLs()
	root := clusterRoot(t, dirs, urls[0])
	ctx := context.Background()
	eventually(t, "root on node 1", func() error {
		_, err := newRPCs(urls[0], root).topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "orders", Config: &rewindv1.TopicConfig{Partitions: 3, ReplicationFactor: 3}})
		return err
	})
	// A writer and a reader, made through node 1.
	admin := newRPCs(urls[0], root)
	mk := func(name string, rules ...*rewindv1.AclRule) string {
		resp, err := admin.auth.CreateUser(ctx, &rewindv1.CreateUserRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			r.Principal = name
			if _, err := admin.auth.GrantAcl(ctx, &rewindv1.GrantAclRequest{Rule: r}); err != nil {
				t.Fatal(err)
			}
		}
		return resp.GetToken()
	}
	writer := mk("writer", &rewindv1.AclRule{Kind: "topic", Pattern: "orders", Operations: []string{"publish"}})
	reader := mk("reader", &rewindv1.AclRule{Kind: "topic", Pattern: "orders", Operations: []string{"read"}})

	// Every member takes the writer's token, and a publish to every
	// partition through every member is stored (most of them forwarded to
	// the partition's leader).
	for i, u := range urls {
		w := newRPCs(u, writer)
		for p := range uint32(3) {
			eventually(t, "publish through node "+string(rune('1'+i)), func() error {
				_, err := w.pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "orders", Records: []*rewindv1.PublishRecord{{Value: []byte("v"), Partition: &p}}})
				if code(err) == connect.CodePermissionDenied {
					t.Fatalf("node %d partition %d: %v", i+1, p, err)
				}
				return err
			})
		}
	}
	// (Each member describes its own replica: wait for node 1's to catch
	// up.)
	eventually(t, "every publish stored", func() error {
		d, err := admin.topics.DescribeTopic(ctx, &rewindv1.DescribeTopicRequest{Name: "orders"})
		if err != nil {
			return err
		}
		for _, p := range d.GetPartitions() {
			if p.GetEndOffset() != 3 {
				return fmt.Errorf("partition %d holds %d records, want 3 (one per member)", p.GetPartition(), p.GetEndOffset())
			}
		}
		return nil
	})
	// The reader: the tail on every member, never a replay; the writer may
	// not read.
	for _, u := range urls {
		r := newRPCs(u, reader)
		eventually(t, "reader's tail", func() error {
			return stream(ctx, r, &rewindv1.SubscribeRequest{Topic: "orders", Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}})})
		})
		if err := stream(ctx, r, &rewindv1.SubscribeRequest{Topic: "orders"}); code(err) != connect.CodePermissionDenied {
			t.Fatalf("reader's replay on %s: %v", u, err)
		}
		if _, err := r.groups.ResetGroup(ctx, &rewindv1.ResetGroupRequest{Group: "billing", Topic: "orders", Create: true,
			Target: &rewindv1.ResetTarget{Target: &rewindv1.ResetTarget_Earliest{Earliest: true}}}); code(err) != connect.CodePermissionDenied {
			t.Fatalf("reader's reset on %s: %v", u, err)
		}
		if err := stream(ctx, newRPCs(u, writer), &rewindv1.SubscribeRequest{Topic: "orders", Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}})}); code(err) != connect.CodePermissionDenied {
			t.Fatalf("writer's read on %s: %v", u, err)
		}
	}
	// Revoked through node 3: refused everywhere.
	if _, err := newRPCs(urls[2], root).auth.RevokeUser(ctx, &rewindv1.RevokeUserRequest{NameOrTokenId: "writer"}); err != nil {
		t.Fatal(err)
	}
	for _, u := range urls {
		eventually(t, "revocation on "+u, func() error {
			_, err := newRPCs(u, writer).pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "orders", Records: []*rewindv1.PublishRecord{{Value: []byte("late")}}})
			if code(err) == connect.CodeUnauthenticated {
				return nil
			}
			return connect.NewError(connect.CodeInternal, err)
		})
	}
}

// TestAuthJoin: a node joins a cluster with auth through a token with the
// cluster admin right; without one it is refused at once. (It joins as
// soon as the auth state exists, which may be before the first members are
// recorded: AddNode now waits for them; before, the new node became the
// metadata group's only wanted voter and the group lost its quorum.)
func TestAuthJoin(t *testing.T) {
	dirs := map[uint64]string{}
	urls := enginetest.StartCluster(t, 3, func(id uint64, c *engine.Config) {
		c.Auth.Enabled, c.Security.ClusterSecret = true, testSecret
		dirs[id] = c.Dir
	}).URLs()
	root := clusterRoot(t, dirs, urls[0])
	if _, err := newRPCs(urls[0], root).topics.CreateTopic(context.Background(), &rewindv1.CreateTopicRequest{Name: "spread", Config: &rewindv1.TopicConfig{Partitions: 4, ReplicationFactor: 3}}); err != nil {
		t.Fatal(err)
	}
	ln := enginetest.Listen(t)
	cfg := engine.Config{
		Dir: t.TempDir(), NodeID: 4, Logger: hclog.NewNullLogger(), Auth: engine.AuthConfig{Enabled: true},
		Security: engine.SecurityConfig{ClusterSecret: testSecret}, Cluster: engine.ClusterConfig{TickInterval: 20 * time.Millisecond},
		Join:    engine.JoinConfig{Through: []string{strings.TrimPrefix(urls[0], "http://")}, Advertise: ln.Addr().String()},
		Storage: engine.StorageConfig{StoreCacheBytes: 8 << 20, TailCacheBytes: 8 << 20},
	}
	if _, err := engine.Open(cfg); err == nil || !strings.Contains(err.Error(), "unauthenticated") {
		t.Fatalf("join without a token: %v, want unauthenticated", err)
	}
	cfg.Dir, cfg.Join.Token = t.TempDir(), root
	if _, err := enginetest.TryStartNode(t, cfg, enginetest.WithListener(ln)); err != nil {
		t.Fatalf("join with the root token: %v", err)
	}
	// Its probes (open, with auth on too) name it and the cluster it
	// joined, the one the first members name.
	_, want := probeNames(t, urls[0]+"/livez")
	if node, c := probeNames(t, "http://"+ln.Addr().String()+"/livez"); node != "4" || c != want || len(want) != 16 {
		t.Errorf("the joined member's /livez names node %q of cluster %q; node 1's names cluster %q", node, c, want)
	}
	// The new member knows the tokens: the root token works on it.
	eventually(t, "root on node 4", func() error {
		st, err := newRPCs("http://"+ln.Addr().String(), root).cluster.GetClusterStatus(context.Background(), &rewindv1.GetClusterStatusRequest{})
		if err == nil && len(st.GetNodes()) != 4 {
			return fmt.Errorf("%d nodes", len(st.GetNodes()))
		}
		return err
	})
	// A rebalance through the new member: sent on to the metadata leader,
	// which waits for the moves by asking every member's status, all with
	// the caller's token.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := newRPCs("http://"+ln.Addr().String(), root).cluster.Rebalance(ctx, &rewindv1.RebalanceRequest{})
	if err != nil {
		t.Fatalf("rebalance through node 4: %v", err)
	}
	if len(resp.GetMoves()) == 0 {
		t.Fatal("rebalance moved nothing onto the new member")
	}
}
