package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// TestDeletingATopicDeletesItsIndexes: the key index, the versions and the
// tag index of a deleted topic's partitions leave the store with its
// other rows, and a topic of the same name starts every key at version 0.
func TestDeletingATopicDeletesItsIndexes(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	tp, err := b.CreateTopic(ctx, TopicSpec{Name: "accounts", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	rec := PublishRecord{Record: record.Record{Key: []byte("a"), Value: []byte("v"),
		Headers: []record.Header{{Key: []byte(partition.TagHeader), Value: []byte("t:1")}}}}
	for range 3 {
		if _, _, err := b.Publish(ctx, "accounts", []PublishRecord{rec}); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() int {
		n := 0
		for _, g := range tp.Groups {
			for _, prefix := range []byte{keys.KeyIndex, keys.Versions, keys.TagIndex} {
				lo, hi := keys.GroupSpan(prefix, g)
				it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
				if err != nil {
					t.Fatal(err)
				}
				for valid := it.First(); valid; valid = it.Next() {
					n++
				}
				if err := errors.Join(it.Error(), it.Close()); err != nil {
					t.Fatal(err)
				}
			}
		}
		return n
	}
	// 3 key rows, 3 versions rows (one batch each), 3 tag rows.
	if n := rows(); n != 9 {
		t.Fatalf("%d index rows before the deletion, want 9", n)
	}
	if err := b.DeleteTopic(ctx, "accounts"); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d index rows left after the deletion", n)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "accounts", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	_, res, err := b.Publish(ctx, "accounts", []PublishRecord{rec})
	if err != nil || !res[0].HasKeyVersion || res[0].KeyVersion != 0 {
		t.Fatalf("first record of the new topic: %+v %v", res, err)
	}
}
