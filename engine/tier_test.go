package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/engine/internal/tier/s3test"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// replayAll reads topic from start to the end and returns the values by
// offset, checking that offsets come in order without gaps.
func replayAll(t *testing.T, c *client.Client, topic string, from client.Position) (first uint64, values []string) {
	t.Helper()
	sub, err := c.Subscribe(context.Background(), topic, client.From(from), client.Until(client.End()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next := uint64(0)
	for sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok {
			for _, rec := range r.Records {
				if values == nil {
					first, next = rec.Offset, rec.Offset
				}
				if rec.Offset != next {
					t.Fatalf("offset %d after %d", rec.Offset, next-1)
				}
				next++
				values = append(values, string(rec.Value))
			}
		}
	}
	if err := sub.Err(); err != nil {
		t.Fatal(err)
	}
	return first, values
}

// TestTieredStorageEndToEnd: a topic whose local retention is a few KiB on
// a node with a file:// tier keeps its whole history readable: the
// housekeeping uploads the old batches and removes them locally, the topic
// describes its local and tiered ranges, and replays from the earliest
// record, from a time deep in tiered history and after a restart return
// exactly what was published.
func TestTieredStorageEndToEnd(t *testing.T) {
	dir, tierDir := t.TempDir(), t.TempDir()
	cfg := engine.Config{Dir: dir, Tier: engine.TierConfig{URL: "file://" + tierDir}, Storage: engine.StorageConfig{HousekeepingInterval: 20 * time.Millisecond},
		Logger: hclog.NewNullLogger()}
	n := enginetest.StartNode(t, cfg)
	addr := n.URL
	c := client.New(addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "history", client.WithLocalRetention(0, 4<<10)); err != nil {
		t.Fatal(err)
	}
	const total = 2000
	var want []string
	var midTime time.Time
	for i := 0; i < total; i += 50 {
		msgs := make([]client.Message, 50)
		for j := range msgs {
			v := fmt.Sprintf("record-%04d-%s", i+j, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
			msgs[j].Value = []byte(v)
			want = append(want, v)
		}
		res, err := c.Publish(ctx, "history", msgs...)
		if err != nil {
			t.Fatal(err)
		}
		if i == 500 {
			midTime = res[0].AppendTime
		}
	}
	// Wait for the local copy to shrink to the limit: the housekeeping
	// uploads and truncates on its own.
	deadline := time.Now().Add(2 * time.Minute)
	var parts []client.PartitionInfo
	for {
		var err error
		if _, parts, err = c.DescribeTopic(ctx, "history"); err != nil {
			t.Fatal(err)
		}
		if p := parts[0]; p.LocalStartOffset > 1500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the local copy never shrank: %+v", parts[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p := parts[0]; p.LogStartOffset != 0 || p.EndOffset != total || p.TieredSegments == 0 || p.TieredBytes == 0 {
		t.Fatalf("describe: %+v", p)
	}
	objs, _ := filepath.Glob(filepath.Join(tierDir, "topics", "*", "0", "*.seg"))
	if len(objs) == 0 {
		t.Fatal("no segment object in the tier directory")
	}
	// /metrics shows where the partition's history lives, and that the
	// uploads caught up with the local limit (the lag closes to 0 once the
	// mover has moved every whole batch below the boundary).
	lbl := []string{"partition", "0", "topic", "history"}
	m := scrapeMetrics(t, addr)
	if v := m.must(t, "rewind_partition_local_start_offset", lbl...); v <= 1500 {
		t.Fatalf("local start %v in /metrics", v)
	}
	if v := m.must(t, "rewind_partition_tiered_segments", lbl...); v == 0 {
		t.Fatal("no tiered segment in /metrics")
	}
	waitMetric(t, addr, 0, "rewind_partition_tier_upload_lag_records", lbl...)
	scrapeMetrics(t, addr).expect(t, 0, "rewind_partition_tier_upload_lag_seconds", lbl...)
	before := scrapeMetrics(t, addr)
	check := func(c *client.Client) {
		t.Helper()
		first, got := replayAll(t, c, "history", client.Earliest())
		if first != 0 || len(got) != total {
			t.Fatalf("replay from earliest: %d records from %d, want %d from 0", len(got), first, total)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("offset %d: %q, want %q", i, got[i], want[i])
			}
		}
		first, got = replayAll(t, c, "history", client.Time(midTime))
		if first != 500 || len(got) != total-500 {
			t.Fatalf("replay from the time of offset 500: %d records from %d", len(got), first)
		}
	}
	check(c)
	// The replays read tiered windows from the store (misses, read bytes),
	// and the second found the first's windows kept (hits).
	after := scrapeMetrics(t, addr)
	for _, name := range []string{"rewind_tier_read_bytes_total", "rewind_tier_cache_misses_total", "rewind_tier_cache_hits_total"} {
		if b, a := before.must(t, name), after.must(t, name); a <= b {
			t.Errorf("%s: %v before the replays, %v after", name, b, a)
		}
	}
	if v := after.must(t, "rewind_tier_cache_bytes"); v <= 0 {
		t.Errorf("rewind_tier_cache_bytes %v after the replays", v)
	}
	// After a restart, from the store and the tier directory alone.
	n.Stop()
	check(client.New(enginetest.StartNode(t, cfg).URL))
}

// TestLocalRetentionNeedsATier: without --tier, a topic cannot ask for
// local limits (nothing could ever leave the disks).
func TestLocalRetentionNeedsATier(t *testing.T) {
	addr := enginetest.StartNode(t, engine.Config{}).URL
	_, err := client.New(addr).CreateTopic(context.Background(), "t", client.WithLocalRetention(time.Hour, 0))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("local retention without a tier: %v, want FailedPrecondition", err)
	}
}

