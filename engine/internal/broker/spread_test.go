package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/record"
)

// partitionCounts returns how many records each partition of topic holds.
func partitionCounts(t *testing.T, b *Broker, topic string) []uint64 {
	t.Helper()
	_, parts, err := b.DescribeTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(parts))
	for i, p := range parts {
		out[i] = p.State.Next - p.State.LogStart
	}
	return out
}

// checkEven fails unless every count is within ±10% of their mean.
func checkEven(t *testing.T, what string, counts []uint64) {
	t.Helper()
	var sum uint64
	for _, c := range counts {
		sum += c
	}
	mean := float64(sum) / float64(len(counts))
	for p, c := range counts {
		if d := float64(c) - mean; d > mean/10 || -d > mean/10 {
			t.Errorf("%s: partition %d holds %d records, the mean is %.0f (counts %v): want all within ±10%%", what, p, c, mean, counts)
			return
		}
	}
	t.Logf("%s: %v", what, counts)
}

// seqLines returns the lines from..to-1 as `seq` prints them, as keyless
// records.
func seqLines(from, to int) []PublishRecord {
	out := make([]PublishRecord, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, PublishRecord{Record: record.Record{Value: fmt.Appendf(nil, "%d", i)}})
	}
	return out
}

// TestKeylessRecordsSpreadEvenly publishes keyless records in the patterns
// of issue 28 into topics of 4 partitions, and checks that every
// partition holds its share within ±10%: 4,000 one-record requests (one
// `rewind publish` per line), requests in the CLI's pattern for lines
// that arrive while a request is out (one line, then the 8 that queued
// meanwhile; 9 lines gave 1, 8 and 0 records), and 300,000 lines in
// requests of 1,000 (the CLI's largest; each is two runs, 16 KiB and the
// rest, and the rest always fell on the same partitions: 41k, 109k, 41k,
// 109k).
func TestKeylessRecordsSpreadEvenly(t *testing.T) {
	b := open(t, vfs.NewMem())
	defer b.Close()
	ctx := context.Background()
	cases := []struct {
		name       string
		partitions uint32
		requests   func(yield func([]PublishRecord) bool)
	}{
		{"4000 one-line requests", 4, func(yield func([]PublishRecord) bool) {
			for i := range 4000 {
				if !yield(seqLines(i+1, i+2)) {
					return
				}
			}
		}},
		{"lines arriving while a request is out", 4, func(yield func([]PublishRecord) bool) {
			for i := 0; i < 3000; i += 9 {
				if !yield(seqLines(i+1, i+2)) || !yield(seqLines(i+2, i+10)) {
					return
				}
			}
		}},
		{"300000 lines in requests of 1000", 4, func(yield func([]PublishRecord) bool) {
			for i := 0; i < 300_000; i += 1000 {
				if !yield(seqLines(i+1, i+1001)) {
					return
				}
			}
		}},
	}
	for k, c := range cases {
		topic := fmt.Sprintf("t%d", k)
		if _, err := b.CreateTopic(ctx, TopicSpec{Name: topic, Partitions: c.partitions}); err != nil {
			t.Fatal(err)
		}
		for recs := range c.requests {
			if _, _, err := b.Publish(ctx, topic, recs); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		checkEven(t, c.name, partitionCounts(t, b, topic))
	}
}

// TestSpreaderBound checks the spreader's invariant on random runs (seeded,
// the seed logged): the bytes given to any two partitions never differ by
// more than stickyBytes plus the largest record, including after a growth.
func TestSpreaderBound(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const maxRecord = 1 << 20
	check := func(s *spreader, step int) {
		lo, hi := slices.Min(s.mu.given), slices.Max(s.mu.given)
		if hi-lo > stickyBytes+maxRecord {
			t.Fatalf("step %d: given %v: spread %d, over %d", step, s.mu.given, hi-lo, stickyBytes+maxRecord)
		}
	}
	s := newSpreader(1 + rng.Uint32N(16))
	for step := range 20_000 {
		runs := make([]uint64, 1+rng.IntN(8))
		for i := range runs {
			runs[i] = 1 + rng.Uint64N(stickyBytes+maxRecord)
		}
		for _, p := range s.place(runs) {
			if int(p) >= len(s.mu.given) {
				t.Fatalf("step %d: partition %d of %d", step, p, len(s.mu.given))
			}
		}
		check(s, step)
		if step%5000 == 4999 {
			s = s.grown(uint32(len(s.mu.given)) + 1 + rng.Uint32N(8))
		}
	}
}
