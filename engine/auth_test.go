package engine_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginehook"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// authNode is a node with --auth on loopback, and its audit log.
type authNode struct {
	node  *enginetest.Node
	url   string
	root  string // the bootstrap token
	audit *enginetest.Buffer
}

func startAuthNode(t testing.TB, mutate func(*engine.Config)) *authNode {
	t.Helper()
	audit := &enginetest.Buffer{}
	cfg := engine.Config{Dir: t.TempDir(), Auth: engine.AuthConfig{Enabled: true, AuditLog: audit, RecheckInterval: 100 * time.Millisecond}}
	if mutate != nil {
		mutate(&cfg)
	}
	n := enginetest.StartNode(t, cfg)
	return &authNode{node: n, url: n.URL, root: n.BootstrapToken(t), audit: audit}
}

func (a *authNode) client(token string) *client.Client {
	if token == "" {
		return client.New(a.url)
	}
	return client.New(a.url, client.WithToken(token))
}

// user creates a principal with the given rules ("allow OPS KIND:PATTERN")
// and returns its token.
func (a *authNode) user(t testing.TB, name string, rules ...string) string {
	t.Helper()
	ctx := context.Background()
	root := a.client(a.root)
	tok, _, err := root.CreateUser(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		f := strings.Fields(r)
		kind, pat, _ := strings.Cut(f[2], ":")
		if _, err := root.GrantACL(ctx, &client.ACLRule{Principal: name, Kind: kind, Pattern: pat, Operations: strings.Split(f[1], ","), Deny: f[0] == "deny"}); err != nil {
			t.Fatal(err)
		}
	}
	return tok
}

func code(err error) connect.Code {
	if err == nil {
		return 0
	}
	return connect.CodeOf(err)
}

// readOne opens a stream and returns its first records event's error or
// the stream's error.
func firstEvent(ctx context.Context, c *client.Client, topic string, opts ...client.SubscribeOption) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx, topic, opts...)
	if err != nil {
		return err
	}
	defer sub.Close()
	if !sub.Next() {
		return sub.Err()
	}
	return nil
}

// TestAuthReadIsNotReplay is the "done" scenario on one node: a
// principal with read on orders follows the live tail, is refused a replay
// from earliest, and cannot reset a group; the denial names the operation
// and the resource and goes to the audit log.
func TestAuthReadIsNotReplay(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := a.client(a.root)
	if _, err := root.CreateTopic(ctx, "orders", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Publish(ctx, "orders", client.Message{Value: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	readerTok := a.user(t, "reader", "allow read,describe topic:orders", "allow join group:billing")
	reader := a.client(readerTok)

	// The live tail: allowed, and a record published after the start
	// arrives.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sub, err := reader.Subscribe(sctx, "orders", client.From(client.Latest()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := root.Publish(ctx, "orders", client.Message{Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	got := ""
	for got == "" && sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok && len(r.Records) > 0 {
			got = string(r.Records[0].Value)
		}
	}
	if got != "new" {
		t.Fatalf("live tail: got %q (%v)", got, sub.Err())
	}

	// The stream's resume token continues it (read), for the reader
	// alone: another read-only principal holding it is starting in the
	// past, which is a replay.
	rr, other := newRPCs(a.url, readerTok), newRPCs(a.url, a.user(t, "other", "allow read topic:orders"))
	signed, _, err := resumeTokens(ctx, rr, "orders")
	if err != nil {
		t.Fatal(err)
	}
	resumeReq := &rewindv1.SubscribeRequest{Topic: "orders", Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_ResumeToken{ResumeToken: signed}})}
	if err := stream(ctx, rr, resumeReq); err != nil {
		t.Fatalf("reader resumes with its token: %v", err)
	}
	if err := stream(ctx, other, resumeReq); code(err) != connect.CodePermissionDenied {
		t.Fatalf("another principal resumes with the reader's token: %v, want PermissionDenied", err)
	}

	err = firstEvent(ctx, reader, "orders", client.From(client.Earliest()))
	if code(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "replay on topic:orders") {
		t.Fatalf("replay from earliest: %v, want PermissionDenied naming replay on topic:orders", err)
	}
	if strings.Contains(err.Error(), "rule") {
		t.Fatalf("the denial describes the rules: %v", err)
	}
	_, err = reader.ResetGroup(ctx, "billing", "orders", client.Earliest(), nil, false)
	if code(err) != connect.CodePermissionDenied {
		t.Fatalf("reset: %v, want PermissionDenied", err)
	}
	if !strings.Contains(a.audit.String(), `"principal":"reader","operation":"replay","resource":"topic:orders","outcome":"denied"`) {
		t.Fatalf("audit log lacks the replay denial:\n%s", a.audit.String())
	}
	if !strings.Contains(a.audit.String(), `"principal":"root","operation":"CreateTopic","resource":"topic:orders","outcome":"ok"`) {
		t.Fatalf("audit log lacks the topic's creation:\n%s", a.audit.String())
	}
	if strings.Contains(a.audit.String(), a.root) || strings.Contains(a.audit.String(), readerTok) {
		t.Fatal("a token is in the audit log")
	}
}

