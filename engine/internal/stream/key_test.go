package stream

import (
	"context"
	"fmt"
	"testing"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// TestKeyReadFollowsTheKeysRecords: a stream of one key reads only the
// batches that hold the key's records (not the partition's 200), delivers
// them in order with their versions, and hands off to live without a gap.
func TestKeyReadFollowsTheKeysRecords(t *testing.T) {
	e := newEnv(t, 1, 4<<10) // a tiny cache: history comes from Pebble
	for j := range 200 {
		rs := []record.Record{{Key: []byte(fmt.Sprint("other-", j)), Value: []byte("x")}}
		if j%50 == 7 {
			rs = append(rs, record.Record{Key: []byte("acct"), Value: []byte(fmt.Sprint("v", j))})
		}
		if _, err := e.parts[0].Append(context.Background(), rs); err != nil {
			t.Fatal(err)
		}
	}
	var reads int
	src := KeyOf(countingSource{Source: Local(e.parts[0]), reads: &reads}, e.parts[0], []byte("acct"))
	s := newSink()
	s.stopAfter = 6
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.cancel = cancel
	cs := e.resolve(cursor.Start{Kind: cursor.Earliest}, cursor.Stop{Kind: cursor.Follow})
	done := make(chan error, 1)
	go func() { done <- Run(ctx, topicID, []Source{src}, cs, Options{Key: []byte("acct")}, s) }()
	s.waitRecords(t, 4, done)
	if reads != 4 {
		t.Fatalf("%d batches read for 4 records of the key in 200 batches", reads)
	}
	// Live: the next records of the key arrive, others do not.
	for j := range 2 {
		if _, err := e.parts[0].Append(context.Background(), []record.Record{{Key: []byte("noise"), Value: []byte("n")}, {Key: []byte("acct"), Value: []byte(fmt.Sprint("live", j))}}); err != nil {
			t.Fatal(err)
		}
	}
	s.waitRecords(t, 6, done)
	var got []string
	for _, ev := range s.snapshot() {
		for _, r := range ev.GetRecords().GetRecords() {
			if string(r.GetKey()) != "acct" || r.KeyVersion == nil {
				t.Fatalf("delivered %q without its version (%v)", r.GetKey(), r.KeyVersion)
			}
			got = append(got, fmt.Sprintf("%s@%d", r.GetValue(), r.GetKeyVersion()))
		}
	}
	if want := "[v7@0 v57@1 v107@2 v157@3 live0@4 live1@5]"; fmt.Sprint(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
}
