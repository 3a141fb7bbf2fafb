// Package bench is the load generator behind `rewind bench`: publish
// throughput and latency, replay throughput, time to first record of a
// timestamp seek, and the event store's questions (eventstore.go: load an
// entity, conditional and tag-conditioned appends). It prints human-readable figures and RESULT lines in the
// format of the peer baseline scripts (shared/peers), so both tabulate side
// by side.
package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
)

// Report is one measured run.
type Report struct {
	Case      string
	Records   uint64
	Bytes     uint64
	Elapsed   time.Duration
	Latencies []time.Duration // per request (publish) or per measurement
	Extra     map[string]float64
}

// RecordsPerSec returns the throughput in records per second.
func (r Report) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// MiBPerSec returns the throughput in MiB per second.
func (r Report) MiBPerSec() float64 { return float64(r.Bytes) / (1 << 20) / r.Elapsed.Seconds() }

// Percentile returns the q-quantile (0..1) of the latencies.
func (r Report) Percentile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	l := slices.Clone(r.Latencies)
	slices.Sort(l)
	i := int(q * float64(len(l)-1))
	return l[i]
}

// Print writes a human summary and a RESULT line.
func (r Report) Print(w io.Writer, rep int) {
	fmt.Fprintf(w, "%s:", r.Case)
	if r.Records > 0 && r.Elapsed > 0 {
		fmt.Fprintf(w, " %d records in %s: %.0f records/s, %.1f MiB/s", r.Records, r.Elapsed.Round(time.Millisecond), r.RecordsPerSec(), r.MiBPerSec())
	}
	if len(r.Latencies) > 0 {
		fmt.Fprintf(w, " latency (n=%d) p50 %s p99 %s p99.9 %s max %s", len(r.Latencies), ms(r.Percentile(0.5)), ms(r.Percentile(0.99)), ms(r.Percentile(0.999)), ms(r.Percentile(1)))
	}
	fmt.Fprintln(w)
	var kv []string
	if r.Records > 0 && r.Elapsed > 0 {
		kv = append(kv, fmt.Sprintf("msgs_per_s=%.0f", r.RecordsPerSec()), fmt.Sprintf("MiB_per_s=%.2f", r.MiBPerSec()))
	}
	if len(r.Latencies) > 0 {
		kv = append(kv, fmt.Sprintf("p50_ms=%.3f", msf(r.Percentile(0.5))), fmt.Sprintf("p99_ms=%.3f", msf(r.Percentile(0.99))),
			fmt.Sprintf("p999_ms=%.3f", msf(r.Percentile(0.999))), fmt.Sprintf("max_ms=%.3f", msf(r.Percentile(1))))
	}
	keys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kv = append(kv, fmt.Sprintf("%s=%g", k, r.Extra[k]))
	}
	fmt.Fprintf(w, "RESULT case=%s kind=rewind_bench rep=%d %s\n", r.Case, rep, strings.Join(kv, " "))
}

func ms(d time.Duration) string   { return fmt.Sprintf("%.3fms", msf(d)) }
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// PublishOptions configure Publish.
type PublishOptions struct {
	Topic      string
	Records    int
	Size       int
	Partitions uint32
	Batch      int // records per request
	Publishers int // concurrent publishers, each with one request in flight
	Keys       bool
	// KeyCount is the number of distinct keys with Keys (default 10,000):
	// record i gets key "k<i mod KeyCount>", so a key's records are spread
	// evenly over the whole run.
	KeyCount int
}

// EnsureTopic creates the topic if it does not exist.
func EnsureTopic(ctx context.Context, c *client.Client, name string, partitions uint32) error {
	_, err := c.CreateTopic(ctx, name, client.WithPartitions(partitions))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return nil
	}
	return err
}

// Publish sends o.Records records of o.Size random bytes with o.Publishers
// concurrent publishers, each sending requests of o.Batch records one at a
// time, and measures request latency (send to durable acknowledgement).
func Publish(ctx context.Context, c *client.Client, o PublishOptions) (Report, error) {
	if err := EnsureTopic(ctx, c, o.Topic, o.Partitions); err != nil {
		return Report{}, err
	}
	payload := make([]byte, o.Size)
	rand.Read(payload)
	perPub := (o.Records + o.Publishers - 1) / o.Publishers
	keyCount := o.KeyCount
	if keyCount <= 0 {
		keyCount = 10_000
	}
	var (
		mu   sync.Mutex
		lats []time.Duration
		sent uint64
		wg   sync.WaitGroup
		errs = make(chan error, o.Publishers)
	)
	start := time.Now()
	for p := range o.Publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := make([]client.Message, o.Batch)
			for i := range msgs {
				msgs[i].Value = payload
			}
			var local []time.Duration
			n := 0
			for n < perPub && n+p*perPub < o.Records {
				k := min(o.Batch, perPub-n, o.Records-p*perPub-n)
				if o.Keys {
					for i := range k {
						msgs[i].Key = fmt.Appendf(nil, "k%d", (p*perPub+n+i)%keyCount)
					}
				}
				t0 := time.Now()
				if _, err := c.Publish(ctx, o.Topic, msgs[:k]...); err != nil {
					errs <- err
					return
				}
				local = append(local, time.Since(t0))
				n += k
			}
			mu.Lock()
			lats = append(lats, local...)
			sent += uint64(n)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return Report{}, err
	default:
	}
	return Report{
		Case: fmt.Sprintf("rewind-pub-%dB", o.Size), Records: sent, Bytes: sent * uint64(o.Size),
		Elapsed: elapsed, Latencies: lats,
		Extra: publishExtra(o),
	}, nil
}

