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
	per := partitionsPerTopic(n)
	addr := enginetest.FreeAddr(b)
	dir := b.TempDir()
	cfg := enginetest.ProcessConfig{Addr: addr, Dir: dir, Timeout: 5 * time.Minute}
	p := enginetest.StartProcess(b, cfg)
	c := client.New(p.URL)
	topics := createTopics(b, c, n, per)
	timeRestarts(b, func() { writeEach(b, c, topics, per) }, func() {
		if kill {
			p.Kill()
		} else {
			p.Stop(b)
		}
	}, func() { p = enginetest.StartProcess(b, cfg) })
}

// timeRestarts makes b.N restarts: probe on the node that is up (timed
// alone: probe-s), stop, then start and probe again (timed: restart-s).
func timeRestarts(b *testing.B, probe, stop, start func()) {
	probe()
	b.ResetTimer()
	var total, alone time.Duration
	for range b.N {
		b.StopTimer()
		t0 := time.Now()
		probe() // the probe's own cost, on a node that is up
		alone += time.Since(t0)
		stop()
		b.StartTimer()
		t0 = time.Now()
		start()
		probe()
		total += time.Since(t0)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "restart-s")
	b.ReportMetric(alone.Seconds()/float64(b.N), "probe-s")
}

// BenchmarkRestartMemberWritable is BenchmarkRestartWritable for a member
// of a 3-node cluster: N partitions (topics of 10), a replica of each on
// every node; node 3 is stopped (SIGTERM, or kill -9) while the others go
// on, and the time runs from its new process's start until every
// partition has accepted a publish sent to node 3 (which forwards it to
// the partition's leader, or is the leader): until the node serves every
// partition again. Publishes to the other two go on while it is down, so
// it restarts behind and catches up.
//
//	go test ./cmd/rewind -run XXX -bench RestartMemberWritable -benchtime 1x -count 3
func BenchmarkRestartMemberWritable(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, how := range []string{"graceful", "kill"} {
			b.Run(fmt.Sprintf("partitions=%d/%s", n, how), func(b *testing.B) {
				benchRestartMember(b, n, how == "kill")
			})
		}
	}
}

func benchRestartMember(b *testing.B, n int, kill bool) {
	per := partitionsPerTopic(n)
	m := enginetest.PrepareProcessCluster(b, 3)
	procs := make([]*enginetest.Process, 3)
	cfgs := make([]enginetest.ProcessConfig, 3)
	for i := range procs {
		cfgs[i] = m.Config(i + 1)
		cfgs[i].Timeout = 5 * time.Minute
		procs[i] = enginetest.StartProcess(b, cfgs[i])
	}
	first := client.New(procs[0].URL)
	topics := createTopics(b, first, n, per, client.WithReplicationFactor(3))
	victim := client.New(procs[2].URL, client.WithPublishRetry(1, 0, 5*time.Second)) // node 3 alone
	timeRestarts(b, func() { writeEach(b, victim, topics, per) }, func() {
		if kill {
			procs[2].Kill()
		} else {
			procs[2].Stop(b)
		}
		writeEach(b, first, topics, per) // the others go on: node 3 comes back behind
	}, func() { procs[2] = enginetest.StartProcess(b, cfgs[2]) })
}

// partitionsPerTopic: topics of 10 partitions, of 100 from 10,000.
func partitionsPerTopic(n int) int {
	if n >= 10_000 {
		return 100
	}
	return 10
}

// createTopics creates n/per topics of per partitions through c.
func createTopics(b *testing.B, c *client.Client, n, per int, opts ...client.TopicOption) []string {
	topics := make([]string, n/per)
	for i := range topics {
		topics[i] = fmt.Sprintf("t%04d", i)
		if _, err := c.CreateTopic(context.Background(), topics[i], append(opts, client.WithPartitions(uint32(per)))...); err != nil {
			b.Fatal(err)
		}
	}
	return topics
}

// writeEach publishes a record to every partition of topics through c,
// 32 at a time, each retried until it is acknowledged: it returns once
// every partition is writable through c.
func writeEach(b *testing.B, c *client.Client, topics []string, per int) {
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
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err := c.Publish(ctx, topics[w[0]], msg)
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
