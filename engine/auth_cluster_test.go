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

	"github.com/rewind-io/rewind/engine"
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

// TestAuthCluster: three members with auth. Exactly one writes the
// bootstrap token; a token created through one member works on the others
// (tokens and rules replicate in the metadata group); a publish through a
// member that does not lead the partition is forwarded with the caller's
// credentials; a read-only principal is refused a replay on every member.
func TestAuthCluster(t *testing.T) {
	dirs := map[uint64]string{}
	urls, _ := startCluster(t, 3, func(id uint64, c *engine.Config) {
		c.Auth, c.AuthRecheckInterval = true, 100*time.Millisecond
		dirs[id] = c.Dir
	})
	var root string
	eventually(t, "bootstrap token", func() error {
		var found []string
		for _, d := range dirs {
			if b, err := os.ReadFile(filepath.Join(d, engine.BootstrapTokenFile)); err == nil {
				found = append(found, strings.TrimSpace(string(b)))
			}
		}
		if len(found) != 1 {
			return fmt.Errorf("%d bootstrap token files", len(found))
		}
		root = found[0]
		return nil
	})
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
	d, err := admin.topics.DescribeTopic(ctx, &rewindv1.DescribeTopicRequest{Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.GetPartitions() {
		if p.GetEndOffset() != 3 {
			t.Fatalf("partition %d holds %d records, want 3 (one per member)", p.GetPartition(), p.GetEndOffset())
		}
	}
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
