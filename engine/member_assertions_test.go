package engine_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/gen/rewind/peer/v1/peerv1connect"
	"github.com/rewind-io/rewind/internal/peerauth"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// Member assertions (docs/security.md, "Member assertions"): the headers
// with which one member speaks for a client to another are never taken
// from a client. These tests reproduce the pentest's attacks (issue 24,
// findings 1 and 3; issue 25's four steps) against real nodes.

// withHeaders returns ctx for a client call that sends the headers kv.
func withHeaders(ctx context.Context, kv ...string) context.Context {
	ctx, ci := connect.NewClientContext(ctx)
	for i := 0; i+1 < len(kv); i += 2 {
		ci.RequestHeader().Set(kv[i], kv[i+1])
	}
	return ctx
}

// endOffsets is the end offset of each partition of topic.
func endOffsets(t *testing.T, c *rpcs, topic string) []uint64 {
	t.Helper()
	d, err := c.topics.DescribeTopic(context.Background(), &rewindv1.DescribeTopicRequest{Name: topic})
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, p := range d.GetPartitions() {
		out = append(out, p.GetEndOffset())
	}
	return out
}

// testHopHeadersFromAClient runs issue 25's four steps against url: a
// record with an idempotency key is stored; the same key with another
// value is refused; the same with a hop header is refused too (it used to
// be stored, skipping the topic-wide check), and so is the exact retry
// with the header (it used to be stored again). Nothing but the first
// record is stored.
func testHopHeadersFromAClient(t *testing.T, c *rpcs) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "keys", Config: &rewindv1.TopicConfig{Partitions: 4}}); err != nil {
		t.Fatal(err)
	}
	rec := func(value string, p uint32) *rewindv1.PublishRequest {
		return &rewindv1.PublishRequest{Topic: "keys", Records: []*rewindv1.PublishRecord{{Value: []byte(value), IdempotencyKey: "X", Partition: &p}}}
	}
	// (A new topic's partitions take a moment to elect leaders in a
	// cluster: the first publish waits for them.)
	var first *rewindv1.PublishResponse
	eventually(t, "first publish", func() error {
		var err error
		first, err = c.pub.Publish(ctx, rec("a", 3))
		return err
	})
	if r := first.GetResults()[0]; r.GetPartition() != 3 || r.GetOffset() != 0 {
		t.Fatalf("first publish stored at %d/%d, want 3/0", r.GetPartition(), r.GetOffset())
	}
	if _, err := c.pub.Publish(ctx, rec("b", 0)); err == nil {
		t.Fatal("the same idempotency key with another value was stored")
	}
	for _, h := range []string{"Rewind-Forwarded-By", "Rewind-Relayed-By"} {
		for _, value := range []string{"b", "a"} {
			for _, node := range []string{"1", "2"} {
				_, err := c.pub.Publish(withHeaders(ctx, h, node), rec(value, 0))
				if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), h) {
					t.Errorf("publish of %q with %s: %s: %v, want PermissionDenied naming the header", value, h, node, err)
				}
			}
		}
	}
	// (In a cluster the member asked describes its own replicas: wait for
	// them. A forged record stored would keep them apart for good.)
	eventually(t, "only the first record stored", func() error {
		if got := endOffsets(t, c, "keys"); !slices.Equal(got, []uint64{0, 0, 0, 1}) {
			return fmt.Errorf("end offsets %v after the forged hops, want only the first record (0 0 0 1)", got)
		}
		return nil
	})
}

// TestClientHopHeadersRefused: on a single node, with and without auth,
// and on the public port of a cluster (without and with member
// authentication), a client's Rewind-Forwarded-By or Rewind-Relayed-By
// header is refused and stores nothing.
func TestClientHopHeadersRefused(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		url := enginetest.StartNode(t, engine.Config{}).URL
		testHopHeadersFromAClient(t, newRPCs(url, ""))
	})
	t.Run("alone with auth", func(t *testing.T) {
		n := startAuthNode(t, nil)
		testHopHeadersFromAClient(t, newRPCs(n.url, n.root))
	})
	t.Run("cluster", func(t *testing.T) {
		urls := enginetest.StartCluster(t, 3, nil).URLs()
		testHopHeadersFromAClient(t, newRPCs(urls[0], ""))
	})
	t.Run("cluster with a secret", func(t *testing.T) {
		urls := enginetest.StartCluster(t, 3, func(_ uint64, c *engine.Config) { c.Security.ClusterSecret = testSecret }).URLs()
		testHopHeadersFromAClient(t, newRPCs(urls[1], ""))
	})
}

