package runner

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/scenarios/history"
	"github.com/rewind-io/rewind/sdk/client"
)

// recorder collects the history as the workload goes; safe for concurrent
// use.
type recorder struct {
	mu sync.Mutex
	h  *history.History
	// acked are the acknowledged publishes' positions, for replays that
	// start at a known record.
	acked []ackedRecord
	// followed is, by partition, the next offset its follower expects.
	followed map[uint32]uint64
}

func (r *recorder) followedTo(p uint32, next uint64) {
	r.mu.Lock()
	if r.followed == nil {
		r.followed = map[uint32]uint64{}
	}
	r.followed[p] = next
	r.mu.Unlock()
}

// followedAll reports whether every partition's follower has read up to
// ends.
func (r *recorder) followedAll(ends map[uint32]uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, e := range ends {
		if r.followed[p] < e {
			return false
		}
	}
	return true
}

type ackedRecord struct {
	partition  uint32
	offset     uint64
	id         string
	appendTime time.Time
}

func (r *recorder) publish(p history.Publish, appendTime time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Publishes = append(r.h.Publishes, p)
	if p.Outcome == history.Acked && !p.Duplicate {
		r.acked = append(r.acked, ackedRecord{partition: p.Partition, offset: p.Offset, id: p.MessageID, appendTime: appendTime})
	}
}

// appendLocked appends v to the history's slice *dst under r's lock.
func appendLocked[T any](r *recorder, dst *[]T, v T) {
	r.mu.Lock()
	*dst = append(*dst, v)
	r.mu.Unlock()
}

func (r *recorder) read(rd history.Read)       { appendLocked(r, &r.h.Reads, rd) }
func (r *recorder) follow(f history.Follow)    { appendLocked(r, &r.h.Follows, f) }
func (r *recorder) group(e history.GroupEvent) { appendLocked(r, &r.h.Groups, e) }
func (r *recorder) leader(o history.LeaderObs) { appendLocked(r, &r.h.Leaders, o) }
func (r *recorder) probe(p history.Probe)      { appendLocked(r, &r.h.Probes, p) }
func (r *recorder) fault(f history.Fault)      { appendLocked(r, &r.h.Faults, f) }

// node records a member added during the run.
func (r *recorder) node(id uint64) { appendLocked(r, &r.h.Nodes, id) }

// someAcked picks an acknowledged record of partition p (ok false: none
// yet).
func (r *recorder) someAcked(rng *rand.Rand, p uint32) (ackedRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var in []ackedRecord
	for _, a := range r.acked {
		if a.partition == p {
			in = append(in, a)
		}
	}
	if len(in) == 0 {
		return ackedRecord{}, false
	}
	return in[rng.IntN(len(in))], true
}

// notStored reports whether err certainly stored nothing: the node said
// so (Rewind-Not-Stored), refused the request as invalid, or could not be
// reached at all.
func notStored(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code() {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition:
		return true
	case connect.CodeUnavailable:
		return ce.Meta().Get("Rewind-Not-Stored") != ""
	}
	return false
}

// publisher sends one record at a time to partition id%partitions of
// topic through c, each with a unique idempotency key, retrying a call
// that failed (the same request; callFor bounds each) for up to retryFor;
// it records every record's
// outcome. The partition is named rather than left to the key's hash so
// that publishers cover every partition (the liveness checker measures
// each partition's failover).
func publisher(ctx context.Context, c sender, callFor time.Duration, rec *recorder, topic string, partitions uint32, id int, rate float64, valueBytes int, retryFor time.Duration) {
	key := fmt.Sprintf("pub-%d", id)
	part := uint32(id) % max(partitions, 1)
	next := time.Now()
	for seq := 0; ctx.Err() == nil; seq++ {
		if rate > 0 {
			next = next.Add(time.Duration(float64(time.Second) / rate))
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		name := fmt.Sprintf("pub-%d-%d", id, seq)
		v := name
		if len(v) < valueBytes {
			v += "." + strings.Repeat("x", valueBytes-len(v)-1) // unique: the name comes first
		}
		p := history.Publish{Publisher: id, Seq: seq, Topic: topic, Key: key, IdemKey: name, Value: compact(v), Start: time.Now()}
		msg := client.Message{Key: []byte(key), Value: []byte(v), IdempotencyKey: name, Partition: &part}
		stored := false // some attempt may have stored it
		var at time.Time
		backoff := 20 * time.Millisecond
		for {
			p.Attempts++
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callFor)
			r, err := c.send(actx, topic, msg)
			cancel()
			if err == nil {
				p.Outcome, p.Partition, p.Offset, p.MessageID, p.Duplicate, p.Err = history.Acked, r.Partition, r.Offset, r.MessageID, r.Duplicate, ""
				at = r.AppendTime
				break
			}
			p.Err = err.Error()
			if len(p.Failures) < 8 {
				p.Failures = append(p.Failures, fmt.Sprintf("+%s %s", time.Since(p.Start).Round(time.Millisecond), p.Err))
			}
			if !notStored(err) {
				stored = true
			}
			if time.Since(p.Start) > retryFor || ctx.Err() != nil {
				p.Outcome = history.Failed
				if stored {
					p.Outcome = history.Unknown
				}
				break
			}
			time.Sleep(backoff) // between attempts
			backoff = min(2*backoff, 500*time.Millisecond)
		}
		p.End = time.Now()
		rec.publish(p, at)
		if p.Outcome == history.Acked && seq%resendEvery == resendEvery-1 {
			// A deliberate duplicate: the same record again, as a client
			// that lost the answer would send it. It must come back as a
			// duplicate of the first (the log checker holds it to that).
			resend(ctx, c, callFor, rec, topic, p, msg)
		}
	}
}

