package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// Finding 7f of issue 24: topic and partition creation was not governed. A
// principal allowed to create topics made 4 x 1,024 partitions and a node's
// memory went from 52 to 575 MB. These tests replay the attack against a
// real node with --auth and real clients.

// wantExhausted fails unless err is ResourceExhausted with a message that
// holds every one of parts.
func wantExhausted(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
		t.Fatalf("%s: %v, want ResourceExhausted", what, err)
	}
	for _, p := range parts {
		if !strings.Contains(ce.Message(), p) {
			t.Fatalf("%s: message %q does not say %q", what, ce.Message(), p)
		}
	}
}

// wantNoTopic fails unless the topic does not exist (asked as root).
func wantNoTopic(t *testing.T, root *client.Client, name string) {
	t.Helper()
	if _, _, err := root.DescribeTopic(context.Background(), name); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("topic %q after a refused creation: %v, want NotFound", name, err)
	}
}

// TestTopicQuotaRefusesPartitionFlood: a low-privilege principal allowed to
// create any topic is refused past its partition quota and past its topic
// quota, with ResourceExhausted naming the limit and the usage, and nothing
// is created (not even a topic id is used up). Deleting a topic frees its
// share; superusers are exempt from the default quota; a principal without
// its own quota gets the default.
func TestTopicQuotaRefusesPartitionFlood(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := a.client(a.root)
	tenant := a.client(a.user(t, "tenant", "allow create,delete,describe topic:*"))
	if err := root.SetQuota(ctx, "tenant", &client.Quota{Topics: 3, Partitions: 16}); err != nil {
		t.Fatal(err)
	}

	// The attack: topics of 1,024 partitions, one after the other.
	_, err := tenant.CreateTopic(ctx, "flood-0", client.WithPartitions(1024))
	wantExhausted(t, "a topic of 1,024 partitions against a quota of 16", err,
		`principal "tenant"`, "may have 16 partitions", "has 0", "a topic of 1024")
	wantNoTopic(t, root, "flood-0")

	first, err := tenant.CreateTopic(ctx, "a", client.WithPartitions(8))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tenant.CreateTopic(ctx, "b", client.WithPartitions(8)); err != nil {
		t.Fatal(err)
	}
	_, err = tenant.CreateTopic(ctx, "c", client.WithPartitions(1))
	wantExhausted(t, "a 17th partition", err, "may have 16 partitions", "has 16", "would make 17")
	wantNoTopic(t, root, "c")

	// Deleting a topic frees its partitions; the refusals took no topic id.
	if err := tenant.DeleteTopic(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	c, err := tenant.CreateTopic(ctx, "c", client.WithPartitions(1))
	if err != nil {
		t.Fatalf("after deleting a topic: %v", err)
	}
	if c.ID != first.ID+2 {
		t.Fatalf("topic ids %d then %d: a refused creation used up ids", first.ID, c.ID)
	}
	if _, err := tenant.CreateTopic(ctx, "d", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	_, err = tenant.CreateTopic(ctx, "e", client.WithPartitions(1))
	wantExhausted(t, "a 4th topic", err, `principal "tenant"`, "may have 3 topics", "has 3")
	wantNoTopic(t, root, "e")

	// The default quota binds principals without their own, not superusers.
	if err := root.SetQuota(ctx, "", &client.Quota{Topics: 1}); err != nil {
		t.Fatal(err)
	}
	other := a.client(a.user(t, "other", "allow create topic:*"))
	if _, err := other.CreateTopic(ctx, "o1", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	_, err = other.CreateTopic(ctx, "o2", client.WithPartitions(1))
	wantExhausted(t, "a 2nd topic under the default quota of 1", err, `principal "other"`, "may have 1 topics", "has 1")
	for _, name := range []string{"r1", "r2"} {
		if _, err := root.CreateTopic(ctx, name, client.WithPartitions(1)); err != nil {
			t.Fatalf("a superuser under the default quota: %v", err)
		}
	}

	// What each principal owns, in `quota list` and in /metrics.
	qs, err := root.ListQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q := qs.GetQuotas()["tenant"]; q.GetTopics() != 3 || q.GetPartitions() != 16 {
		t.Fatalf("tenant's quota: %v", q)
	}
	owned := map[string][2]uint32{}
	for _, u := range qs.GetUsage() {
		owned[u.GetPrincipal()] = [2]uint32{u.GetTopics(), u.GetPartitions()}
	}
	if owned["tenant"] != [2]uint32{3, 10} || owned["other"] != [2]uint32{1, 1} {
		t.Fatalf("usage (topics, partitions): %v; want tenant 3, 10 and other 1, 1", owned)
	}
	body := adminMetrics(t, a)
	for _, want := range []string{
		`rewind_quota_topics{principal="tenant"} 3`,
		`rewind_quota_topics_limit{principal="tenant"} 3`,
		`rewind_quota_partitions{principal="tenant"} 10`,
		`rewind_quota_partitions_limit{principal="tenant"} 16`,
		`rewind_quota_topics{principal="other"} 1`,
		`rewind_quota_topics_limit{principal="other"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `rewind_quota_partitions_limit{principal="other"}`) {
		t.Error("/metrics shows a partitions limit for a principal without one")
	}
}

// adminMetrics scrapes /metrics with the root token.
func adminMetrics(t *testing.T, a *authNode) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, a.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+a.root)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	return string(body)
}

// TestTopicQuotaConcurrentCreations: creations racing through the API at
// once cannot pass the quota together, because the check runs in the
// metadata group's apply, one creation after another. Exactly the quota's
// worth succeed, whatever the order; the rest are ResourceExhausted and
// leave no topic.
func TestTopicQuotaConcurrentCreations(t *testing.T) {
	a := startAuthNode(t, nil)
	ctx := context.Background()
	root := a.client(a.root)
	tok := a.user(t, "racer", "allow create topic:*")
	const limit, tries = 2, 12
	if err := root.SetQuota(ctx, "racer", &client.Quota{Topics: limit}); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	errs := make([]error, tries)
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			c := a.client(tok) // a connection each, so the requests really overlap
			<-start
			_, errs[i] = c.CreateTopic(ctx, fmt.Sprintf("race-%d", i), client.WithPartitions(1))
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case connect.CodeOf(err) == connect.CodeResourceExhausted:
			wantNoTopic(t, root, fmt.Sprintf("race-%d", i))
		default:
			t.Fatalf("creation %d: %v", i, err)
		}
	}
	if ok != limit {
		t.Fatalf("%d of %d concurrent creations succeeded against a quota of %d topics", ok, tries, limit)
	}
	topics, err := root.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != limit {
		t.Fatalf("%d topics exist, want %d", len(topics), limit)
	}
}

// TestTopicQuotaSurvivesRestart: who created a topic is in the catalog, so
// after a restart the principal's topics still count: a creation past the
// quota is refused, and its usage is reported.
func TestTopicQuotaSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := engine.Config{Dir: dir, Auth: engine.AuthConfig{Enabled: true}}
	n := enginetest.StartNode(t, cfg)
	url := n.URL
	rootTok := n.BootstrapToken(t)
	ctx := context.Background()
	root := client.New(url, client.WithToken(rootTok))
	tok, _, err := root.CreateUser(ctx, "keeper", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.GrantACL(ctx, &client.ACLRule{Principal: "keeper", Kind: "topic", Pattern: "*", Operations: []string{"create"}}); err != nil {
		t.Fatal(err)
	}
	if err := root.SetQuota(ctx, "keeper", &client.Quota{Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(url, client.WithToken(tok)).CreateTopic(ctx, "kept", client.WithPartitions(4)); err != nil {
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
	_, err = client.New(url2, client.WithToken(tok)).CreateTopic(ctx, "more", client.WithPartitions(4))
	wantExhausted(t, "4 more partitions after the restart", err, "may have 6 partitions", "has 4", "would make 8")
	if _, err := client.New(url2, client.WithToken(tok)).CreateTopic(ctx, "fits", client.WithPartitions(2)); err != nil {
		t.Fatalf("2 more partitions after the restart: %v", err)
	}
	qs, err := client.New(url2, client.WithToken(rootTok)).ListQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, u := range qs.GetUsage() {
		if u.GetPrincipal() == "keeper" {
			found = true
			if u.GetTopics() != 2 || u.GetPartitions() != 6 {
				t.Fatalf("keeper's usage after the restart: %v", u)
			}
		}
	}
	if !found || qs.GetQuotas()["keeper"].GetPartitions() != 6 {
		t.Fatalf("quotas after the restart: %v", qs)
	}
}