// TestAuthBadTokens: missing, garbage, expired and revoked tokens get
// Unauthenticated; revoking a token ends the streams opened with it.
func TestAuthBadTokens(t *testing.T) {
	var now struct {
		sync.Mutex
		t time.Time
	}
	now.t = time.Now()
	clock := func() time.Time { now.Lock(); defer now.Unlock(); return now.t }
	a := startAuthNode(t, func(c *engine.Config) { enginehook.Of(c).Clock = clock })
	ctx := context.Background()
	root := a.client(a.root)
	if _, err := root.CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"anonymous": "", "garbage": "not-a-token", "forged": "rwd_0123456789ab_" + strings.Repeat("A", 43)} {
		if _, err := a.client(tok).ListTopics(ctx); code(err) != connect.CodeUnauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
		if err := firstEvent(ctx, a.client(tok), "t", client.From(client.Latest())); code(err) != connect.CodeUnauthenticated {
			t.Errorf("%s stream: %v, want Unauthenticated", name, err)
		}
	}
	short, _, err := root.CreateUser(ctx, "short", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.client(short).ListTopics(ctx); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	now.Lock()
	now.t = now.t.Add(2 * time.Hour)
	now.Unlock()
	if _, err := a.client(short).ListTopics(ctx); code(err) != connect.CodeUnauthenticated {
		t.Fatalf("expired token: %v, want Unauthenticated", err)
	}

	// Revoked mid-stream: the stream ends with Unauthenticated.
	tok := a.user(t, "tail", "allow read topic:t")
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sub, err := a.client(tok).Subscribe(sctx, "t", client.From(client.Latest()), client.ReconnectWithin(0))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !sub.Next() {
		t.Fatalf("stream: %v", sub.Err())
	}
	if _, err := root.RevokeUser(ctx, "tail"); err != nil {
		t.Fatal(err)
	}
	for sub.Next() {
	}
	if code(sub.Err()) != connect.CodeUnauthenticated || sctx.Err() != nil {
		t.Fatalf("stream after revoke: %v, want Unauthenticated before the deadline", sub.Err())
	}
	if _, err := a.client(tok).ListTopics(ctx); code(err) != connect.CodeUnauthenticated {
		t.Fatalf("revoked token: %v", err)
	}

	// A rule taken away mid-stream: the stream ends with PermissionDenied.
	tok2 := a.user(t, "tail2", "allow read topic:t")
	sub2, err := a.client(tok2).Subscribe(sctx, "t", client.From(client.Latest()), client.ReconnectWithin(0))
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Close()
	if !sub2.Next() {
		t.Fatalf("stream: %v", sub2.Err())
	}
	rules, _, err := root.ListACLs(ctx, "tail2")
	if err != nil || len(rules) != 1 {
		t.Fatalf("rules of tail2: %v %v", rules, err)
	}
	if _, err := root.RevokeACL(ctx, rules[0].GetId(), nil); err != nil {
		t.Fatal(err)
	}
	for sub2.Next() {
	}
	if code(sub2.Err()) != connect.CodePermissionDenied || sctx.Err() != nil {
		t.Fatalf("stream after its rule went: %v, want PermissionDenied before the deadline", sub2.Err())
	}
	var ce *connect.Error
	if errors.As(sub.Err(), &ce) && strings.Contains(ce.Message(), tok) {
		t.Fatal("the error shows the token")
	}
}

