package cliente2e_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/rewind-io/rewind/sdk/client"
)

// BenchmarkPublishDuringPause publishes one record at a time, each with
// an idempotency key and a 30 s deadline, through a client given two
// nodes whose first is paused (gatePaused: connections held, nothing
// answered, as under SIGSTOP) for REWIND_PAUSE (default 15 s) after 2 s,
// then resumed for 3 s. It reports the latency of acknowledged publishes
// (p50, p99, max, in ms), how many were acknowledged during the pause,
// the publishes that failed, and those that waited longer than 2 s. It uses only options every version of the
// client has, so the same benchmark measures the client before and after
// a change. Run it once: -bench PublishDuringPause -benchtime 1x.
func BenchmarkPublishDuringPause(b *testing.B) {
	pause := 15 * time.Second
	if v := os.Getenv("REWIND_PAUSE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		pause = d
	}
	for b.Loop() {
		s := startServer(b, "")
		g := startGate(b, s.addr)
		ctx := context.Background()
		if _, err := client.New(s.addr).CreateTopic(ctx, "t", client.WithPartitions(3)); err != nil {
			b.Fatal(err)
		}
		c := client.New(g.addr + "," + s.addr)
		var lat []time.Duration
		failed, duringPause := 0, 0
		// On timers: a publish stalled by the pause must not hold the
		// resume back.
		start := time.Now()
		pauseT := time.AfterFunc(2*time.Second, func() { g.set(gatePaused) })
		resumeT := time.AfterFunc(2*time.Second+pause, func() { g.set(gatePass) })
		for i := 0; time.Since(start) < 5*time.Second+pause; i++ {
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			t0 := time.Now()
			_, err := c.Publish(pctx, "t", client.Message{Value: []byte(fmt.Sprint(i)), IdempotencyKey: fmt.Sprint("k-", i)})
			cancel()
			if err != nil {
				failed++
				continue
			}
			lat = append(lat, time.Since(t0))
			if at := time.Since(start); at > 2*time.Second && at < 2*time.Second+pause {
				duringPause++
			}
		}
		pauseT.Stop()
		resumeT.Stop()
		slices.Sort(lat)
		q := func(f float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))].Microseconds()) / 1000
		}
		slow := 0
		for _, d := range lat {
			if d > 2*time.Second {
				slow++
			}
		}
		b.ReportMetric(float64(len(lat)), "acked")
		b.ReportMetric(float64(duringPause), "acked-in-pause")
		b.ReportMetric(float64(failed), "failed")
		b.ReportMetric(float64(slow), "over-2s")
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(q(1), "max-ms")
	}
}
