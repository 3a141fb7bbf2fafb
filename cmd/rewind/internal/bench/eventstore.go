package bench

// The event store's questions, asked the way the PostgreSQL peer
// (shared/peers/probe pg-fill, pg-load, pg-append, pg-dcb) asks them, so
// the figures compare:
//
//   - Fill: keyed publishes, N records over N/20 keys round robin (a key's
//     20 records are spread over the whole history, as pg-fill spreads a
//     stream's), in big batches.
//   - Load: one key's whole history through the key index, again and again.
//   - Append: load-decide-append. Read a random key's head, append one
//     record expecting that version; a refusal is a conflict, counted, and
//     the writer reads again and retries until its append is stored.
//   - DCB: query a random tag (one record and the partition's position),
//     append a record carrying the tag only if no record with the tag came
//     after that position (FailIfMatched); a refusal is a conflict, retried
//     the same way.
//
// Every append is a durable conditional append (acknowledged after the
// raft entry is fsynced), one record per request, like the peer's one
// INSERT per transaction.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rewind-io/rewind/sdk/client"
)

// appendValue is the payload of every conditional append: the peer's
// '{"n":1}'.
var appendValue = []byte(`{"n":1}`)

// FillOptions configure EventStoreFill.
type FillOptions struct {
	Topic        string
	Events       int    // records to publish
	EventsPerKey int    // records per key (default 20): Events/EventsPerKey keys
	Size         int    // value bytes
	Partitions   uint32 // when the topic is created
	Batch        int    // records per request
	Publishers   int    // concurrent publishers, one request in flight each
}

// EventStoreFill publishes o.Events keyed records over
// o.Events/o.EventsPerKey keys ("k0", "k1", ..., round robin): the history
// EventStoreLoad reads from.
func EventStoreFill(ctx context.Context, c *client.Client, o FillOptions) (Report, error) {
	per := max(o.EventsPerKey, 1)
	if o.Events < per {
		return Report{}, fmt.Errorf("%d events cannot make one key of %d", o.Events, per)
	}
	r, err := Publish(ctx, c, PublishOptions{
		Topic: o.Topic, Records: o.Events, Size: o.Size, Partitions: o.Partitions,
		Batch: o.Batch, Publishers: o.Publishers, Keys: true, KeyCount: o.Events / per,
	})
	r.Case = "rewind-es-fill"
	return r, err
}

// EventStoreLoad reads key's whole history from topic iters times, one
// read at a time, and times each. The report's Extra holds the records
// each load returned ("events"); a key without records is an error, so
// nothing is measured that loads nothing.
func EventStoreLoad(ctx context.Context, c *client.Client, topic, key string, iters int) (Report, error) {
	r := Report{Case: "rewind-es-load", Latencies: make([]time.Duration, 0, iters)}
	events := -1
	for range iters {
		t0 := time.Now()
		res, err := c.ReadKey(ctx, topic, []byte(key))
		if err != nil {
			return Report{}, err
		}
		r.Latencies = append(r.Latencies, time.Since(t0))
		if len(res.Records) == 0 {
			return Report{}, fmt.Errorf("key %q of topic %q has no records", key, topic)
		}
		if events >= 0 && len(res.Records) != events {
			return Report{}, fmt.Errorf("key %q: %d records, then %d (is something appending?)", key, events, len(res.Records))
		}
		events = len(res.Records)
		if res.More {
			return Report{}, fmt.Errorf("key %q holds more than one read returns (%d)", key, events)
		}
	}
	r.Extra = map[string]float64{"events": float64(events), "iters": float64(iters)}
	return r, nil
}

// AppendOptions configure EventStoreAppend and EventStoreDCB.
type AppendOptions struct {
	Topic      string
	Partitions uint32 // when the topic is created
	Writers    int    // concurrent writers, one request in flight each
	// Keys (EventStoreAppend) or Tags (EventStoreDCB) is how many
	// entities or tags the writers pick from at random: fewer, more
	// conflicts.
	Keys, Tags int
	Duration   time.Duration
	Seed       uint64 // writer w draws from a generator seeded (Seed, w)
	// QueryLast (EventStoreDCB) reads the tag's last record (LastN(1))
	// rather than its first (Limit(1)). Either read returns the position
	// the condition needs; the last is found reading the tag index
	// backward (before that fix, by reading every match: this read slowed
	// as the tag's history grew, docs/benchmarks.md).
	QueryLast bool
}