func publishExtra(o PublishOptions) map[string]float64 {
	e := map[string]float64{"batch": float64(o.Batch), "publishers": float64(o.Publishers), "partitions": float64(o.Partitions)}
	if o.Keys {
		e["keys"] = float64(cmp.Or(o.KeyCount, 10_000))
	}
	return e
}

// Replay reads the whole topic once from the earliest record to the end as
// of the start, and measures throughput and time to the first record. opts
// add to the subscription (e.g. client.FollowerReads()).
func Replay(ctx context.Context, c *client.Client, topic string, opts ...client.SubscribeOption) (Report, error) {
	start := time.Now()
	sub, err := c.Subscribe(ctx, topic, append(opts, client.From(client.Earliest()), client.Until(client.End()))...)
	if err != nil {
		return Report{}, err
	}
	defer sub.Close()
	var n, bytes uint64
	var first time.Duration
	for sub.Next() {
		if e, ok := sub.Event().(*client.Records); ok {
			if n == 0 {
				first = time.Since(start)
			}
			n += uint64(len(e.Records))
			for i := range e.Records {
				bytes += uint64(len(e.Records[i].Value))
			}
		}
	}
	if err := sub.Err(); err != nil {
		return Report{}, err
	}
	return Report{
		Case: "rewind-replay", Records: n, Bytes: bytes, Elapsed: time.Since(start),
		Extra: map[string]float64{"first_record_ms": msf(first)},
	}, nil
}

// TTFM measures the time to the first record of a replay that starts at the
// append time of the record in the middle (at fraction at) of partition 0,
// reps times, and checks that the first record is the one expected.
func TTFM(ctx context.Context, c *client.Client, topic string, at float64, reps int) (Report, error) {
	_, parts, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return Report{}, err
	}
	p := parts[0]
	if p.EndOffset == p.LogStartOffset {
		return Report{}, fmt.Errorf("partition 0 of %q is empty", topic)
	}
	mid := p.LogStartOffset + uint64(float64(p.EndOffset-p.LogStartOffset)*at)
	// Read the record there to learn its time.
	sub, err := c.Subscribe(ctx, topic, client.Partitions(0), client.From(client.Offset(mid)), client.Until(client.Offset(mid+1)))
	if err != nil {
		return Report{}, err
	}
	var target client.Record
	for rec, err := range sub.Records() {
		if err != nil {
			return Report{}, err
		}
		target = rec
	}
	sub.Close()
	r := Report{Case: "rewind-ttfm-time"}
	for range reps {
		t0 := time.Now()
		s, err := c.Subscribe(ctx, topic, client.Partitions(0), client.From(client.Time(target.AppendTime)))
		if err != nil {
			return Report{}, err
		}
		var got client.Record
		for rec, err := range s.Records() {
			if err != nil {
				s.Close()
				return Report{}, err
			}
			got = rec
			break
		}
		r.Latencies = append(r.Latencies, time.Since(t0))
		s.Close()
		// The first record at or after the target's time: the first of the
		// target's batch, which may precede the target itself.
		if !got.AppendTime.Equal(target.AppendTime) || got.Offset > target.Offset {
			return Report{}, fmt.Errorf("time seek returned offset %d at %s, want at most %d at %s", got.Offset, got.AppendTime, target.Offset, target.AppendTime)
		}
	}
	r.Extra = map[string]float64{"offset": float64(mid)}
	return r, nil
}

// LatencyOptions configure Latency.
type LatencyOptions struct {
	Topic    string
	Rate     int           // records per second
	Duration time.Duration // how long to publish
	Size     int           // value bytes (at least 8: the record's sequence number)
	// EndToEnd also reads the topic live (from the latest record, as a
	// subscriber that has caught up) and measures each record from its
	// publish to its delivery.
	EndToEnd bool
	// Publishers, when above 0, sends through that many batching
	// publishers (client.Publisher), Rate/Publishers records per second
	// each: a record waits while its publisher's request is out, and goes
	// with the others that queued meanwhile. 0: one request per record.
	Publishers int
}

