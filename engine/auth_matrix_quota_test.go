package engine_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// TestAuthMatrixQuotas is the authorization matrix's quota column: for
// each call a quota can refuse, a principal with exactly the call's rights
// but no quota room is refused with ResourceExhausted and changes nothing,
// while one with quota room but without the right is refused with
// PermissionDenied (rights are checked first) and changes nothing either.
// A superuser is never bound by the default quota.
func TestAuthMatrixQuotas(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := newRPCs(a.url, a.root)
	rootc := a.client(a.root)
	if _, err := root.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "q", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	pub := func(c *rpcs) error {
		_, err := c.pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "q", Records: []*rewindv1.PublishRecord{{Value: make([]byte, 1024)}}})
		return err
	}
	create := func(name string) func(c *rpcs) error {
		return func(c *rpcs) error {
			_, err := c.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: name, Config: &rewindv1.TopicConfig{Partitions: 2}})
			return err
		}
	}
	var held context.CancelFunc
	defer func() {
		if held != nil {
			held()
		}
	}()
	tail := func(c *rpcs) error {
		return stream(ctx, c, &rewindv1.SubscribeRequest{Topic: "q", Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}})})
	}
	for _, tc := range []struct {
		name  string
		right string // the call's right, "allow OPS KIND:PATTERN"
		quota *rewindv1.Quota
		// use spends the quota room (with the exact principal); call is
		// then refused.
		use, call func(c *rpcs) error
	}{
		{"publish-bytes", "allow publish topic:q", &rewindv1.Quota{PublishBytesPerSec: 1}, pub, pub},
		{"topics", "allow create topic:*", &rewindv1.Quota{Topics: 1}, create("qt-1"), create("qt-2")},
		{"partitions", "allow create topic:*", &rewindv1.Quota{Partitions: 3}, create("qp-1"), create("qp-2")},
		{"streams", "allow read topic:q", &rewindv1.Quota{Streams: 1}, func(c *rpcs) error {
			sctx, cancel := context.WithCancel(ctx)
			held = cancel
			st, err := c.sub.Subscribe(sctx, &rewindv1.SubscribeRequest{Topic: "q", Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}})})
			if err != nil {
				return err
			}
			if !st.Receive() {
				return st.Err()
			}
			return nil // held open until the test ends
		}, tail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exact := a.user(t, "exact-"+tc.name, tc.right)
			if err := rootc.SetQuota(ctx, "exact-"+tc.name, tc.quota); err != nil {
				t.Fatal(err)
			}
			c := newRPCs(a.url, exact)
			if err := tc.use(c); err != nil {
				t.Fatalf("within the quota: %v", err)
			}
			// Without the right, the refusal is the right's, whatever the
			// quota says.
			lacking := a.user(t, "lacking-"+tc.name)
			if err := rootc.SetQuota(ctx, "lacking-"+tc.name, &rewindv1.Quota{PublishBytesPerSec: 1 << 30, Topics: 100, Partitions: 100, Streams: 100}); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, root)
			if err := tc.call(c); code(err) != connect.CodeResourceExhausted {
				t.Errorf("with the right but no quota room: %v, want ResourceExhausted", err)
			}
			if err := tc.call(newRPCs(a.url, lacking)); code(err) != connect.CodePermissionDenied {
				t.Errorf("with quota room but without the right: %v, want PermissionDenied", err)
			}
			if d := cmp.Diff(before, snapshot(t, root)); d != "" {
				t.Errorf("a refused call changed the state (-before +after):\n%s", d)
			}
		})
	}
	// The default quota binds principals without their own, never a
	// superuser.
	if err := rootc.SetQuota(ctx, "", &rewindv1.Quota{Topics: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := create("root-" + string(rune('a'+i)))(root); err != nil {
			t.Fatalf("the superuser's topic %d under a default quota of 1: %v", i+1, err)
		}
	}
}
