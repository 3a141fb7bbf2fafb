package engine_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/internal/wasmgen"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Issue 24, finding 2: every way to move a group's cursor back into a
// topic's history, tried by principals that lack replay and reset (the
// rules: docs/security.md, "Every way to move a cursor backwards"). Each
// refused attempt leaves the group's commits as they were.

var latestStart = &rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}}

// publishN publishes n records to partition p of topic.
func publishN(t *testing.T, c *rpcs, topic string, p uint32, n int) {
	t.Helper()
	recs := make([]*rewindv1.PublishRecord, n)
	for i := range recs {
		recs[i] = &rewindv1.PublishRecord{Value: []byte(fmt.Sprintf("r%d", i)), Partition: &p}
	}
	if _, err := c.pub.Publish(context.Background(), &rewindv1.PublishRequest{Topic: topic, Records: recs}); err != nil {
		t.Fatal(err)
	}
}

// commits renders group's committed offsets on topic ("p0=5 p1=-" for a
// partition without a commit; "none" when the group does not exist).
func commits(t *testing.T, root *rpcs, group, topic string) string {
	t.Helper()
	d, err := root.groups.DescribeGroup(context.Background(), &rewindv1.DescribeGroupRequest{Group: group})
	if code(err) == connect.CodeNotFound {
		return "none"
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, gt := range d.GetTopics() {
		if gt.GetTopic() != topic {
			continue
		}
		var out []string
		for _, p := range gt.GetPartitions() {
			if p.GetCommitted() {
				out = append(out, fmt.Sprintf("p%d=%d", p.GetPartition(), p.GetCommittedOffset()))
			} else {
				out = append(out, fmt.Sprintf("p%d=-", p.GetPartition()))
			}
		}
		return strings.Join(out, " ")
	}
	return "none"
}

// member is a group member's raw stream.
type member struct {
	st  *connect.ServerStreamForClient[rewindv1.SubscribeResponse]
	gen uint64
	// next is, per partition, the offset after the last record received.
	next map[uint32]uint64
}

// join opens a group member's stream from latest and waits for its first
// assignment with partitions.
func join(t *testing.T, ctx context.Context, c *rpcs, group, topic string) *member {
	t.Helper()
	st, err := c.sub.Subscribe(ctx, &rewindv1.SubscribeRequest{Topic: topic, Group: group, Start: latestStart})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := &member{st: st, next: map[uint32]uint64{}}
	for m.gen == 0 && st.Receive() {
		if as := st.Msg().GetAssignment(); as != nil && len(as.GetPartitions()) > 0 {
			m.gen = as.GetGeneration()
		}
	}
	if m.gen == 0 {
		t.Fatalf("no assignment: %v", st.Err())
	}
	return m
}

// read receives until n records arrived.
func (m *member) read(t *testing.T, n int) {
	t.Helper()
	for got := 0; got < n; {
		if !m.st.Receive() {
			t.Fatalf("stream ended after %d of %d records: %v", got, n, m.st.Err())
		}
		for _, r := range m.st.Msg().GetRecords().GetRecords() {
			m.next[r.GetPartition()] = r.GetOffset() + 1
			got++
		}
	}
}

func commitReq(group, topic string, gen uint64, offs map[uint32]uint64) *rewindv1.CommitRequest {
	r := &rewindv1.CommitRequest{Group: group, Topic: topic, Generation: gen}
	for p, o := range offs {
		r.Offsets = append(r.Offsets, &rewindv1.PartitionOffset{Partition: p, Offset: o})
	}
	return r
}

// TestAuthReadOnlyGroupCannotReplay reproduces finding 2 with the docs'
// read-only group recipe (read,describe on the topic, join,commit on the
// group): before, a commit of offset 0 in each partition, where the group
// had no commit yet, was accepted, and a member then resumed from it and
// printed the whole history. Now that first commit needs replay (or
// reset), while the recipe itself still works: a member that starts at
// latest commits what it printed although newer records arrived meanwhile
// (its commit is below the end), and every commit is audited.
func TestAuthReadOnlyGroupCannotReplay(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := newRPCs(a.url, a.root)
	if _, err := root.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "orders", Config: &rewindv1.TopicConfig{Partitions: 2}}); err != nil {
		t.Fatal(err)
	}
	publishN(t, root, "orders", 0, 3)
	publishN(t, root, "orders", 1, 3)
	reader := newRPCs(a.url, a.user(t, "billing", "allow read,describe topic:orders", "allow join,commit group:billing"))

	// The attack: a first commit at 0, then a member resumes from it.
	_, err := reader.groups.Commit(ctx, commitReq("billing", "orders", 0, map[uint32]uint64{0: 0, 1: 0}))
	if code(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "replay on topic:orders or reset on group:billing") {
		t.Fatalf("first commit at 0: %v, want PermissionDenied naming replay on topic:orders or reset on group:billing", err)
	}
	if got := commits(t, root, "billing", "orders"); got != "none" {
		t.Fatalf("the refused commit left commits: %s", got)
	}
	if err := stream(ctx, reader, &rewindv1.SubscribeRequest{Topic: "orders", Group: "billing"}); code(err) != connect.CodePermissionDenied {
		t.Fatalf("a member from earliest: %v, want PermissionDenied", err)
	}
	if !strings.Contains(a.audit.String(), `"principal":"billing","operation":"replay","resource":"topic:orders","outcome":"denied","request_id"`) {
		t.Fatalf("audit log lacks the first commit's denial:\n%s", a.audit.String())
	}

	// The recipe: from latest, read what arrives, commit it.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m := join(t, sctx, reader, "billing", "orders")
	if got := commits(t, root, "billing", "orders"); got != "p0=3 p1=3" {
		t.Fatalf("the member's start was not recorded as the group's commits: %s, want p0=3 p1=3", got)
	}
	publishN(t, root, "orders", 0, 2)
	publishN(t, root, "orders", 1, 1)
	m.read(t, 3)
	publishN(t, root, "orders", 0, 4) // the end moves past what it printed
	if _, err := reader.groups.Commit(ctx, commitReq("billing", "orders", m.gen, m.next)); err != nil {
		t.Fatalf("commit what it printed: %v", err)
	}
	if got := commits(t, root, "billing", "orders"); got != "p0=5 p1=4" {
		t.Fatalf("commits %s, want p0=5 p1=4", got)
	}
	if !strings.Contains(a.audit.String(), `"principal":"billing","operation":"Commit","resource":"group:billing","outcome":"ok"`) ||
		!strings.Contains(a.audit.String(), `"detail":"topic \"orders\" generation `+fmt.Sprint(m.gen)+` offsets 0=5 1=4"`) {
		t.Fatalf("audit log lacks the commit:\n%s", a.audit.String())
	}
	// Back below where it started: reset.
	_, err = reader.groups.Commit(ctx, commitReq("billing", "orders", m.gen, map[uint32]uint64{0: 0}))
	if code(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "reset on group:billing") {
		t.Fatalf("commit back: %v, want PermissionDenied naming reset on group:billing", err)
	}
	if got := commits(t, root, "billing", "orders"); got != "p0=5 p1=4" {
		t.Fatalf("the refused commit changed the commits: %s, want p0=5 p1=4", got)
	}
}

