package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginehook"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/internal/wasmgen"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// scrape is one /metrics answer: its text and its families by name.
type scrape struct {
	text     []byte
	families map[string]*dto.MetricFamily
}

func scrapeMetrics(t *testing.T, url string) scrape {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v\n%s", resp.StatusCode, err, text)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, text)
	}
	return scrape{text: text, families: fams}
}

// value returns the value of the series of family name with exactly these
// labels (name=value pairs); ok is false when there is none. A histogram
// gives its count.
func (s scrape) value(name string, labels ...string) (float64, bool) {
	f := s.families[name]
	if f == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func (s scrape) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.value(name, labels...)
	if !ok {
		t.Fatalf("no series %s%v in the scrape", name, labels)
	}
	return v
}

// expect fails unless the series has value want.
func (s scrape) expect(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	if got := s.must(t, name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// lint runs promlint over the scrape, which is what `promtool check
// metrics` runs (it reads the exposition and lints it with client_golang's
// promlint); building promtool itself would pull all of Prometheus into
// the test.
func (s scrape) lint(t *testing.T) {
	t.Helper()
	problems, err := promlint.New(bytes.NewReader(s.text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// recvUntil reads events of st until done returns true for one of them.
func recvUntil(t *testing.T, st *connect.ServerStreamForClient[rewindv1.SubscribeResponse], done func(*rewindv1.SubscribeResponse) bool) {
	t.Helper()
	for st.Receive() {
		if done(st.Msg()) {
			return
		}
	}
	t.Fatalf("stream ended early: %v", st.Err())
}

// waitMetric polls the scrape until the series has value want.
func waitMetric(t *testing.T, url string, want float64, name string, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, _ := scrapeMetrics(t, url).value(name, labels...)
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v, want %v", name, labels, v, want)
		}
		time.Sleep(10 * time.Millisecond) // poll: a stream ends after its client went away
	}
}

// TestMetricsOfARealNode publishes, follows, replays and filters through a
// real server on loopback with Connect clients, lets a subscriber group
// fall behind, then checks what /metrics says against what was done:
// exact traffic by topic, streams by kind, the group's lag in records (the
// exact number unconsumed) and in seconds (with the node's clock moved 90 s
// past the appends: exactly 90 while behind, 0 once caught up), filter
// calls and failures, raft health, and a clean promlint. It also checks
// that every metric docs/grafana-dashboard.json queries is in the scrape.
func TestMetricsOfARealNode(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(t0.UnixNano())
	url := enginetest.StartNode(t, enginehook.With(engine.Config{
		Dir:     t.TempDir(),
		Storage: engine.StorageConfig{StoreCacheBytes: 8 << 20, TailCacheBytes: 8 << 20},
	}, enginehook.Hooks{Clock: func() time.Time { return time.Unix(0, now.Load()) }})).URL
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hc := http.DefaultClient
	topics := rewindv1connect.NewTopicServiceClient(hc, url)
	pub := rewindv1connect.NewPublishServiceClient(hc, url)
	sub := rewindv1connect.NewSubscribeServiceClient(hc, url)
	groups := rewindv1connect.NewGroupServiceClient(hc, url)

	if _, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "orders", Config: &rewindv1.TopicConfig{Partitions: 2}}); err != nil {
		t.Fatal(err)
	}
	// 10 records in partition 0 and 4 in partition 1, 100 bytes each,
	// then one with an idempotency key, published twice (the second is a
	// duplicate: not appended, not counted): 15 records of 1,501 bytes.
	value := bytes.Repeat([]byte("v"), 100)
	publish := func(p uint32, count int, key string) {
		t.Helper()
		req := &rewindv1.PublishRequest{Topic: "orders"}
		for range count {
			req.Records = append(req.Records, &rewindv1.PublishRecord{Value: value, Partition: &p, IdempotencyKey: key})
		}
		if _, err := pub.Publish(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	publish(0, 10, "")
	publish(1, 4, "")
	p1 := uint32(1)
	for range 2 {
		if _, err := pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "orders", Records: []*rewindv1.PublishRecord{{Value: value, IdempotencyKey: "k", Partition: &p1}}}); err != nil {
			t.Fatal(err)
		}
	}
	const records, recordBytes = 15, 15*100 + 1
	if _, err := pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "nope", Records: []*rewindv1.PublishRecord{{Value: value}}}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("publish to a missing topic: %v, want NotFound", err)
	}

	// A group member reads everything, commits 6 of partition 0's 10
	// records and all 5 of partition 1's; a live stream waits beside it.
	gctx, gcancel := context.WithCancel(ctx)
	gs, err := sub.Subscribe(gctx, &rewindv1.SubscribeRequest{Topic: "orders", Group: "billing",
		Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_Earliest{Earliest: true}}})
	if err != nil {
		t.Fatal(err)
	}
	var gen uint64
	got := 0
	recvUntil(t, gs, func(ev *rewindv1.SubscribeResponse) bool {
		if a := ev.GetAssignment(); a != nil {
			gen = a.GetGeneration()
		}
		got += len(ev.GetRecords().GetRecords())
		return got == records && gen != 0
	})
	ls, err := sub.Subscribe(gctx, &rewindv1.SubscribeRequest{Topic: "orders",
		Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_Latest{Latest: true}}})
	if err != nil {
		t.Fatal(err)
	}
	recvUntil(t, ls, func(ev *rewindv1.SubscribeResponse) bool { return ev.GetStarted() != nil })
	if _, err := groups.Commit(ctx, &rewindv1.CommitRequest{Group: "billing", Topic: "orders", Generation: gen,
		Offsets: []*rewindv1.PartitionOffset{{Partition: 0, Offset: 6}, {Partition: 1, Offset: 5}}}); err != nil {
		t.Fatal(err)
	}
	s := scrapeMetrics(t, url)
	s.expect(t, 1, "rewind_streams_open", "kind", "group")
	s.expect(t, 1, "rewind_streams_open", "kind", "live")
	s.expect(t, 0, "rewind_streams_open", "kind", "replay")
	s.expect(t, 0, "rewind_streams_open", "kind", "filtered")
	gcancel()
	waitMetric(t, url, 0, "rewind_streams_open", "kind", "group")
	waitMetric(t, url, 0, "rewind_streams_open", "kind", "live")

	// A replay of everything, a filtered one whose module keeps nothing,
	// and one whose module traps.
	replay := func(f *rewindv1.ReplayFilter) (int, error) {
		st, err := sub.Subscribe(ctx, &rewindv1.SubscribeRequest{Topic: "orders", Filter: f,
			Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_Earliest{Earliest: true}},
			Stop:  &rewindv1.StopPosition{Position: &rewindv1.StopPosition_End{End: true}}})
		if err != nil {
			return 0, err
		}
		n := 0
		for st.Receive() {
			n += len(st.Msg().GetRecords().GetRecords())
		}
		return n, st.Err()
	}
	if n, err := replay(nil); err != nil || n != records {
		t.Fatalf("replay: %d records, %v", n, err)
	}
	keepNothing := wasmgen.ABIModule(2, wasmgen.Body(wasmgen.I32Const(0), wasmgen.OpEnd), nil)
	if n, err := replay(&rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Inline{Inline: keepNothing}}); err != nil || n != 0 {
		t.Fatalf("filtered replay: %d records, %v", n, err)
	}
	trap := wasmgen.ABIModule(2, wasmgen.Body(wasmgen.OpUnreachable, wasmgen.OpEnd), nil)
	if _, err := replay(&rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Inline{Inline: trap}}); err == nil {
		t.Fatal("a replay through a trapping filter succeeded")
	}

	// 90 s later on the node's clock, the group is 4 records and 90 s
	// behind in partition 0, caught up in partition 1.
	now.Store(t0.Add(90 * time.Second).UnixNano())
	s = scrapeMetrics(t, url)
	s.lint(t)
	s.expect(t, 4, "rewind_group_lag_records", "group", "billing", "topic", "orders", "partition", "0")
	s.expect(t, 90, "rewind_group_lag_seconds", "group", "billing", "topic", "orders", "partition", "0")
	s.expect(t, 0, "rewind_group_lag_records", "group", "billing", "topic", "orders", "partition", "1")
	s.expect(t, 0, "rewind_group_lag_seconds", "group", "billing", "topic", "orders", "partition", "1")
	s.expect(t, 0, "rewind_group_lag_series_omitted")
	s.expect(t, records, "rewind_published_records_total", "topic", "orders")
	s.expect(t, recordBytes, "rewind_published_bytes_total", "topic", "orders")
	// The group member and the replay each got every record; the filters
	// delivered none.
	s.expect(t, 2*records, "rewind_delivered_records_total", "topic", "orders")
	s.expect(t, 2*recordBytes, "rewind_delivered_bytes_total", "topic", "orders")
	s.expect(t, 2*records, "rewind_records_delivered_total")
	s.expect(t, 4, "rewind_publish_duration_seconds") // its count: 4 requests acknowledged
	s.expect(t, 1, "rewind_publish_failures_total", "code", "not_found")
	s.expect(t, 0, "rewind_publish_failures_total", "code", "unavailable")
	if v := s.must(t, "rewind_replay_read_bytes_total"); v < recordBytes {
		t.Errorf("rewind_replay_read_bytes_total = %v after replaying %d payload bytes", v, recordBytes)
	}
	if v := s.must(t, "rewind_filter_calls_total"); v < 2 {
		t.Errorf("rewind_filter_calls_total = %v after two filtered replays", v)
	}
	if v := s.must(t, "rewind_filter_fuel_total"); v <= 0 {
		t.Errorf("rewind_filter_fuel_total = %v after filter calls", v)
	}
	s.expect(t, 1, "rewind_filter_failures_total", "kind", "trap")
	s.expect(t, 0, "rewind_filter_failures_total", "kind", "fuel")
	// The keep-nothing filter's instance (2 pages) waits idle for reuse;
	// the trapping one was closed.
	s.expect(t, 1, "rewind_filter_idle_instances")
	s.expect(t, 2*65536, "rewind_filter_idle_bytes")
	s.expect(t, 0, "rewind_filter_idle_evictions_total")
	s.expect(t, 0, "rewind_filter_compiles_dropped_total")
	s.expect(t, 1, "rewind_raft_is_leader", "group", "meta")
	s.expect(t, 1, "rewind_raft_leader_known", "group", "meta")
	if v := s.must(t, "rewind_raft_term", "group", "meta"); v < 1 {
		t.Errorf("rewind_raft_term{meta} = %v", v)
	}
	if v := s.must(t, "rewind_raft_leader_changes_total", "group", "meta"); v < 1 {
		t.Errorf("rewind_raft_leader_changes_total{meta} = %v: the node became leader once at least", v)
	}
	if v := s.must(t, "rewind_raft_leader_changes_total", "group", "partitions"); v < 2 {
		t.Errorf("rewind_raft_leader_changes_total{partitions} = %v: each of 2 partitions got a leader", v)
	}
	s.expect(t, 2, "rewind_raft_partition_groups", "role", "leader")
	s.expect(t, 0, "rewind_raft_partition_groups", "role", "no_leader")
	// A single node suspects nobody.
	for _, name := range []string{"rewind_raft_member_suspicions_total", "rewind_raft_member_suspicions_withdrawn_total", "rewind_raft_detector_campaigns_total"} {
		s.expect(t, 0, name)
	}
	s.expect(t, 1, "rewind_ready")
	s.expect(t, 0, "rewind_disk_full")
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if s.families[name] == nil {
			t.Errorf("no %s: the Go and process collectors are missing", name)
		}
	}

	// Caught up (a reset to the end): both lags are 0.
	if _, err := groups.ResetGroup(ctx, &rewindv1.ResetGroupRequest{Group: "billing", Topic: "orders",
		Target: &rewindv1.ResetTarget{Target: &rewindv1.ResetTarget_Latest{Latest: true}}}); err != nil {
		t.Fatal(err)
	}
	s = scrapeMetrics(t, url)
	for _, p := range []string{"0", "1"} {
		s.expect(t, 0, "rewind_group_lag_records", "group", "billing", "topic", "orders", "partition", p)
		s.expect(t, 0, "rewind_group_lag_seconds", "group", "billing", "topic", "orders", "partition", p)
	}
	s.lint(t)

	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, s) })
}

