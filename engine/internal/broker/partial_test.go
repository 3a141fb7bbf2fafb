package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPartialPublishAcknowledgesTheHealthyPartitions publishes one request
// to two partitions, one of which has stopped: a plain publish fails as a
// whole (as before), a partial one acknowledges the healthy partition's
// records and marks only the stopped partition's records with its error.
// A partial publish whose every partition fails still fails as a whole.
func TestPartialPublishAcknowledgesTheHealthyPartitions(t *testing.T) {
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	b := openCfg(t, vfs.NewMem(), &clock, nil)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "m", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	stuck := errors.New("injected: partition stuck")
	parts(t, b, "m")[1].Fail(stuck)
	recs := pub("a0", "b1", "c0", "d1")
	for i := range recs {
		recs[i].Partition, recs[i].HasPartition = uint32(i%2), true
	}
	if _, _, err := b.Publish(ctx, "m", recs); !errors.Is(err, stuck) {
		t.Fatalf("plain publish with a stopped partition: %v, want the partition's error", err)
	}
	// Its records for the healthy partition were stored all the same,
	// unacknowledged: what partial publishes tell the client.
	if got := parts(t, b, "m")[0].Bounds().Next; got != 2 {
		t.Fatalf("partition 0 after the failed plain publish ends at %d, want 2", got)
	}
	_, res, err := b.PublishPartial(ctx, "m", recs)
	if err != nil {
		t.Fatalf("partial publish: %v", err)
	}
	for i, r := range res {
		switch {
		case i%2 == 0 && (r.Err != nil || r.Partition != 0):
			t.Errorf("record %d (healthy partition 0): %+v, want acknowledged", i, r)
		case i%2 == 1 && (!errors.Is(r.Err, stuck) || r.Partition != 1):
			t.Errorf("record %d (stopped partition 1): %+v, want the partition's error", i, r)
		}
	}
	if res[0].Offset != 2 || res[2].Offset != 3 {
		t.Errorf("the healthy partition's records at offsets %d and %d, want 2 and 3", res[0].Offset, res[2].Offset)
	}
	only1 := []PublishRecord{recs[1], recs[3]}
	if _, _, err := b.PublishPartial(ctx, "m", only1); !errors.Is(err, stuck) {
		t.Fatalf("partial publish to the stopped partition only: %v, want it to fail as a whole", err)
	}
}
