package engine_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// BenchmarkMetadataOps measures the metadata group's rate, an input of the
// capacity model (docs/design.md §16): one client, one call after the
// other, on one node and on a 3-node cluster (real disks, durable). An
// alter is a metadata command alone; a create also starts the new
// partition's raft group on every replica.
//
//	go test -run XXX -bench BenchmarkMetadataOps -benchtime 200x ./engine
func BenchmarkMetadataOps(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		setup := func(b *testing.B) *client.Client {
			if nodes == 1 {
				addr := enginetest.StartNode(b, engine.Config{}).URL
				return client.New(addr)
			}
			urls := enginetest.StartCluster(b, nodes, nil).URLs()
			c := client.New(urls[0])
			ctx := context.Background()
			// The first call waits for the metadata group's leader.
			for {
				if _, err := c.CreateTopic(ctx, "warmup", client.WithPartitions(1)); err == nil {
					return c
				}
			}
		}
		b.Run(fmt.Sprintf("nodes=%d/alter", nodes), func(b *testing.B) {
			c := setup(b)
			ctx := context.Background()
			if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(1)); err != nil {
				b.Fatal(err)
			}
			i := uint64(0)
			for b.Loop() {
				i++
				if _, err := c.AlterTopic(ctx, "t", client.WithRetention(0, 0, 1_000_000+i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
		b.Run(fmt.Sprintf("nodes=%d/create", nodes), func(b *testing.B) {
			c := setup(b)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				if _, err := c.CreateTopic(ctx, fmt.Sprintf("t%d", i), client.WithPartitions(1)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkPartitionMemory measures the live Go heap an idle partition
// costs on one node (another input of §16): the heap in use after a
// collection, before and after creating REWIND_BENCH_PARTITIONS (default
// 300) partitions. A process's resident size says little here: with
// --gc-heap-target the heap grows to the target before it is collected.
//
//	go test -run XXX -bench BenchmarkPartitionMemory -benchtime 1x ./engine
func BenchmarkPartitionMemory(b *testing.B) {
	parts := benchEnvInt(b, "REWIND_BENCH_PARTITIONS", 300)
	addr := enginetest.StartNode(b, engine.Config{}).URL
	c := client.New(addr)
	ctx := context.Background()
	inUse := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := inUse()
	for i := 0; i*100 < parts; i++ {
		if _, err := c.CreateTopic(ctx, fmt.Sprintf("t%d", i), client.WithPartitions(uint32(min(100, parts-i*100)))); err != nil {
			b.Fatal(err)
		}
	}
	after := inUse()
	per := float64(after-min(before, after)) / float64(parts)
	b.Logf("%d partitions: %.1f KiB of live heap each", parts, per/1024)
	for b.Loop() {
	}
	b.ReportMetric(per, "heapB/partition")
}

func benchEnvInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}
