package engine_test

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/engine/internal/tier/s3test"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// BenchmarkTieredReplay measures tiered storage on one node, in one run so
// that the ratios hold on a shared machine:
//
//  1. A 1-partition topic of REWIND_BENCH_RECORDS records of 100 bytes
//     (default 200,000) in 1,000-record publishes is replayed from the
//     earliest record while all local.
//  2. Publish latency, one 10-record publish at a time:
//     REWIND_BENCH_PROBES of them (default 1,000) with nothing moving, then
//     as many as fit while the mover uploads 85–90 % of the history (the
//     topic's local limit set to a tenth of its bytes) and truncates it
//     locally.
//  3. The replay from the earliest record again, now mostly tiered, and 200
//     streams started at times inside tiered history (time to the first
//     record), with the tier cache's hits and misses over them.
//  4. The partition's local bytes (stored, and the store directory on
//     disk) before and after.
//
// REWIND_BENCH_TIER=s3 puts the tier in the S3 server of package s3test
// (built the first time; it holds 512 MiB, so 3 M records at most) instead
// of a file:// directory in the test's
// temporary directory; any other value is the directory to put it in
// (/dev/shm: a tier that shares no disk with the node).
//
//	go test -run XXX -bench BenchmarkTieredReplay -benchtime 1x ./engine
func BenchmarkTieredReplay(b *testing.B) {
	records := benchEnvInt(b, "REWIND_BENCH_RECORDS", 200_000)
	probes := benchEnvInt(b, "REWIND_BENCH_PROBES", 1000)
	tierURL := "file://" + b.TempDir()
	switch v := os.Getenv("REWIND_BENCH_TIER"); {
	case v == "s3":
		tierURL, _ = s3test.Start(b, "bench")
	case v != "":
		d, err := os.MkdirTemp(v, "tier")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		tierURL = "file://" + d
	}
	dir := b.TempDir()
	cfg := engine.Config{Dir: dir, Tier: engine.TierConfig{URL: tierURL}, Storage: engine.StorageConfig{HousekeepingInterval: 50 * time.Millisecond},
		Logger: hclog.NewNullLogger()}
	addr := enginetest.StartNode(b, cfg).URL
	c := client.New(addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "t"); err != nil {
		b.Fatal(err)
	}
	// Distinct random values: what compresses on disk here would not in
	// real traffic.
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([]client.Message, 1000)
	for i := range msgs {
		msgs[i].Value = make([]byte, 100)
		for j := range msgs[i].Value {
			msgs[i].Value[j] = byte(rng.Uint32())
		}
	}
	var times []time.Time
	for n := 0; n < records; n += len(msgs) {
		res, err := c.Publish(ctx, "t", msgs...)
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, res[0].AppendTime)
	}
	total := records
	replay := func() float64 {
		t0 := time.Now()
		if n := replayCount(b, c, "t"); n != total {
			b.Fatalf("replayed %d of %d", n, total)
		}
		return float64(total) / time.Since(t0).Seconds()
	}
	describe := func() client.PartitionInfo {
		_, parts, err := c.DescribeTopic(ctx, "t")
		if err != nil {
			b.Fatal(err)
		}
		return parts[0]
	}
	// probe publishes 10 records at a time until stop, and returns each
	// publish's latency.
	probe := func(stop func(i int) bool) []time.Duration {
		small := msgs[:10]
		var lat []time.Duration
		for i := 0; !stop(i); i++ {
			t0 := time.Now()
			if _, err := c.Publish(ctx, "t", small...); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			total += len(small)
		}
		slices.Sort(lat)
		return lat
	}

	localRate := replay()
	localBytes, localDir := describe().Bytes, dirBytes(b, dir)
	idle := probe(func(i int) bool { return i >= probes })
	if _, err := c.AlterTopic(ctx, "t", client.WithLocalRetention(0, localBytes/10)); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	var moved uint64
	progressed := t0
	moving := probe(func(i int) bool {
		if i%20 != 0 {
			return false
		}
		if at := describe().LocalStartOffset; at > moved {
			moved, progressed = at, time.Now()
		} else if time.Since(progressed) > time.Minute {
			b.Fatalf("the mover stalled at offset %d (the store full or failing?)", at)
		}
		return moved >= uint64(records)*85/100
	})
	moveTime := time.Since(t0)

	b.ResetTimer()
	var tieredRate float64
	var ttfr []time.Duration
	var seekHits, seekMisses, replayRead float64
	for b.Loop() {
		before := scrapeCounters(b, addr)
		tieredRate = replay()
		mid := scrapeCounters(b, addr)
		for i := range 200 {
			at := times[(i*7919)%(len(times)*8/10)]
			t0 := time.Now()
			sub, err := c.Subscribe(ctx, "t", client.From(client.Time(at)), client.MaxRecordsPerEvent(1))
			if err != nil {
				b.Fatal(err)
			}
			for sub.Next() {
				if _, ok := sub.Event().(*client.Records); ok {
					break
				}
			}
			ttfr = append(ttfr, time.Since(t0))
			sub.Close()
		}
		after := scrapeCounters(b, addr)
		replayRead = mid["rewind_tier_read_bytes_total"] - before["rewind_tier_read_bytes_total"]
		seekHits = after["rewind_tier_cache_hits_total"] - mid["rewind_tier_cache_hits_total"]
		seekMisses = after["rewind_tier_cache_misses_total"] - mid["rewind_tier_cache_misses_total"]
	}
	b.StopTimer()
	p := describe()
	// Pebble gives the space back as it compacts the removed ranges: wait
	// up to a minute for the directory to shrink.
	afterDir := dirBytes(b, dir)
	for deadline := time.Now().Add(time.Minute); afterDir > localDir/2 && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		afterDir = dirBytes(b, dir)
	}
	slices.Sort(ttfr)
	pct := func(d []time.Duration, q float64) float64 {
		return float64(d[int(float64(len(d)-1)*q)].Microseconds()) / 1000
	}
	b.ReportMetric(localRate, "local-rec/s")
	b.ReportMetric(tieredRate, "tiered-rec/s")
	b.ReportMetric(float64(p.LocalStartOffset)/float64(total)*100, "tiered-%")
	b.ReportMetric(replayRead/(1<<20), "replay-tier-read-MiB")
	b.ReportMetric(pct(ttfr, 0.5), "seek-ttfr-p50-ms")
	b.ReportMetric(pct(ttfr, 0.99), "seek-ttfr-p99-ms")
	b.ReportMetric(seekHits/max(seekHits+seekMisses, 1)*100, "seek-cache-hit-%")
	b.ReportMetric(pct(idle, 0.5), "publish-p50-idle-ms")
	b.ReportMetric(pct(idle, 0.99), "publish-p99-idle-ms")
	b.ReportMetric(pct(moving, 0.5), "publish-p50-moving-ms")
	b.ReportMetric(pct(moving, 0.99), "publish-p99-moving-ms")
	b.ReportMetric(float64(len(moving)), "moving-publishes")
	b.ReportMetric(moveTime.Seconds(), "move-s")
	b.ReportMetric(float64(localBytes)/(1<<20), "stored-MiB-before")
	b.ReportMetric(float64(p.Bytes)/(1<<20), "stored-MiB-after")
	b.ReportMetric(float64(localDir)/(1<<20), "dir-MiB-before")
	b.ReportMetric(float64(afterDir)/(1<<20), "dir-MiB-after")
}

// dirBytes sums the sizes of the files under dir.
func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a file Pebble deleted meanwhile
		}
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// scrapeCounters returns the node's unlabelled metrics by name.
func scrapeCounters(b *testing.B, addr string) map[string]float64 {
	resp, err := http.Get(addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 0 {
				out[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return out
}