// metricName finds the metric names in a PromQL expression.
var metricName = regexp.MustCompile(`\b(?:rewind|go|process)_[a-z0-9_]+\b`)

// checkDashboard checks that every metric docs/grafana-dashboard.json
// queries is a family of the scrape (a histogram's _bucket, _sum and
// _count series are its family's), so that a renamed metric cannot leave
// an empty panel behind.
func checkDashboard(t *testing.T, s scrape) {
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	var names []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range metricName.FindAllString(tg.Expr, -1) {
				if !s.has(name) && !withTierOrAuth.MatchString(name) {
					t.Errorf("panel %q queries %s, which the node does not expose", p.Title, name)
				}
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, want := range []string{"rewind_group_lag_seconds", "rewind_group_lag_records", "rewind_publish_duration_seconds_bucket", "rewind_streams_open"} {
		if _, found := slices.BinarySearch(names, want); !found {
			t.Errorf("the dashboard does not query %s", want)
		}
	}
	if len(names) < 10 {
		t.Errorf("the dashboard queries only %v", names)
	}
}

// withTierOrAuth matches the families a node without --tier and --auth
// does not expose; engine/internal/api's TestDashboardMetricsAreDescribed
// checks them against the collectors' descriptions.
var withTierOrAuth = regexp.MustCompile(`^rewind_(tier_|partition_tier|partition_local_start|quota_)`)

// has reports whether name is a family of the scrape, or a series of one
// (name_bucket, _sum, _count of a histogram).
func (s scrape) has(name string) bool {
	if s.families[name] != nil {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f := s.families[base]; f != nil && (f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
				return true
			}
		}
	}
	return false
}