// oldForwardSig is the principal assertion as members signed it before
// issue 24: an HMAC under a key derived from the resume-token key, which
// sat in the write-ahead log in plain text.
func oldForwardSig(key []byte, principal string, expiry int64) string {
	k := hmac.New(sha256.New, key)
	k.Write([]byte("rewind forward key v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(principal))
	m.Write([]byte{0})
	m.Write([]byte(strconv.FormatInt(expiry, 10)))
	return strconv.FormatInt(expiry, 10) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// resumeKeyFromDisk finds the resume-token key in the data directory's
// files, as the pentest's local user did with grep.
func resumeKeyFromDisk(t *testing.T, dir string) []byte {
	t.Helper()
	var key []byte
	marker := []byte(`"resume_key":"`)
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || key != nil {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		if i := bytes.Index(b, marker); i >= 0 {
			rest := b[i+len(marker)-1:]
			var s string
			if end := bytes.IndexByte(rest[1:], '"'); end >= 0 && json.Unmarshal(rest[:end+2], &s) == nil {
				key, _ = base64.StdEncoding.DecodeString(s)
			}
		}
		return nil
	})
	if len(key) < 16 {
		t.Fatal("the resume-token key is not in the data directory's files: the attack cannot be reproduced")
	}
	return key
}

// TestPrincipalAssertionFromAClientRefused: the pentest's root escalation.
// With the resume-token key read off the disk, a client signed a
// Rewind-Principal assertion for root and listed every user and made a
// token, with no credentials of its own. Now the assertion is refused on
// the public port whatever its signature, and nothing is created.
func TestPrincipalAssertionFromAClientRefused(t *testing.T) {
	dir := t.TempDir()
	n := startAuthNode(t, func(c *engine.Config) { c.Dir = dir })
	key := resumeKeyFromDisk(t, dir)
	ctx := context.Background()
	anon := newRPCs(n.url, "")
	forged := withHeaders(ctx, "Rewind-Principal", "root", "Rewind-Principal-Sig", oldForwardSig(key, "root", time.Now().Add(time.Minute).Unix()))
	if _, err := anon.auth.ListUsers(forged, &rewindv1.ListUsersRequest{}); connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "Rewind-Principal") {
		t.Fatalf("list users as an asserted root: %v, want PermissionDenied naming the header", err)
	}
	if _, err := anon.auth.CreateUser(forged, &rewindv1.CreateUserRequest{Name: "intruder"}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("create a user as an asserted root: %v, want PermissionDenied", err)
	}
	users, err := newRPCs(n.url, n.root).auth.ListUsers(ctx, &rewindv1.ListUsersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users.GetUsers() {
		if u.GetPrincipal() == "intruder" {
			t.Fatal("the forged assertion created a user")
		}
	}
	// A real token with the assertion beside it is refused too: the
	// header never rides along.
	if _, err := newRPCs(n.url, n.root).topics.ListTopics(withHeaders(ctx, "Rewind-Principal", "root"), &rewindv1.ListTopicsRequest{}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("a token with a principal assertion: %v, want PermissionDenied", err)
	}
}

// TestAuthClusterNeedsPeerAuthentication: --auth in a cluster whose
// members do not authenticate each other is refused at start (the
// pentest read every record through an unauthenticated peer Fetch).
func TestAuthClusterNeedsPeerAuthentication(t *testing.T) {
	members := map[uint64]string{1: "127.0.0.1:1", 2: "127.0.0.1:2", 3: "127.0.0.1:3"}
	dir := t.TempDir()
	_, err := engine.Open(engine.Config{Dir: dir, NodeID: 1, Cluster: engine.ClusterConfig{InitialMembers: members, ID: engine.ClusterIDOf(members)}, Auth: engine.AuthConfig{Enabled: true}})
	if err == nil || !strings.Contains(err.Error(), "--cluster-secret-file") {
		t.Fatalf("auth in a cluster without peer authentication: %v, want a refusal naming --cluster-secret-file", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused start left %d files in its data directory", len(entries))
	}
}

// TestUnknownMemberRefused: a process holding the cluster secret but not
// a member (node 9, never added) is refused on every member path: the
// peer reads, the raft transport and the member path of the public
// services. (The pentest's node-9 read partitions.)
func TestUnknownMemberRefused(t *testing.T) {
	s := startSecured(t, false)
	s.settle(t)
	ctx := context.Background()
	hc := s.peerHTTP("", nil, t)
	signedAs := func(from uint64) context.Context {
		return withHeaders(ctx, peerauth.Header, authenticator(testSecret, s.cluster, from, 1))
	}
	pub := rewindv1connect.NewPublishServiceClient(hc, s.base(1)+"/rewind.member")
	_, err := pub.Publish(signedAs(9), &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: []byte("from node 9")}}})
	if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "not a member") {
		t.Errorf("publish on the member path as node 9: %v, want PermissionDenied (not a member)", err)
	}
	fetch := func(from uint64) error {
		pc := peerv1connect.NewPartitionServiceClient(hc, s.base(1))
		_, err := pc.Fetch(signedAs(from), &peerv1.FetchRequest{Partition: &peerv1.PartitionRef{ClusterId: s.cluster, TopicId: 1}, MaxBytes: 1 << 20})
		return err
	}
	if err := fetch(9); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("peer read as node 9: %v, want PermissionDenied", err)
	}
	if err := fetch(2); connect.CodeOf(err) == connect.CodePermissionDenied || connect.CodeOf(err) == connect.CodeUnauthenticated {
		t.Errorf("control: peer read as node 2: %v, want it let in", err)
	}
	if err := sendRaft(ctx, hc, s.base(1), s.cluster, 9, authenticator(testSecret, s.cluster, 9, 1), 1, 1<<40); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("raft frame from node 9: %v, want PermissionDenied", err)
	}
	// Control: node 2's authenticator on the member path is let in (the
	// publish is served; the topic does not matter).
	_, err = pub.Publish(signedAs(2), &rewindv1.PublishRequest{Topic: "no-such-topic", Records: []*rewindv1.PublishRecord{{Value: []byte("v")}}})
	if connect.CodeOf(err) == connect.CodePermissionDenied || connect.CodeOf(err) == connect.CodeUnauthenticated {
		t.Errorf("node 2 on the member path: %v, want it let in", err)
	}
}

