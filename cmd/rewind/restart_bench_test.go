package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// BenchmarkRestartWritable measures how long a node holding N partitions
// takes, from the start of its process, until every partition accepts a
// publish: after a graceful stop (SIGTERM) and after kill -9. One node,
// topics of 10 partitions (100 when N is 10,000), one record in each
// partition before the stop. It reports seconds per restart
// (restart-s) as the mean of b.N restarts; run it with -benchtime 1x
// -count K to see every trial:
//
//	go test ./cmd/rewind -run XXX -bench RestartWritable -benchtime 1x -count 3
func BenchmarkRestartWritable(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10_000} {
		for _, how := range []string{"graceful", "kill"} {
			b.Run(fmt.Sprintf("partitions=%d/%s", n, how), func(b *testing.B) {
				benchRestart(b, n, how == "kill")
			})
		}
	}
}

func benchRestart(b *testing.B, n int, kill bool) {
	per := 10
	if n >= 10_000 {
		per = 100
	}
	addr := enginetest.FreeAddr(b)
	dir := b.TempDir()
	cfg := enginetest.ProcessConfig{Addr: addr, Dir: dir, Timeout: 5 * time.Minute}
	p := enginetest.StartProcess(b, cfg)
	c := client.New(p.URL)
	ctx := context.Background()
	topics := make([]string, n/per)
	for i := range topics {
		topics[i] = fmt.Sprintf("t%04d", i)
		if _, err := c.CreateTopic(ctx, topics[i], client.WithPartitions(uint32(per))); err != nil {
			b.Fatal(err)
		}
	}
	writable := func() {
		b.Helper()
		work := make(chan [2]int)
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for w := range work {
					part := uint32(w[1])
					msg := client.Message{Value: []byte("x"), Partition: &part}
					for {
						pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
						_, err := c.Publish(pctx, topics[w[0]], msg)
						cancel()
						if err == nil {
							break
						}
					}
				}
			}()
		}
		for t := range topics {
			for part := range per {
				work <- [2]int{t, part}
			}
		}
		close(work)
		wg.Wait()
	}
	writable()
	b.ResetTimer()
	var total, probe time.Duration
	for range b.N {
		b.StopTimer()
		t0 := time.Now()
		writable() // the probe's own cost, on a node that is up
		probe += time.Since(t0)
		if kill {
			p.Kill()
		} else {
			p.Stop(b)
		}
		b.StartTimer()
		start := time.Now()
		p = enginetest.StartProcess(b, cfg)
		writable()
		total += time.Since(start)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "restart-s")
	b.ReportMetric(probe.Seconds()/float64(b.N), "probe-s")
}