// TestMetricsInACluster checks the per-node scope of the metrics on a real
// three-node cluster: records published through one node are counted once
// over the cluster (by the leaders that appended them), exactly one node
// leads the metadata group and only it exposes the group lag, every
// partition group has one leader among the nodes, and every node's scrape
// is promlint-clean.
func TestMetricsInACluster(t *testing.T) {
	// A 100 ms tick (elections after 1-2 s) keeps leaderships put on a
	// busy machine; the checks below still allow for them to move.
	urls := enginetest.StartCluster(t, 3, func(_ uint64, c *engine.Config) { c.Cluster.TickInterval = 100 * time.Millisecond }).URLs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, u := range urls {
		waitProbe(t, u+"/readyz", http.StatusOK)
	}
	topics := rewindv1connect.NewTopicServiceClient(http.DefaultClient, urls[0])
	if _, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 3, ReplicationFactor: 3}}); err != nil {
		t.Fatal(err)
	}
	pub := rewindv1connect.NewPublishServiceClient(http.DefaultClient, urls[0])
	for p := range uint32(3) {
		req := &rewindv1.PublishRequest{Topic: "t"}
		for i := range 10 {
			// Idempotency keys make a retry after an unknown outcome safe:
			// a record stored the first time is a duplicate the second,
			// and duplicates are not counted.
			req.Records = append(req.Records, &rewindv1.PublishRecord{Value: []byte("0123456789"), Partition: &p, IdempotencyKey: fmt.Sprintf("%d-%d", p, i)})
		}
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := pub.Publish(ctx, req)
			if err == nil {
				break
			}
			if connect.CodeOf(err) != connect.CodeUnavailable || time.Now().After(deadline) {
				t.Fatalf("publish to partition %d: %v", p, err)
			}
			time.Sleep(50 * time.Millisecond) // poll: the partition elects its first leader
		}
	}
	// metaLeader polls until exactly one node says it leads the metadata
	// group, and returns its index.
	metaLeader := func() int {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			leader, leaders := -1, 0
			for i, u := range urls {
				if v, _ := scrapeMetrics(t, u).value("rewind_raft_is_leader", "group", "meta"); v == 1 {
					leader, leaders = i, leaders+1
				}
			}
			if leaders == 1 {
				return leader
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d nodes say they lead the metadata group", leaders)
			}
			time.Sleep(20 * time.Millisecond) // poll: an election
		}
	}
	// Create the group through its coordinator (the metadata leader; on a
	// busy machine leadership may move meanwhile: ask again).
	deadline := time.Now().Add(time.Minute)
	for {
		groups := rewindv1connect.NewGroupServiceClient(http.DefaultClient, urls[metaLeader()])
		_, err := groups.ResetGroup(ctx, &rewindv1.ResetGroupRequest{Group: "audit", Topic: "t", Create: true,
			Target: &rewindv1.ResetTarget{Target: &rewindv1.ResetTarget_Earliest{Earliest: true}}})
		if err == nil {
			break
		}
		if connect.CodeOf(err) != connect.CodeUnavailable || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // poll: a metadata election
	}
	var published float64
	for _, u := range urls {
		s := scrapeMetrics(t, u)
		s.lint(t)
		v, _ := s.value("rewind_published_records_total", "topic", "t")
		published += v
	}
	if published != 30 {
		t.Errorf("rewind_published_records_total summed over the nodes = %v, want 30 (each record counted once)", published)
	}
	// The lag is on the metadata leader only, 10 records in each partition
	// (the leader is asked again after each round, in case it moved).
	deadline = time.Now().Add(time.Minute)
	for {
		leader := metaLeader()
		var problems []string
		for i, u := range urls {
			s := scrapeMetrics(t, u)
			if _, hasLag := s.families["rewind_group_lag_records"]; hasLag != (i == leader) {
				problems = append(problems, fmt.Sprintf("node %d exposes group lag: %v, with node %d leading the metadata group", i+1, hasLag, leader+1))
			}
			if i != leader {
				continue
			}
			for p := range 3 {
				if v, ok := s.value("rewind_group_lag_records", "group", "audit", "topic", "t", "partition", fmt.Sprint(p)); v != 10 {
					problems = append(problems, fmt.Sprintf("node %d: lag of partition %d = %v (%v), want 10", i+1, p, v, ok))
				}
			}
		}
		if len(problems) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(strings.Join(problems, "\n"))
		}
		time.Sleep(20 * time.Millisecond) // poll: the metadata leadership moved between the scrapes
	}
	// Every partition group has one leader among the nodes (leadership may
	// still move: poll).
	deadline = time.Now().Add(time.Minute)
	for {
		var leading, noLeader float64
		for _, u := range urls {
			s := scrapeMetrics(t, u)
			v, _ := s.value("rewind_raft_partition_groups", "role", "leader")
			w, _ := s.value("rewind_raft_partition_groups", "role", "no_leader")
			leading, noLeader = leading+v, noLeader+w
		}
		if leading == 3 && noLeader == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition groups: %v leading, %v without a leader over the nodes; want 3 and 0", leading, noLeader)
		}
		time.Sleep(20 * time.Millisecond) // poll: a leadership transfer in progress
	}
}