// TestAuthListingsAndOpenEndpoints: the listings show what the caller may
// describe; the probes stay open; /metrics needs cluster admin.
func TestAuthListingsAndOpenEndpoints(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := newRPCs(a.url, a.root)
	for _, name := range []string{"orders.eu", "orders.us", "payroll"} {
		if _, err := root.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: name, Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := root.groups.ResetGroup(ctx, &rewindv1.ResetGroupRequest{Group: name + "-g", Topic: name, Create: true,
			Target: &rewindv1.ResetTarget{Target: &rewindv1.ResetTarget_Earliest{Earliest: true}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := root.plugins.UploadPlugin(ctx, &rewindv1.UploadPluginRequest{Name: name + "-p", Module: filterModule}); err != nil {
			t.Fatal(err)
		}
	}
	tok := a.user(t, "eu", "allow describe topic:orders.*", "allow describe group:orders.eu*", "allow describe plugin:payroll-p")
	c := newRPCs(a.url, tok)
	ts, err := c.topics.ListTopics(ctx, &rewindv1.ListTopicsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range ts.GetTopics() {
		names = append(names, tp.GetName())
	}
	gs, err := c.groups.ListGroups(ctx, &rewindv1.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs.GetGroups() {
		names = append(names, g.GetGroup())
	}
	ps, err := c.plugins.ListPlugins(ctx, &rewindv1.ListPluginsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps.GetPlugins() {
		names = append(names, p.GetName())
	}
	st, err := c.cluster.GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.GetPartitions() {
		names = append(names, "status:"+p.GetTopic())
	}
	want := []string{"orders.eu", "orders.us", "orders.eu-g", "payroll-p", "status:orders.eu", "status:orders.us"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("listed %v, want %v", names, want)
	}

	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", a.url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/livez", "", 200}, {"/readyz", "", 200},
		{"/metrics", "", 401}, {"/metrics", tok, 403}, {"/metrics", a.root, 200},
	} {
		if got := get(c.path, c.token); got != c.want {
			t.Errorf("GET %s (token %v): %d, want %d", c.path, c.token != "", got, c.want)
		}
	}
	hc := grpchealth.NewClient(http.DefaultClient, a.url)
	if resp, err := hc.Check(ctx, &grpchealth.CheckRequest{}); err != nil || resp.Status != grpchealth.StatusServing {
		t.Fatalf("gRPC health without a token: %v %v", resp, err)
	}
}

// TestAuthCommitCannotRewind: a group member with read, join and commit
// moves its commits forward, but moving them back (then rejoining to read
// the history again) needs reset.
func TestAuthCommitCannotRewind(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := newRPCs(a.url, a.root)
	if _, err := root.topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	recs := make([]*rewindv1.PublishRecord, 5)
	for i := range recs {
		recs[i] = &rewindv1.PublishRecord{Value: []byte("v")}
	}
	if _, err := root.pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: recs}); err != nil {
		t.Fatal(err)
	}
	m := newRPCs(a.url, a.user(t, "member", "allow read topic:t", "allow join,commit group:g"))
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := m.sub.Subscribe(sctx, &rewindv1.SubscribeRequest{Topic: "t", Group: "g", Start: start(&rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}})})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var gen uint64
	for gen == 0 && st.Receive() {
		if as := st.Msg().GetAssignment(); as != nil && len(as.GetPartitions()) > 0 {
			gen = as.GetGeneration()
		}
	}
	if gen == 0 {
		t.Fatalf("no assignment: %v", st.Err())
	}
	commit := func(off uint64) error {
		_, err := m.groups.Commit(ctx, &rewindv1.CommitRequest{Group: "g", Topic: "t", Generation: gen, Offsets: []*rewindv1.PartitionOffset{{Partition: 0, Offset: off}}})
		return err
	}
	// The member started at the end (5), which the server recorded as the
	// group's commit; it commits what it read after that.
	if _, err := root.pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: recs[:2]}); err != nil {
		t.Fatal(err)
	}
	if err := commit(6); err != nil {
		t.Fatalf("commit forward: %v", err)
	}
	if err := commit(0); code(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "reset on group:g") {
		t.Fatalf("commit back: %v, want PermissionDenied naming reset on group:g", err)
	}
	d, err := root.groups.DescribeGroup(ctx, &rewindv1.DescribeGroupRequest{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.GetTopics()[0].GetPartitions()[0].GetCommittedOffset(); got != 6 {
		t.Fatalf("committed offset %d after the refused commit, want 6", got)
	}
	// Every partition has a commit: a member resumes from them with read
	// alone, whatever its start (the CLI's default is earliest); a group
	// without commits would start there, which is a replay.
	if err := stream(ctx, m, &rewindv1.SubscribeRequest{Topic: "t", Group: "g"}); err != nil {
		t.Fatalf("resume from the commits: %v", err)
	}
	m2 := newRPCs(a.url, a.user(t, "member2", "allow read topic:t", "allow join group:*"))
	if err := stream(ctx, m2, &rewindv1.SubscribeRequest{Topic: "t", Group: "fresh"}); code(err) != connect.CodePermissionDenied {
		t.Fatalf("a new group from earliest: %v, want PermissionDenied", err)
	}
}

// TestAuthSurvivesRestart: tokens and rules are in the store; a restart
// neither forgets them nor writes a new bootstrap token.
func TestAuthSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := engine.Config{Dir: dir, Auth: engine.AuthConfig{Enabled: true}}
	n := enginetest.StartNode(t, cfg)
	url := n.URL
	root := n.BootstrapToken(t)
	ctx := context.Background()
	c := client.New(url, client.WithToken(root))
	tok, _, err := c.CreateUser(ctx, "keeper", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GrantACL(ctx, &client.ACLRule{Principal: "keeper", Kind: "topic", Pattern: "*", Operations: []string{"create"}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, engine.BootstrapTokenFile)); err != nil {
		t.Fatal(err)
	}
	n2 := enginetest.StartNode(t, cfg)
	url2 := n2.URL
	select {
	case <-n2.AuthReady():
	case <-time.After(30 * time.Second):
		t.Fatal("auth not ready after the restart")
	}
	if _, err := os.Stat(filepath.Join(dir, engine.BootstrapTokenFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a restart wrote a bootstrap token again: %v", err)
	}
	if _, err := client.New(url2, client.WithToken(tok)).CreateTopic(ctx, "kept", client.WithPartitions(1)); err != nil {
		t.Fatalf("the user's token and rule after the restart: %v", err)
	}
	if _, err := client.New(url2, client.WithToken(root)).ListUsers(ctx); err != nil {
		t.Fatalf("the root token after the restart: %v", err)
	}
}