// TestRemovedMemberRefused: a member removed from the cluster loses its
// access to the others at once, though it still holds the cluster secret
// and was in the initial cluster.
func TestRemovedMemberRefused(t *testing.T) {
	var cluster uint64
	cl := enginetest.StartCluster(t, 4, func(_ uint64, c *engine.Config) {
		c.Security.ClusterSecret, cluster = testSecret, c.Cluster.ID
	})
	urls := cl.URLs()
	cl.Stop(4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := newRPCs(urls[0], "")
	eventually(t, "remove node 4", func() error {
		_, err := admin.cluster.RemoveNode(ctx, &rewindv1.RemoveNodeRequest{Node: 4})
		return err
	})
	eventually(t, "node 1 applies the removal", func() error {
		st, err := admin.cluster.GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
		if err == nil && len(st.GetNodes()) != 3 {
			return fmt.Errorf("%d members", len(st.GetNodes()))
		}
		return err
	})
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: p}}
	for _, from := range []uint64{4, 2} {
		pc := peerv1connect.NewPartitionServiceClient(hc, urls[0])
		_, err := pc.Fetch(withHeaders(ctx, peerauth.Header, authenticator(testSecret, cluster, from, 1)),
			&peerv1.FetchRequest{Partition: &peerv1.PartitionRef{ClusterId: cluster, TopicId: 1}, MaxBytes: 1 << 20})
		refused := connect.CodeOf(err) == connect.CodePermissionDenied && strings.Contains(err.Error(), "not a member")
		if refused != (from == 4) {
			t.Errorf("peer read as node %d after node 4's removal: %v (only node 4 is to be refused as no member)", from, err)
		}
	}
}

// TestMetadataLeaderRemovesItself: the member that leads the metadata
// group removes itself, with and without member authentication. Its last
// configuration change must still reach the others after they applied
// its removal: when the removal shut a removed member's raft frames out
// at once, this call never returned (TestClusterGrowAndShrink hung when
// node 1 happened to lead). The other members then see two members, and
// the removed one is refused on their member services.
func TestMetadataLeaderRemovesItself(t *testing.T) {
	for name, secret := range map[string][]byte{"plain": nil, "secret": testSecret} {
		t.Run(name, func(t *testing.T) {
			cl := enginetest.StartCluster(t, 3, func(_ uint64, c *engine.Config) { c.Security.ClusterSecret = secret })
			urls := cl.URLs()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang detector, not a budget
			defer cancel()
			var leader uint64
			eventually(t, "a metadata leader", func() error {
				st, err := newRPCs(urls[0], "").cluster.GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
				if err == nil && (st.GetMetadataLeader() == 0 || len(st.GetNodes()) != 3) {
					err = fmt.Errorf("metadata leader %d, %d members: not settled yet", st.GetMetadataLeader(), len(st.GetNodes()))
				}
				leader = st.GetMetadataLeader()
				return err
			})
			// Sent to the leader itself, which removes itself. (A new
			// cluster records its first members a moment after it elects
			// a metadata leader: until then the node is "not a member".)
			eventually(t, "the leader removing itself", func() error {
				_, err := newRPCs(urls[leader-1], "").cluster.RemoveNode(ctx, &rewindv1.RemoveNodeRequest{Node: leader})
				if err != nil && connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("node %d removing itself: %v", leader, err)
				}
				return err
			})
			other := urls[leader%3] // any member but the leader
			eventually(t, "two members left", func() error {
				st, err := newRPCs(other, "").cluster.GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
				if err == nil && len(st.GetNodes()) != 2 {
					err = fmt.Errorf("%d members", len(st.GetNodes()))
				}
				return err
			})
		})
	}
}