// TestTieredStorageInACluster: three members share a file:// tier (one
// machine, or a shared mount). The leader uploads and every replica drops
// its local copy through raft; each member then serves the whole history,
// also from its own replica (follower reads), reading the tiered part from
// the store.
// createTieredTopic creates topic h, replicated three times and keeping
// 2 KiB of each partition on the nodes, once the cluster can.
func createTieredTopic(ctx context.Context, t *testing.T, c *client.Client) {
	t.Helper()
	for {
		_, err := c.CreateTopic(ctx, "h", client.WithReplicationFactor(3), client.WithLocalRetention(0, 2<<10))
		if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
			return
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // poll: the cluster elects its first leaders
	}
}

func TestTieredStorageInACluster(t *testing.T) {
	tierDir := t.TempDir()
	urls := enginetest.StartCluster(t, 3, func(id uint64, c *engine.Config) {
		c.Tier.URL = "file://" + tierDir
		c.Storage.HousekeepingInterval = 20 * time.Millisecond
	}).URLs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(urls[0])
	createTieredTopic(ctx, t, c)
	const total = 600
	for i := 0; i < total; i += 20 {
		msgs := make([]client.Message, 20)
		for j := range msgs {
			msgs[j].Value = []byte(fmt.Sprintf("r%04d-%s", i+j, "padding-padding-padding-padding-padding-padding"))
		}
		if _, err := c.Publish(ctx, "h", msgs...); err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range urls {
		m := client.New(u)
		for {
			_, parts, err := m.DescribeTopic(ctx, "h")
			// Its replica has every record (a follower applies a moment
			// after the leader acknowledged) and moved the old ones out.
			if err == nil && parts[0].LocalStartOffset > 300 && parts[0].EndOffset == total {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("member %d: the local copy never shrank: %v %+v", i+1, err, parts)
			}
			time.Sleep(20 * time.Millisecond)
		}
		sub, err := m.Subscribe(ctx, "h", client.From(client.Earliest()), client.Until(client.End()), client.FollowerReads())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for sub.Next() {
			if r, ok := sub.Event().(*client.Records); ok {
				for _, rec := range r.Records {
					if want := fmt.Sprintf("r%04d-", n); rec.Offset != uint64(n) || string(rec.Value[:6]) != want {
						t.Fatalf("member %d: offset %d %q, want %d %q", i+1, rec.Offset, rec.Value, n, want)
					}
					n++
				}
			}
		}
		if err := sub.Err(); err != nil || n != total {
			t.Fatalf("member %d: %d records, %v", i+1, n, err)
		}
		sub.Close()
	}
}

// TestTieredStorageOnS3: the same as users would run it against an
// S3-compatible store (SeaweedFS's gateway, signatures checked), and the
// store going down: tiered history then fails with Unavailable, while the
// local history goes on being served.
func TestTieredStorageOnS3(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs SeaweedFS")
	}
	u, stopS3 := s3test.Start(t, "rewind")
	// No tier cache: with one, the history just replayed would still be
	// served from memory once the store is down.
	cfg := engine.Config{Dir: t.TempDir(), Tier: engine.TierConfig{URL: u, Cache: engine.TierCacheConfig{MaxBytes: -1}}, Storage: engine.StorageConfig{HousekeepingInterval: 20 * time.Millisecond}, Logger: hclog.NewNullLogger()}
	addr := enginetest.StartNode(t, cfg).URL
	c := client.New(addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "s3h", client.WithLocalRetention(0, 2<<10)); err != nil {
		t.Fatal(err)
	}
	const total = 500
	for i := 0; i < total; i += 25 {
		msgs := make([]client.Message, 25)
		for j := range msgs {
			msgs[j].Value = []byte(fmt.Sprintf("s3-%04d-padding-padding-padding-padding-padding", i+j))
		}
		if _, err := c.Publish(ctx, "s3h", msgs...); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	var local uint64
	for {
		_, parts, err := c.DescribeTopic(ctx, "s3h")
		if err != nil {
			t.Fatal(err)
		}
		if local = parts[0].LocalStartOffset; local > 300 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing moved to S3: %+v", parts[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	first, got := replayAll(t, c, "s3h", client.Earliest())
	if first != 0 || len(got) != total || got[123] != fmt.Sprintf("s3-%04d-padding-padding-padding-padding-padding", 123) {
		t.Fatalf("replay from earliest over S3: %d records from %d", len(got), first)
	}
	// A second cluster (another lone node) given the same prefix refuses
	// to start, naming the prefix and both ids, and the first cluster's
	// objects stay.
	st, err := tier.Open(u)
	if err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		objs, err := st.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.Name)
		}
		return out
	}
	before := names()
	if len(before) < 2 || before[0] != tier.MarkerName {
		t.Fatalf("the store holds %v, want the cluster marker and segments", before)
	}
	second, err := engine.Open(engine.Config{Dir: t.TempDir(), Tier: engine.TierConfig{URL: u}, Logger: hclog.NewNullLogger()})
	var other *tier.OtherClusterError
	if !errors.As(err, &other) || !strings.Contains(err.Error(), "s3://rewind/history/") || !strings.HasPrefix(other.Found, "node ") ||
		!strings.HasPrefix(other.Owner, "node ") || other.Found == other.Owner {
		if second != nil {
			second.Close()
		}
		t.Fatalf("a second cluster on the prefix: %v, want a refusal naming the prefix and both ids", err)
	}
	if diff := cmp.Diff(before, names()); diff != "" {
		t.Fatalf("the first cluster's objects changed (-before +after):\n%s", diff)
	}
	stopS3()
	// Nothing moves any more; read where the local copy starts now.
	_, parts, err := c.DescribeTopic(ctx, "s3h")
	if err != nil {
		t.Fatal(err)
	}
	local = parts[0].LocalStartOffset
	// The local history is still served...
	if first, got := replayAll(t, c, "s3h", client.Offset(local)); first != local || len(got) != total-int(local) {
		t.Fatalf("local replay with the store down: %d records from %d", len(got), first)
	}
	// ...and the tiered history fails clearly, not silently.
	sub, err := c.Subscribe(ctx, "s3h", client.From(client.Earliest()), client.Until(client.End()), client.ReconnectWithin(time.Second))
	if err == nil {
		for sub.Next() {
			if r, ok := sub.Event().(*client.Records); ok && len(r.Records) > 0 {
				t.Fatalf("records delivered from a store that is down: %v", r.Records[0].Offset)
			}
		}
		err = sub.Err()
		sub.Close()
	}
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "tiered storage unavailable") {
		t.Fatalf("a replay of tiered history with the store down: %v, want Unavailable naming the tier", err)
	}
}

// TestTierUnreachableAtStart: a node whose S3 store does not answer at
// start (nothing listens at the endpoint) starts anyway and serves its
// local history; uploads and deletions wait for the cluster marker.
func TestTierUnreachableAtStart(t *testing.T) {
	s3test.Isolate(t, t.TempDir())
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_MAX_ATTEMPTS", "1") // a refused connection, once per call
	u := "s3://rewind/history?endpoint=" + url.QueryEscape("http://"+enginetest.FreeAddr(t))
	addr := enginetest.StartNode(t, engine.Config{Dir: t.TempDir(), Tier: engine.TierConfig{URL: u}, Logger: hclog.NewNullLogger()}).URL
	c := client.New(addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "t", client.WithLocalRetention(0, 2<<10)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "t", client.Message{Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if first, got := replayAll(t, c, "t", client.Earliest()); first != 0 || len(got) != 1 {
		t.Fatalf("local history with the store down: %d records from %d", len(got), first)
	}
}