// Latency publishes one record of o.Size bytes every 1/o.Rate seconds for
// o.Duration, open loop (a slow answer never delays the next send), and
// measures each publish from send to durable acknowledgement. With
// o.EndToEnd it returns a second report: publish to delivery to a live
// subscriber.
func Latency(ctx context.Context, c *client.Client, o LatencyOptions) (ack, e2e Report, err error) {
	if err := EnsureTopic(ctx, c, o.Topic, 1); err != nil {
		return Report{}, Report{}, err
	}
	size := max(o.Size, 8)
	interval := time.Second / time.Duration(max(o.Rate, 1))
	total := int(o.Duration / interval)
	var pubs []*client.Publisher
	for range max(o.Publishers, 0) {
		pubs = append(pubs, c.NewPublisher(o.Topic))
	}
	defer func() {
		for _, p := range pubs {
			p.Close(context.Background())
		}
	}()
	// Send times by sequence number, in Unix nanoseconds; written before the
	// publish, read by the subscriber when the record arrives.
	sent := make([]atomic.Int64, total)
	var sub *client.Subscription
	delivered := make(chan []time.Duration, 1)
	if o.EndToEnd {
		sub, err = c.Subscribe(ctx, o.Topic, client.From(client.Latest()))
		if err != nil {
			return Report{}, Report{}, err
		}
		defer sub.Close()
		// Wait for the stream to be live before the first publish.
		for sub.Next() {
			if _, ok := sub.Event().(*client.CaughtUp); ok {
				break
			}
		}
		go func() {
			var lats []time.Duration
			for sub.Next() {
				e, ok := sub.Event().(*client.Records)
				if !ok {
					continue
				}
				now := time.Now()
				for _, r := range e.Records {
					if len(r.Value) < 8 {
						continue
					}
					if seq := binary.BigEndian.Uint64(r.Value); seq < uint64(total) {
						lats = append(lats, now.Sub(time.Unix(0, sent[seq].Load())))
					}
				}
				if len(lats) >= total {
					break
				}
			}
			delivered <- lats
		}()
	}
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
		errs = make(chan error, 1)
	)
	// publish sends record i, the one way or the other, and times it.
	publish := func(i int, payload []byte, t0 time.Time) {
		done := func(err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			l := time.Since(t0)
			mu.Lock()
			lats = append(lats, l)
			mu.Unlock()
		}
		if o.Publishers <= 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.Publish(ctx, o.Topic, client.Message{Value: payload})
				done(err)
			}()
			return
		}
		pd, err := pubs[i%len(pubs)].Publish(ctx, client.Message{Value: payload})
		if err != nil {
			done(err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := pd.Wait(ctx)
			done(err)
		}()
	}
	start := time.Now()
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		payload := make([]byte, size)
		binary.BigEndian.PutUint64(payload, uint64(i))
		t0 := time.Now()
		sent[i].Store(t0.UnixNano())
		publish(i, payload, t0)
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return Report{}, Report{}, err
	default:
	}
	ack = Report{
		Case: "rewind-lat", Latencies: lats,
		Extra: map[string]float64{"achieved_rate": float64(len(lats)) / elapsed.Seconds()},
	}
	if !o.EndToEnd {
		return ack, Report{}, nil
	}
	if err := ctx.Err(); err != nil {
		return Report{}, Report{}, err // stopped before every record was sent
	}
	select {
	case l := <-delivered:
		e2e = Report{Case: "rewind-e2e", Latencies: l, Extra: map[string]float64{"delivered": float64(len(l))}}
	case <-time.After(30 * time.Second):
		return Report{}, Report{}, fmt.Errorf("live subscriber received fewer than the %d records published within 30 s", total)
	}
	if len(e2e.Latencies) != total {
		return Report{}, Report{}, fmt.Errorf("live subscriber received %d of %d records: %w", len(e2e.Latencies), total, sub.Err())
	}
	return ack, e2e, nil
}

// ReplayLoad replays topic from the earliest record to the end with
// streams concurrent subscriptions, each starting over as soon as it ends,
// until d has passed; the report gives the records all of them received
// per second. opts add to every subscription.
func ReplayLoad(ctx context.Context, c *client.Client, topic string, streams int, d time.Duration, opts ...client.SubscribeOption) (Report, error) {
	// Cancelled by a timer, not a deadline: a deadline travels with each
	// request, and the server would end streams with DeadlineExceeded
	// before the local context noticed.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer time.AfterFunc(d, cancel).Stop()
	var (
		n, full atomic.Uint64
		wg      sync.WaitGroup
		errs    = make(chan error, streams)
	)
	start := time.Now()
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				sub, err := c.Subscribe(ctx, topic, append(opts, client.From(client.Earliest()), client.Until(client.End()))...)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				for sub.Next() {
					if e, ok := sub.Event().(*client.Records); ok {
						n.Add(uint64(len(e.Records)))
					}
				}
				err = sub.Err()
				sub.Close()
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				full.Add(1)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return Report{}, err
	default:
	}
	return Report{
		Case: "rewind-replay-load", Records: n.Load(), Elapsed: time.Since(start),
		Extra: map[string]float64{"streams": float64(streams), "replays_completed": float64(full.Load())},
	}, nil
}