// resendEvery: every resendEvery-th acknowledged record is sent again.
const resendEvery = 10

// resend publishes msg (acknowledged as first) once more and records the
// answer as a publish of its own.
func resend(ctx context.Context, c sender, callFor time.Duration, rec *recorder, topic string, first history.Publish, msg client.Message) {
	p := first
	p.Start, p.Attempts, p.Err = time.Now(), 1, ""
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callFor)
	r, err := c.send(actx, topic, msg)
	cancel()
	p.End = time.Now()
	if err != nil {
		return // not answered: it tells nothing
	}
	p.Outcome, p.Partition, p.Offset, p.MessageID, p.Duplicate = history.Acked, r.Partition, r.Offset, r.MessageID, r.Duplicate
	rec.publish(p, r.AppendTime)
}

// recordOf turns a delivered record into the history's.
func recordOf(r client.Record) history.Record {
	return history.Record{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: compact(string(r.Value)), IdemKey: r.IdempotencyKey,
		AppendTime: r.AppendTime, KeyVersion: r.KeyVersion}
}

// compact keeps a long value short in the history: its first 32 bytes and
// a SHA-256 of the whole, so that equal values stay equal and any changed
// byte shows (the history of a run with large records stays small).
func compact(v string) string {
	if len(v) <= 96 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return fmt.Sprintf("%s…(%d bytes, sha256 %x)", v[:32], len(v), sum[:12])
}

// follower follows partition p of topic live from offset 0 until ctx
// ends, across reconnects, and every resumeEvery (0: never) drops its
// stream as a crashing consumer would and resumes from its last resume
// token.
func follower(ctx context.Context, c *client.Client, rec *recorder, topic string, p uint32, name string, resumeEvery time.Duration) {
	f := history.Follow{Follower: name, Topic: topic, Partition: p}
	defer func() { rec.follow(f) }()
	from := client.Offset(0)
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		if resumeEvery > 0 {
			t := time.AfterFunc(resumeEvery, cancel)
			defer t.Stop()
		}
		tok, err := followOnce(sctx, c, rec, topic, p, from, &f)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil && sctx.Err() == nil {
			f.Err = err.Error()
			return
		}
		if tok == "" {
			continue // nothing read yet: from the start again
		}
		from = client.ResumeToken(tok)
		f.Reconnects++
	}
}

// followOnce reads one stream of a follower until it ends, and returns the
// resume token after the last record it recorded.
func followOnce(ctx context.Context, c *client.Client, rec *recorder, topic string, p uint32, from client.Position, f *history.Follow) (string, error) {
	tok := ""
	sub, err := c.Subscribe(ctx, topic, client.Partitions(p), client.From(from), client.ReconnectWithin(5*time.Minute))
	if err != nil {
		return tok, err
	}
	defer sub.Close()
	for sub.Next() {
		switch ev := sub.Event().(type) {
		case *client.Started:
			tok = ev.ResumeToken
		case *client.Records:
			for _, r := range ev.Records {
				f.Records = append(f.Records, recordOf(r))
			}
			if n := len(ev.Records); n > 0 {
				rec.followedTo(p, ev.Records[n-1].Offset+1)
				tok = ev.ResumeToken
			}
		case *client.Reconnected:
			f.Reconnects++
		}
	}
	return tok, sub.Err()
}

