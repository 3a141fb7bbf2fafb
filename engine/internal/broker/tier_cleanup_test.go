package broker

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/tier"
)

// TestDeletedTopicTierObjectsAreCollected: once a topic is deleted, the
// metadata leader's cleanup deletes its objects in the tier store when
// they are old enough (an upload that raced the deletion is young and
// waits), and only them: another topic's objects, and names that are not
// a topic's object, stay.
func TestDeletedTopicTierObjectsAreCollected(t *testing.T) {
	ctx := context.Background()
	st, err := tier.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	b := openCfg(t, vfs.NewMem(), &clock, func(c *Config) { c.Tier = st })
	defer b.Close()
	ids := map[string]uint64{}
	for _, name := range []string{"gone", "kept"} {
		info, err := b.CreateTopic(ctx, TopicSpec{Name: name, Partitions: 2, Retention: meta.Retention{LocalMaxBytes: 1 << 10}})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = info.ID
		for part := range uint32(2) {
			for range 10 {
				publishTo(t, b, name, part, strings.Repeat("x", 100), strings.Repeat("y", 100))
			}
		}
		for _, p := range parts(t, b, name) {
			if err := b.tierOut(p); err != nil {
				t.Fatal(err)
			}
			if len(p.Tiered()) == 0 {
				t.Fatalf("topic %s partition %d: nothing tiered", name, p.Index())
			}
		}
	}
	ofTopic := func(id uint64) []string {
		var out []string
		for _, n := range objectNamesOf(t, st) {
			if got, ok := topicOfObject(n); ok && got == id {
				out = append(out, n)
			}
		}
		return out
	}
	strays := []string{"elsewhere/object", "topics/not-an-id/0/x.seg", "topics/0/0/x.seg"}
	for _, n := range strays {
		if err := st.Put(ctx, n, []byte("not a segment of a topic")); err != nil {
			t.Fatal(err)
		}
	}
	kept := ofTopic(ids["kept"])
	if len(ofTopic(ids["gone"])) < 2 || len(kept) < 2 {
		t.Fatalf("objects %v: want some of each topic", objectNamesOf(t, st))
	}
	if err := b.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	// An upload that raced the deletion lands after it.
	late := tier.Prefix(ids["gone"], 1) + "00000000000000000100-00000000000000000110-00000000.seg"
	if err := st.Put(ctx, late, []byte("a late upload")); err != nil {
		t.Fatal(err)
	}
	before := objectNamesOf(t, st)
	if n, err := b.CollectTierGarbage(ctx, time.Now().Add(-tierOrphanAge)); err != nil || n != 0 {
		t.Fatalf("young objects of the deleted topic collected: %d (%v)", n, err)
	}
	if got := objectNamesOf(t, st); !slices.Equal(got, before) {
		t.Fatalf("objects changed by a pass with nothing old enough: %v, were %v", got, before)
	}
	// The cleanup skips a pass while the metadata leader has committed
	// entries it has not applied (its catalog may be behind); on a busy
	// machine that is briefly the case after the deletion.
	waitMetaApplied(t, b)
	n, err := b.CollectTierGarbage(ctx, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if left := ofTopic(ids["gone"]); len(left) > 0 {
		t.Fatalf("objects of the deleted topic left: %v", left)
	}
	want := append(slices.Clone(kept), strays...)
	slices.Sort(want)
	if got := objectNamesOf(t, st); !slices.Equal(got, want) || n != len(before)-len(want) {
		t.Fatalf("after the cleanup (%d deleted): %v, want %v", n, got, want)
	}
	// The kept topic still reads from the earliest.
	if got := replayAll(t, b, "kept"); len(got) != 2*2*10 {
		t.Fatalf("the kept topic replays %d records, want 40", len(got))
	}
}

// TestTopicOfObject: only names tier.Name gives a topic's segment count.
func TestTopicOfObject(t *testing.T) {
	for name, want := range map[string]uint64{
		tier.Prefix(7, 0) + "x.seg":  7,
		tier.Prefix(12, 3) + "x.seg": 12,
		"topics/7":                   0,
		"topics//0/x.seg":            0,
		"topics/0/0/x.seg":           0,
		"topics/-1/0/x.seg":          0,
		"topics/07/0/x.seg":          0,
		"other/7/0/x.seg":            0,
	} {
		got, ok := topicOfObject(name)
		if ok != (want != 0) || got != want {
			t.Errorf("topicOfObject(%q) = %d %v, want %d", name, got, ok, want)
		}
	}
}

// waitMetaApplied waits until this node leads the metadata group and has
// applied everything it committed.
func waitMetaApplied(t *testing.T, b *Broker) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, ok := b.host.Status(meta.GroupID)
		if ok && s.Leading && s.Applied >= s.Commit && s.Err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metadata group not caught up: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

func objectNamesOf(t *testing.T, st tier.Store) []string {
	t.Helper()
	objs, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return out
}
