package tier_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rewind-io/rewind/engine/internal/tier"
)

// TestClaimRefusesAnotherCluster: the first owner writes the marker and
// keeps its objects; a second owner is refused (the error names the store
// and both owners) and can neither write nor delete.
func TestClaimRefusesAnotherCluster(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := tier.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := tier.NewClaimedStore(st, "cluster aaaa")
	if err := a.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, "topics/1/0/x.seg", []byte("a's")); err != nil {
		t.Fatal(err)
	}
	// The same owner again (a restart, another member) is welcome.
	if err := tier.NewClaimedStore(st, "cluster aaaa").Claim(ctx); err != nil {
		t.Fatalf("the owner again: %v", err)
	}
	b := tier.NewClaimedStore(st, "cluster bbbb")
	err = b.Claim(ctx)
	var other *tier.OtherClusterError
	if !errors.As(err, &other) || other.Found != "cluster aaaa" || other.Owner != "cluster bbbb" {
		t.Fatalf("another owner: %v, want an OtherClusterError naming both", err)
	}
	for _, want := range []string{dir, "cluster aaaa", "cluster bbbb", tier.MarkerName} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if err := b.Delete(ctx, "topics/1/0/x.seg"); !errors.As(err, &other) {
		t.Fatalf("a delete by the other owner: %v", err)
	}
	if err := b.Put(ctx, "topics/2/0/y.seg", []byte("b's")); !errors.As(err, &other) {
		t.Fatalf("a put by the other owner: %v", err)
	}
	objs, err := st.List(ctx, "")
	if err != nil || len(objs) != 2 || objs[0].Name != tier.MarkerName || objs[1].Name != "topics/1/0/x.seg" {
		t.Fatalf("after the refusals: %+v %v", objs, err)
	}
}

// TestClaimRaceHasOneWinner: owners claiming an empty store at once: the
// conditional write lets exactly one in, and every other reads its marker.
func TestClaimRaceHasOneWinner(t *testing.T) {
	st, err := tier.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	var won atomic.Int32
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = tier.NewClaimedStore(st, string(rune('a'+i))).Claim(context.Background())
			if errs[i] == nil {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d owners won: %v", won.Load(), errs)
	}
	for _, err := range errs {
		var other *tier.OtherClusterError
		if err != nil && !errors.As(err, &other) {
			t.Fatalf("a loser: %v", err)
		}
	}
}

// flakyStore fails every call while down is set, as an unreachable store.
type flakyStore struct {
	tier.Store
	down atomic.Bool
}

var errDown = errors.New("store down")

func (s *flakyStore) Size(ctx context.Context, name string) (int64, error) {
	if s.down.Load() {
		return 0, errDown
	}
	return s.Store.Size(ctx, name)
}

// TestClaimWaitsForAStoreThatIsDown: a node may start while its store is
// unreachable; its writes and deletions wait for the marker check, and go
// through once the store is back.
func TestClaimWaitsForAStoreThatIsDown(t *testing.T) {
	ctx := context.Background()
	fs, err := tier.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &flakyStore{Store: fs}
	st.down.Store(true)
	c := tier.NewClaimedStore(st, "cluster aaaa")
	if err := c.Claim(ctx); !errors.Is(err, errDown) {
		t.Fatalf("claim with the store down: %v", err)
	}
	if err := c.Put(ctx, "topics/1/0/x.seg", []byte("x")); !errors.Is(err, tier.ErrNotClaimed) || !errors.Is(err, errDown) {
		t.Fatalf("put before the check: %v, want ErrNotClaimed with the cause", err)
	}
	if objs, _ := fs.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("written before the check: %+v", objs)
	}
	st.down.Store(false)
	if err := c.Put(ctx, "topics/1/0/x.seg", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if objs, _ := fs.List(ctx, ""); len(objs) != 2 {
		t.Fatalf("after the store came back: %+v", objs)
	}
}

// TestLocalOwnerIsKept: a lone node's identity is made once per data
// directory and kept across restarts; two directories get two.
func TestLocalOwnerIsKept(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	a, err := tier.LocalOwner(d1)
	if err != nil {
		t.Fatal(err)
	}
	again, err := tier.LocalOwner(d1)
	if err != nil || again != a {
		t.Fatalf("the same directory again: %q %v, want %q", again, err, a)
	}
	b, err := tier.LocalOwner(d2)
	if err != nil || b == a || !strings.HasPrefix(b, "node ") {
		t.Fatalf("another directory: %q %v (first %q)", b, err, a)
	}
}

// TestDeleteChecksTheMarkerAgain: a marker overwritten after the claim
// (a store that ignored If-None-Match while two clusters started) stops
// the deletions of the cluster it no longer names, and from then on its
// writes.
func TestDeleteChecksTheMarkerAgain(t *testing.T) {
	ctx := context.Background()
	st, err := tier.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := tier.NewClaimedStore(st, "cluster aaaa")
	if err := a.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "topics/7/0/b.seg", []byte("b's")); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, tier.MarkerName, []byte("cluster bbbb\n")); err != nil {
		t.Fatal(err)
	}
	var other *tier.OtherClusterError
	if err := a.Delete(ctx, "topics/7/0/b.seg"); !errors.As(err, &other) || other.Found != "cluster bbbb" {
		t.Fatalf("a delete after the marker changed: %v", err)
	}
	if _, err := st.Size(ctx, "topics/7/0/b.seg"); err != nil {
		t.Fatalf("the other cluster's object: %v", err)
	}
	if err := a.Put(ctx, "topics/1/0/a.seg", []byte("a's")); !errors.As(err, &other) {
		t.Fatalf("a put after the refusal: %v", err)
	}
}
