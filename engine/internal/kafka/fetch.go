package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/stream"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Bounds of a Fetch.
const (
	// maxFetchWait bounds a Fetch's long poll (its MaxWaitMillis).
	maxFetchWait = 30 * time.Second
	// maxPartitionBytes bounds what one partition reads for a Fetch, and
	// the stream's events (a client asking for more gets this much).
	maxPartitionBytes = 8 << 20
)

// errFull ends a partition's stream once it holds its share of a Fetch.
var errFull = errors.New("kafka: fetch partition full")

// fetch answers Fetch; release returns the response's record batches'
// buffers to the pool once it is encoded. Each partition is read by a stream of its own
// (broker.Subscribe from the fetch offset): the stream reads history, then
// follows the live tail, so the long poll (MaxWaitMillis, MinBytes) waits
// on Rewind's tail notifications, never by polling the store. The Fetch
// ends when every partition has caught up or filled its PartitionMaxBytes
// and MinBytes are there, when MaxBytes are there, when a partition fails,
// or at MaxWaitMillis; its streams are then cancelled and waited for.
// Fetch sessions (KIP-227) are not kept: the response's session id is 0,
// which tells clients to send full requests.
func (s *Server) fetch(req *kmsg.FetchRequest) (_ *kmsg.FetchResponse, release func()) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	run := &fetchRun{wake: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			pr := &partRead{run: run, topic: t.Topic, part: p.Partition, offset: p.FetchOffset, hwm: -1, logStart: -1}
			pr.maxBytes = int(min(max(p.PartitionMaxBytes, 1), maxPartitionBytes))
			run.parts = append(run.parts, pr)
			if p.Partition < 0 || p.FetchOffset < 0 {
				pr.fail(&batchError{kerr.OffsetOutOfRange, "negative partition or offset"})
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pr.finish(ctx, s.readError(pr.topic, pr.part, s.b.Subscribe(ctx, broker.SubscribeParams{
					Topic:      pr.topic,
					Partitions: []uint32{uint32(pr.part)},
					Start:      cursor.Start{Kind: cursor.AtOffset, Offset: uint64(pr.offset)},
					ClientName: "kafka",
					Options:    stream.Options{MaxEventBytes: pr.maxBytes},
				}, pr)))
			}()
		}
	}
	wait := time.Duration(min(max(req.MaxWaitMillis, 0), int32(maxFetchWait/time.Millisecond))) * time.Millisecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for !run.done(int(req.MinBytes), int(req.MaxBytes)) {
		select {
		case <-run.wake:
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		break
	}
	cancel()
	wg.Wait()
	return run.response(int(req.MaxBytes)), run.release
}

// release returns every partition's buffer to the pool.
func (f *fetchRun) release() {
	for _, pr := range f.parts {
		pr.w.release()
	}
}

// readError names a partition the topic lacks, which the broker calls
// invalid, as UNKNOWN_TOPIC_OR_PARTITION.
func (s *Server) readError(topic string, p int32, err error) error {
	if errors.Is(err, broker.ErrInvalid) {
		return partitionError(s.b, topic, p, err)
	}
	return err
}

// fetchRun is one Fetch's partitions and the signal they share.
type fetchRun struct {
	parts []*partRead
	// wake is signalled (never blocking) whenever a partition changes.
	wake chan struct{}
}

func (f *fetchRun) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// done reports whether the Fetch can be answered now.
func (f *fetchRun) done(minBytes, maxBytes int) bool {
	total, settled := 0, true
	for _, pr := range f.parts {
		pr.mu.Lock()
		total += pr.w.size()
		if pr.err != nil {
			pr.mu.Unlock()
			return true
		}
		settled = settled && pr.settled
		pr.mu.Unlock()
	}
	return (settled && total >= minBytes) || (maxBytes > 0 && total >= maxBytes)
}

// response assembles the answer from partitions whose streams have ended.
// Partitions keep their batches in request order until MaxBytes is
// passed (the first non-empty partition always keeps its batches, as
// Kafka returns at least one batch); the rest come back empty, to be
// fetched again from the same offsets.
func (f *fetchRun) response(maxBytes int) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	total := 0
	for _, pr := range f.parts {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != pr.topic {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = pr.topic
			resp.Topics = append(resp.Topics, rt)
		}
		rt := &resp.Topics[len(resp.Topics)-1]
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = pr.part
		// Empty, not null: librdkafka refuses a null record set
		// ("invalid MessageSetSize -1"), as Kafka never sends one.
		rp.RecordBatches = []byte{}
		if pr.err != nil {
			rp.ErrorCode = codeOf(pr.err)
		} else {
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = pr.hwm, pr.hwm, pr.logStart
			if b := pr.w.bytes(); len(b) > 0 && (total == 0 || maxBytes <= 0 || total+len(b) <= maxBytes) {
				rp.RecordBatches = b
				total += len(b)
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return resp
}

// partRead is one partition of a Fetch: the sink of its stream.
type partRead struct {
	run      *fetchRun
	topic    string
	part     int32
	offset   int64
	maxBytes int

	mu sync.Mutex
	w  batchWriter
	// hwm and logStart are the partition's end and first offsets as its
	// stream last saw them (-1: not yet).
	hwm, logStart int64
	// settled: caught up with the tail, full, or failed.
	settled bool
	err     error
}

// Send implements stream.Sink.
func (pr *partRead) Send(ev *rewindv1.SubscribeResponse) error {
	pr.mu.Lock()
	defer pr.run.signal()
	defer pr.mu.Unlock()
	switch e := ev.GetEvent().(type) {
	case *rewindv1.SubscribeResponse_Started:
		for _, pp := range e.Started.GetPartitions() {
			pr.hwm, pr.logStart = max(pr.hwm, int64(pp.GetEndOffset())), int64(pp.GetLogStartOffset())
		}
	case *rewindv1.SubscribeResponse_Records:
		for _, r := range e.Records.GetRecords() {
			pr.w.add(r)
			pr.hwm = max(pr.hwm, int64(r.GetOffset())+1)
		}
		if pr.w.size() >= pr.maxBytes {
			pr.settled = true
			return errFull
		}
	case *rewindv1.SubscribeResponse_CaughtUp:
		pr.settled = true
		pr.hwm = max(pr.hwm, int64(e.CaughtUp.GetNextOffset()))
	case *rewindv1.SubscribeResponse_Progress:
		for _, pp := range e.Progress.GetPartitions() {
			pr.hwm = max(pr.hwm, int64(pp.GetEndOffset()))
		}
	}
	return nil
}

// finish records why the partition's stream ended: a cancellation of the
// Fetch's own, errFull and a stream's end are no failure.
func (pr *partRead) finish(ctx context.Context, err error) {
	if err == nil || errors.Is(err, errFull) || ctx.Err() != nil {
		pr.mu.Lock()
		pr.settled = true
		pr.mu.Unlock()
		pr.run.signal()
		return
	}
	pr.fail(err)
}

func (pr *partRead) fail(err error) {
	pr.mu.Lock()
	pr.err, pr.settled = err, true
	pr.mu.Unlock()
	pr.run.signal()
}
