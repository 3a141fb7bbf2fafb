package tier_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/engine/internal/tier/s3test"
)

// testBatches builds n contiguous batches of per records each from base.
func testBatches(t testing.TB, base uint64, n, per int) []tier.Batch {
	t.Helper()
	var out []tier.Batch
	var b record.Builder
	for i := range n {
		b.Reset(uint64(i+1), int64(1000+i))
		for j := range per {
			b.Add(&record.Record{Key: []byte(fmt.Sprintf("k%d", j)), Value: []byte(fmt.Sprintf("v%d-%d", i, j))})
		}
		out = append(out, tier.Batch{Base: base, Span: uint32(per), AppendTime: int64(2000 + 10*i), Data: bytes.Clone(b.Finish())})
		base += uint64(per)
	}
	return out
}

// TestS3StoreAgainstARealServer runs the store's five calls, the segment
// reader and the refusals against SeaweedFS's S3 gateway.
func TestS3StoreAgainstARealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs SeaweedFS")
	}
	ctx := context.Background()
	u, stop := s3test.Start(t, "rewind")
	st, err := tier.Open(u)
	if err != nil {
		t.Fatal(err)
	}
	in := testBatches(t, 1000, 20, 7)
	obj, f, err := tier.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	name := tier.Name(3, 1, f, obj)
	if err := st.Put(ctx, name, obj); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Size(ctx, name); err != nil || n != int64(len(obj)) {
		t.Fatalf("size %d %v, want %d", n, err, len(obj))
	}
	seg, err := tier.OpenSegment(ctx, st, name)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range in {
		b, err := seg.ReadBatch(ctx, st, i)
		if err != nil || !bytes.Equal(b.Bytes(), want.Data) {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	// Listing pages and strips the URL's prefix.
	for i := range 3 {
		if err := st.Put(ctx, fmt.Sprintf("topics/3/2/%d.seg", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := st.List(ctx, tier.Prefix(3, 1))
	if err != nil || len(objs) != 1 || objs[0].Name != name || objs[0].Size != int64(len(obj)) ||
		time.Since(objs[0].Modified) > time.Hour {
		t.Fatalf("list: %+v %v", objs, err)
	}
	if objs, err := st.List(ctx, "topics/3/"); err != nil || len(objs) != 4 {
		t.Fatalf("list of the topic: %+v %v", objs, err)
	}
	if _, err := st.ReadRange(ctx, "topics/3/1/missing.seg", 0, 1); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("a missing object: %v, want tier.ErrNotFound", err)
	}
	if err := st.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := tier.OpenSegment(ctx, st, name); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	// Wrong credentials are refused by the server, with its reason.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	bad, err := tier.Open(u)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Put(ctx, "topics/x", []byte("x")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a wrong secret: %v, want a 403 refusal", err)
	}
	// A store that is down is an error, not a hang.
	stop()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := st.Size(cctx, "topics/3/2/0.seg"); err == nil {
		t.Fatal("the store is down, and a call succeeded")
	}
}