// appendLoop runs o.Writers writers for o.Duration; each calls op with its
// own generator until the time is up. op returns the conflicts it met
// before its append was stored, or an error: counted as a failure, and the
// first kept. The report counts stored appends as Records and times each
// from its first read to its acknowledgement, retries included.
func appendLoop(ctx context.Context, o AppendOptions, op func(r *rand.Rand) (conflicts int, err error)) (Report, error) {
	var (
		appended, conflicts, failed atomic.Int64
		mu                          sync.Mutex
		lats                        []time.Duration
		firstErr                    error
		wg                          sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(o.Duration)
	for w := range max(o.Writers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(o.Seed, uint64(w)))
			var mine []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				n, err := op(r)
				conflicts.Add(int64(n))
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				appended.Add(1)
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	a, cf := appended.Load(), conflicts.Load()
	rep := Report{
		Records: uint64(a), Elapsed: elapsed, Latencies: lats,
		Extra: map[string]float64{
			"writers": float64(o.Writers), "partitions": float64(o.Partitions),
			"conflicts": float64(cf), "conflict_rate": float64(cf) / float64(max(a+cf, 1)),
			"failed": float64(failed.Load()),
		},
	}
	if firstErr != nil {
		// Reported with the figures: a run with failures is no measurement.
		return rep, fmt.Errorf("%d appends failed, the first: %w", failed.Load(), firstErr)
	}
	return rep, nil
}

// EventStoreAppend measures load-decide-append over o.Keys keys ("w0",
// "w1", ...): each writer picks a key at random, reads its head
// (ReadKey, last record only), and appends one record with ExpectVersion
// of it (ExpectNone for a new key), reading again after each refusal.
func EventStoreAppend(ctx context.Context, c *client.Client, o AppendOptions) (Report, error) {
	if err := EnsureTopic(ctx, c, o.Topic, o.Partitions); err != nil {
		return Report{}, err
	}
	msg := []client.Message{{Value: appendValue, Type: "e"}}
	rep, err := appendLoop(ctx, o, func(r *rand.Rand) (int, error) {
		key := fmt.Appendf(nil, "w%d", r.IntN(max(o.Keys, 1)))
		for conflicts := 0; ; conflicts++ {
			head, err := c.ReadKey(ctx, o.Topic, key, client.LastN(1))
			if err != nil {
				return conflicts, err
			}
			_, err = c.Append(ctx, o.Topic, key, msg, head.Expect())
			var ce *client.ConditionError
			if !errors.As(err, &ce) {
				return conflicts, err
			}
		}
	})
	rep.Case = "rewind-es-append"
	if rep.Extra != nil {
		rep.Extra["keys"] = float64(o.Keys)
	}
	return rep, err
}

// EventStoreDCB measures tag-conditioned appends (dynamic consistency
// boundaries) over o.Tags tags ("t:0", "t:1", ...): each writer picks a
// tag at random, queries it (one record, and the position), and appends
// one record carrying the tag under a new key with FailIfMatched(the tag,
// that position), querying again after each refusal. Tag i lives in
// partition i mod the topic's partitions (queries and conditions are per
// partition): the record names its partition.
func EventStoreDCB(ctx context.Context, c *client.Client, o AppendOptions) (Report, error) {
	if err := EnsureTopic(ctx, c, o.Topic, o.Partitions); err != nil {
		return Report{}, err
	}
	_, parts, err := c.DescribeTopic(ctx, o.Topic)
	if err != nil {
		return Report{}, err
	}
	read := client.Limit(1)
	if o.QueryLast {
		read = client.LastN(1)
	}
	var seq atomic.Uint64
	run := time.Now().UnixNano() // keys stay new across runs on one topic
	rep, err := appendLoop(ctx, o, func(r *rand.Rand) (int, error) {
		t := r.IntN(max(o.Tags, 1))
		p := uint32(t % len(parts))
		tag := fmt.Sprintf("t:%d", t)
		q := client.Query{{Tags: []string{tag}}}
		msg := []client.Message{{Value: appendValue, Type: "e", Tags: []string{tag}, Partition: &p}}
		key := fmt.Appendf(nil, "dcb-%d-%d", run, seq.Add(1))
		for conflicts := 0; ; conflicts++ {
			res, err := c.Query(ctx, o.Topic, q, client.InPartition(p), read)
			if err != nil {
				return conflicts, err
			}
			var after *uint64
			if res.HasPosition {
				after = &res.Position
			}
			_, err = c.Append(ctx, o.Topic, key, msg, client.FailIfMatched(q, after))
			var ce *client.ConditionError
			if !errors.As(err, &ce) {
				return conflicts, err
			}
		}
	})
	rep.Case = "rewind-es-dcb"
	if rep.Extra != nil {
		rep.Extra["tags"] = float64(o.Tags)
	}
	return rep, err
}