// TestAuthDeleteGroupIsNoWayBack: deleting a group (with delete on it)
// forgets its commits, so the next commit is a first commit again: below
// the end it needs replay, directly or after rejoining.
func TestAuthDeleteGroupIsNoWayBack(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := newRPCs(a.url, a.root)
	if _, err := root.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	publishN(t, root, "t", 0, 5)
	c := newRPCs(a.url, a.user(t, "m", "allow read topic:t", "allow join,commit,delete group:g"))
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	m := join(t, sctx, c, "g", "t")
	cancel()
	_ = m.st.Close()
	if got := commits(t, root, "g", "t"); got != "p0=5" {
		t.Fatalf("commits %s, want p0=5", got)
	}
	eventually(t, "delete the group once its member left", func() error {
		_, err := c.groups.DeleteGroup(ctx, &rewindv1.DeleteGroupRequest{Group: "g"})
		return err
	})
	if _, err := c.groups.Commit(ctx, commitReq("g", "t", 0, map[uint32]uint64{0: 0})); code(err) != connect.CodePermissionDenied {
		t.Fatalf("commit 0 after deleting the group: %v, want PermissionDenied", err)
	}
	if got := commits(t, root, "g", "t"); got != "none" {
		t.Fatalf("after the refused commit: %s, want none", got)
	}
	sctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m = join(t, sctx, c, "g", "t")
	if _, err := c.groups.Commit(ctx, commitReq("g", "t", m.gen, map[uint32]uint64{0: 0})); code(err) != connect.CodePermissionDenied {
		t.Fatalf("commit 0 after rejoining: %v, want PermissionDenied", err)
	}
	if got := commits(t, root, "g", "t"); got != "p0=5" {
		t.Fatalf("after the refused commit: %s, want p0=5", got)
	}
}