// replayer loops bounded replays of random partitions of topic from random
// positions until ctx ends.
func replayer(ctx context.Context, c *client.Client, rec *recorder, topic string, partitions uint32, name string, rng *rand.Rand, filter string, publishers int) {
	for ctx.Err() == nil {
		p := uint32(rng.IntN(int(partitions)))
		rd := history.Read{Reader: name, Topic: topic, Partition: p, Start: time.Now()}
		_, infos, err := c.DescribeTopic(ctx, topic)
		if err != nil || int(p) >= len(infos) {
			time.Sleep(100 * time.Millisecond) // the cluster may be electing
			continue
		}
		rd.EndAtStart = infos[p].EndOffset
		from, first, ok := randomStart(rng, rec, p, infos[p], &rd)
		if !ok {
			time.Sleep(100 * time.Millisecond) // nothing acknowledged there yet
			continue
		}
		until := client.End()
		switch {
		case rd.EndAtStart > first+maxReplayRecords:
			// A long history: a bounded range keeps the run's record
			// (and the checkers' work) small.
			stop := first + 1 + uint64(rng.Int64N(maxReplayRecords))
			rd.To = history.Position{Kind: history.AtOffset, Offset: stop}
			until = client.Offset(stop)
		case rng.IntN(3) == 0 && rd.EndAtStart > 0:
			// A bounded range: stop before a random offset.
			stop := uint64(rng.Int64N(int64(rd.EndAtStart) + 1))
			rd.To = history.Position{Kind: history.AtOffset, Offset: stop}
			until = client.Offset(stop)
		}
		opts := []client.SubscribeOption{client.Partitions(p), client.From(from), client.Until(until), client.ReconnectWithin(20 * time.Second)}
		if filter != "" && publishers > 0 && rng.IntN(3) == 0 {
			prefix := fmt.Sprintf("pub-%d", rng.IntN(publishers))
			switch filter {
			case "key-prefix":
				name, config, _ := keyPrefixFilter(prefix)
				rd.Filter = name
				opts = append(opts, client.Filter(keyPrefixPlugin, config))
			case "tag-transform":
				name, config, _ := tagTransform(prefix)
				rd.Filter = name
				opts = append(opts, client.Filter(tagTransformPlugin, config))
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		sub, err := c.Subscribe(rctx, topic, opts...)
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return
			}
			rd.Err = err.Error()
			rd.End = time.Now()
			rec.read(rd)
			continue
		}
		for r, err := range sub.Records() {
			if err != nil {
				rd.Err = err.Error()
				break
			}
			rd.Records = append(rd.Records, recordOf(r))
		}
		sub.Close()
		cancel()
		if ctx.Err() != nil {
			return // cut short by the end of the run: not a result
		}
		rd.End = time.Now()
		rec.read(rd)
		select { // the next replay, after a pause
		case <-ctx.Done():
		case <-time.After(replayPause):
		}
	}
}

// A replay reads at most maxReplayRecords (a bounded range past that),
// and replays follow each other replayPause apart: enough reads to cover
// every kind of position many times, few enough to keep the history
// small.
const (
	maxReplayRecords = 400
	replayPause      = 200 * time.Millisecond
)

// randomStart picks where a replay of partition p starts, and the offset
// that is (at most: a time seek may land earlier).
func randomStart(rng *rand.Rand, rec *recorder, p uint32, info client.PartitionInfo, rd *history.Read) (client.Position, uint64, bool) {
	switch rng.IntN(5) {
	case 0:
		rd.From = history.Position{Kind: history.Earliest}
		return client.Earliest(), info.LogStartOffset, true
	case 1:
		n := uint64(rng.IntN(50) + 1)
		rd.From = history.Position{Kind: history.LastN, N: n}
		return client.RecordsBack(n), info.EndOffset - min(n, info.EndOffset), true
	case 2:
		a, ok := rec.someAcked(rng, p)
		if !ok {
			return client.Position{}, 0, false
		}
		rd.From = history.Position{Kind: history.AtMessageID, ID: a.id, Offset: a.offset}
		return client.MessageID(a.id), a.offset, true
	case 3:
		a, ok := rec.someAcked(rng, p)
		if !ok || a.appendTime.IsZero() {
			return client.Position{}, 0, false
		}
		rd.From = history.Position{Kind: history.AtTime, Time: a.appendTime}
		return client.Time(a.appendTime), a.offset, true
	default:
		off := info.LogStartOffset
		if info.EndOffset > info.LogStartOffset {
			off += uint64(rng.Int64N(int64(info.EndOffset - info.LogStartOffset)))
		}
		rd.From = history.Position{Kind: history.AtOffset, Offset: off}
		return client.Offset(off), off, true
	}
}
