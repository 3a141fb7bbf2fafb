package kafka

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/cursor"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Special ListOffsets timestamps.
const (
	listLatest   = -1
	listEarliest = -2
)

// listOffsets answers ListOffsets: −2 is the log start, −1 the end (the
// high watermark: without transactions the last stable offset is the
// same), and a timestamp (ms) the first offset whose append time is at or
// after it, found through Rewind's time index exactly as a subscribe from
// that time starts; −1 when no record is that recent. The partitions of
// a request are looked up in parallel.
func (s *Server) listOffsets(req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	ctx, cancel := s.requestContext(req.TimeoutMillis)
	defer cancel()
	resp := kmsg.NewPtrListOffsetsResponse()
	var wg sync.WaitGroup
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(t.Partitions))
		for i, p := range t.Partitions {
			rp := &rt.Partitions[i]
			*rp = kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch = p.Partition, leaderEpoch
			wg.Add(1)
			go func() {
				defer wg.Done()
				off, ts, err := s.locate(ctx, t.Topic, p.Partition, p.Timestamp)
				if err != nil {
					rp.ErrorCode, rp.Offset, rp.Timestamp, rp.LeaderEpoch = codeOf(err), -1, -1, -1
					return
				}
				rp.Offset, rp.Timestamp = off, ts
			}()
		}
		resp.Topics = append(resp.Topics, rt)
	}
	wg.Wait()
	return resp
}

// errLocated ends a locating stream once it has its answer.
var errLocated = errors.New("kafka: located")

// locate resolves a ListOffsets timestamp to an offset and, for a time,
// the found record's timestamp (−1 otherwise, as Kafka answers for −1 and
// −2). It opens a stream on the partition from that position
// (broker.Subscribe: the cluster's view, through the leader) and reads
// its first event; for a time, also its first record.
func (s *Server) locate(ctx context.Context, topic string, p int32, ts int64) (offset, timestamp int64, err error) {
	start := cursor.Start{Kind: cursor.AtTime, Time: millisToNanos(ts)}
	switch {
	case p < 0:
		return 0, 0, &batchError{kerr.UnknownTopicOrPartition, "negative partition"}
	case ts == listLatest:
		start = cursor.Start{Kind: cursor.Latest}
	case ts == listEarliest:
		start = cursor.Start{Kind: cursor.Earliest}
	case ts < 0:
		return 0, 0, &batchError{kerr.InvalidRequest, "ListOffsets timestamp below −2 (−3, the max timestamp, needs v7, not served)"}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sink := &locateSink{wantTime: start.Kind == cursor.AtTime, offset: -1, timestamp: -1}
	err = s.b.Subscribe(ctx, broker.SubscribeParams{
		Topic: topic, Partitions: []uint32{uint32(p)}, Start: start,
		Stop: cursor.Stop{Kind: cursor.AtEnd}, ClientName: "kafka",
	}, sink)
	if err != nil && !errors.Is(err, errLocated) {
		return 0, 0, s.readError(topic, p, err)
	}
	if !sink.started {
		return 0, 0, &batchError{kerr.UnknownServerError, "the partition's stream ended before it started"}
	}
	if sink.wantTime && sink.timestamp < 0 {
		return -1, -1, nil // no record at or after the time
	}
	return sink.offset, sink.timestamp, nil
}

// millisToNanos converts a Kafka timestamp, saturating past 2262.
func millisToNanos(ms int64) int64 {
	if ms > maxMillis {
		return 1<<63 - 1
	}
	return ms * 1e6
}

// locateSink takes a locating stream's started event and, when it looks
// up a time, the first record's append time.
type locateSink struct {
	wantTime  bool
	started   bool
	offset    int64
	timestamp int64
}

// Send implements stream.Sink; the stream runs on one goroutine and
// locate reads the sink only after it returns.
func (l *locateSink) Send(ev *rewindv1.SubscribeResponse) error {
	switch e := ev.GetEvent().(type) {
	case *rewindv1.SubscribeResponse_Started:
		l.started = true
		for _, pp := range e.Started.GetPartitions() {
			l.offset = int64(pp.GetNextOffset())
			if !l.wantTime || pp.GetNextOffset() >= pp.GetEndOffset() {
				return errLocated
			}
		}
	case *rewindv1.SubscribeResponse_Records:
		if rs := e.Records.GetRecords(); len(rs) > 0 {
			l.offset, l.timestamp = int64(rs[0].GetOffset()), rs[0].GetAppendTimeUnixNanos()/1e6
			return errLocated
		}
	}
	return nil
}