// TestAuthRecreatedTopicIsNoWayBack: a topic deleted and created again is
// a new topic: its group rows are gone, and a first commit in it below the
// end needs replay like any other.
func TestAuthRecreatedTopicIsNoWayBack(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := newRPCs(a.url, a.root)
	c := newRPCs(a.url, a.user(t, "owner", "allow create,delete,publish,read topic:t", "allow join,commit group:g"))
	create := func() {
		t.Helper()
		if _, err := c.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	create()
	publishN(t, c, "t", 0, 3)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	m := join(t, sctx, c, "g", "t")
	cancel()
	_ = m.st.Close()
	if _, err := c.topics.DeleteTopic(ctx, &rewindv1.DeleteTopicRequest{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	create()
	publishN(t, c, "t", 0, 3)
	if _, err := c.groups.Commit(ctx, commitReq("g", "t", 0, map[uint32]uint64{0: 0})); code(err) != connect.CodePermissionDenied {
		t.Fatalf("commit 0 in the new topic: %v, want PermissionDenied", err)
	}
	if got := commits(t, root, "g", "t"); got != "none" {
		t.Fatalf("after the refused commit: %s, want none", got)
	}
	if err := stream(ctx, c, &rewindv1.SubscribeRequest{Topic: "t", Group: "g"}); code(err) != connect.CodePermissionDenied {
		t.Fatalf("a member from earliest in the new topic: %v, want PermissionDenied", err)
	}
}

// TestAuthPluginByDigest reproduces finding 7b: a deny rule on a plugin
// was bypassed by naming it by digest (GetPlugin returned the module, a
// filter ran it), because "sha256:..." was checked as a plugin of that
// name. Now a digest is every plugin with that module, and a deny on any
// of them wins; an unknown digest looks the same as a forbidden one to a
// caller without the right on every plugin.
func TestAuthPluginByDigest(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := newRPCs(a.url, a.root)
	module := func(tag string) []byte {
		return wasmgen.ABIModule(2, wasmgen.Body(wasmgen.I32Const(0), wasmgen.OpEnd), func(m *wasmgen.Module) { m.Custom("tag", []byte(tag)) })
	}
	secret, shared := module("secret"), module("shared")
	for name, mod := range map[string][]byte{"secret": secret, "public": shared, "public-copy": shared, "internal": shared} {
		if _, err := root.plugins.UploadPlugin(ctx, &rewindv1.UploadPluginRequest{Name: name, Module: mod}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := root.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "orders", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	publishN(t, root, "orders", 0, 1)
	alice := newRPCs(a.url, a.user(t, "alice", "allow describe,use plugin:*", "deny describe,use plugin:secret", "deny describe,use plugin:internal", "allow replay topic:orders"))
	digest := func(m []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(m)) }

	refs := []string{digest(secret), "sha256:" + strings.ToUpper(strings.TrimPrefix(digest(secret), "sha256:")), "public@" + digest(secret), digest(shared), "public@" + digest(shared)}
	for _, ref := range refs {
		_, err := alice.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: ref, IncludeModule: true})
		if code(err) != connect.CodePermissionDenied {
			t.Errorf("GetPlugin %s: %v, want PermissionDenied", ref, err)
		} else if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "internal") {
			t.Errorf("GetPlugin %s: the denial names a plugin: %v", ref, err)
		}
		filter := &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Plugin{Plugin: ref}}
		if err := stream(ctx, alice, &rewindv1.SubscribeRequest{Topic: "orders", Filter: filter}); code(err) != connect.CodePermissionDenied {
			t.Errorf("a replay filtered by %s: %v, want PermissionDenied", ref, err)
		}
		_, err = alice.plugins.TestPlugin(ctx, &rewindv1.TestPluginRequest{Filter: filter,
			Input: &rewindv1.TestPluginRequest_Records{Records: &rewindv1.TestRecords{Records: []*rewindv1.Record{{Value: []byte("x")}}}}})
		if code(err) != connect.CodePermissionDenied {
			t.Errorf("TestPlugin %s: %v, want PermissionDenied", ref, err)
		}
	}
	// By name, the plugins alice may use work as before.
	if _, err := alice.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: "public"}); err != nil {
		t.Fatalf("GetPlugin public: %v", err)
	}

	// An unknown digest: denied to alice (she may not describe every
	// plugin) exactly as a forbidden one is; NotFound to one who may.
	unknown := "sha256:" + strings.Repeat("ab", 32)
	_, errUnknown := alice.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: unknown})
	_, errSecret := alice.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: digest(secret)})
	if code(errUnknown) != connect.CodePermissionDenied || strings.ReplaceAll(errUnknown.Error(), unknown, "X") != strings.ReplaceAll(errSecret.Error(), digest(secret), "X") {
		t.Fatalf("unknown digest: %v; forbidden digest: %v; want the same denial", errUnknown, errSecret)
	}
	bob := newRPCs(a.url, a.user(t, "bob", "allow describe plugin:*"))
	if _, err := bob.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: unknown}); code(err) != connect.CodeNotFound {
		t.Fatalf("unknown digest for a principal who may describe every plugin: %v, want NotFound", err)
	}
	if resp, err := bob.plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: digest(secret)}); err != nil || resp.GetPlugin().GetName() != "secret" {
		t.Fatalf("bob's GetPlugin by digest: %v %v", resp, err)
	}
}
