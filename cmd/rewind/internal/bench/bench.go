// Package bench is the load generator behind `rewind bench`: publish
// throughput and latency, replay throughput, and time to first record of a
// timestamp seek. It prints human-readable figures and RESULT lines in the
// format of the peer baseline scripts (shared/peers), so both tabulate side
// by side.
package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
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
						msgs[i].Key = fmt.Appendf(nil, "k%d", (p*perPub+n+i)%10000)
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
		Extra: map[string]float64{"batch": float64(o.Batch), "publishers": float64(o.Publishers), "partitions": float64(o.Partitions)},
	}, nil
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

// Latency publishes one record of size bytes every 1/rate seconds for d, open
// loop (a slow answer never delays the next send), and measures each
// publish from send to durable acknowledgement.
func Latency(ctx context.Context, c *client.Client, topic string, rate int, d time.Duration, size int) (Report, error) {
	if err := EnsureTopic(ctx, c, topic, 1); err != nil {
		return Report{}, err
	}
	payload := make([]byte, size)
	rand.Read(payload)
	interval := time.Second / time.Duration(max(rate, 1))
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
		errs = make(chan error, 1)
	)
	start := time.Now()
	next := start
	n := 0
	for time.Since(start) < d {
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		next = next.Add(interval)
		n++
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if _, err := c.Publish(ctx, topic, client.Message{Value: payload}); err != nil {
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
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return Report{}, err
	default:
	}
	elapsed := time.Since(start)
	return Report{
		Case: "rewind-lat", Latencies: lats,
		Extra: map[string]float64{"achieved_rate": float64(len(lats)) / elapsed.Seconds()},
	}, nil
}
