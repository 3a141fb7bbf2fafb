package partition

import (
	"context"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/raftlog"
)

// BenchmarkAppend appends 100-byte records to one partition on the real
// filesystem (fsync per pass), from 4 concurrent appenders of 1000 records
// each, without the network: the cost of the raft and storage path alone.
func BenchmarkAppend(b *testing.B) {
	db, err := store.Open(store.Config{Dir: b.TempDir(), FS: vfs.Default})
	if err != nil {
		b.Fatal(err)
	}
	host, err := raftlog.Open(raftlog.Config{NodeID: 1, DB: db})
	if err != nil {
		b.Fatal(err)
	}
	host.Start()
	defer func() { host.Close(); db.Close() }()
	p, err := Open(Config{Group: 2, Index: 0, DB: db, Host: host, Cache: NewCache(64 << 20)})
	if err != nil {
		b.Fatal(err)
	}
	if err := host.AddGroup(raftlog.GroupConfig{ID: 2, Voters: []uint64{1}, SM: p}); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 100)
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i].Value = value
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(recs) * len(value)))
	b.ResetTimer()
	var wg sync.WaitGroup
	work := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if _, err := p.Append(context.Background(), recs); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
}
