package client

import (
	"context"
	"errors"
	"iter"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Record is one delivered record.
type Record struct {
	Partition      uint32
	Offset         uint64
	MessageID      string
	AppendTime     time.Time
	Key            []byte
	Value          []byte
	Headers        []Header
	IdempotencyKey string
	EventTime      time.Time // zero if the producer sent none
}

// PartitionPosition is where a stream stands in one partition.
type PartitionPosition struct {
	Partition      uint32
	NextOffset     uint64
	EndOffset      uint64
	LogStartOffset uint64
}

// Event is one stream event: *Started, *Records, *Progress, *CaughtUp or
// *Ended.
type Event interface{ isEvent() }

// Started is the first event: where each partition starts.
type Started struct {
	TopicID     uint64
	Partitions  []PartitionPosition
	ResumeToken string
}

// Records carries records of one partition in offset order.
type Records struct {
	Partition   uint32
	Records     []Record
	ResumeToken string // continues right after the last record
}

// Progress is sent periodically, also while idle.
type Progress struct {
	Partitions  []PartitionPosition
	ResumeToken string
}

// CaughtUp says a partition's history is read; what follows is live.
type CaughtUp struct {
	Partition  uint32
	NextOffset uint64
	// LaggingPartitions is how many partitions of the stream are still
	// reading history; 0 means the whole stream is live.
	LaggingPartitions uint32
}

// Ended is the last event of a stream with a stop position.
type Ended struct {
	Partitions  []PartitionPosition
	ResumeToken string
}

func (*Started) isEvent()  {}
func (*Records) isEvent()  {}
func (*Progress) isEvent() {}
func (*CaughtUp) isEvent() {}
func (*Ended) isEvent()    {}

type subOptions struct {
	from, until   *Position
	partitions    []uint32
	maxPerEvent   uint32
	progressEvery time.Duration
}

// SubscribeOption configures Subscribe.
type SubscribeOption func(*subOptions)

// From sets the start (default Earliest).
func From(p Position) SubscribeOption { return func(o *subOptions) { o.from = &p } }

// Until sets the stop (default: follow live forever).
func Until(p Position) SubscribeOption { return func(o *subOptions) { o.until = &p } }

// Partitions limits the stream to some partitions (default all).
func Partitions(ps ...uint32) SubscribeOption {
	return func(o *subOptions) { o.partitions = append(o.partitions, ps...) }
}

// MaxRecordsPerEvent bounds records per Records event.
func MaxRecordsPerEvent(n uint32) SubscribeOption { return func(o *subOptions) { o.maxPerEvent = n } }

// ProgressEvery sets the progress interval (default 1 s, at least 50 ms).
func ProgressEvery(d time.Duration) SubscribeOption {
	return func(o *subOptions) { o.progressEvery = d }
}

// Subscription is an open stream. It is not safe for concurrent use. Close
// it when done.
type Subscription struct {
	stream *connect.ServerStreamForClient[rewindv1.SubscribeResponse]
	cancel context.CancelFunc
	ev     Event
	err    error
	token  string
	ended  bool
}

// Subscribe opens a stream on topic. Errors in the request (unknown topic,
// bad position) surface from Subscribe itself, with Connect codes.
func (c *Client) Subscribe(ctx context.Context, topic string, opts ...SubscribeOption) (*Subscription, error) {
	var o subOptions
	for _, opt := range opts {
		opt(&o)
	}
	req := &rewindv1.SubscribeRequest{Topic: topic, Partitions: o.partitions, MaxRecordsPerEvent: o.maxPerEvent}
	if o.progressEvery > 0 {
		req.ProgressInterval = durationpb.New(o.progressEvery)
	}
	if o.from != nil {
		sp, err := o.from.startProto()
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		req.Start = sp
	}
	if o.until != nil {
		sp, err := o.until.stopProto(time.Now())
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		req.Stop = sp
	}
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.sub.Subscribe(ctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Subscription{stream: st, cancel: cancel}
	// The first event is always Started (or an error): read it so request
	// errors come back from Subscribe.
	if !s.Next() {
		err := s.Err()
		s.Close()
		if err == nil {
			err = errors.New("client: stream ended before it started")
		}
		return nil, err
	}
	return s, nil
}

// Next waits for the next event and reports whether there is one. After
// false, Err says why (nil after an Ended event).
func (s *Subscription) Next() bool {
	if s.err != nil || s.ended {
		return false
	}
	if !s.stream.Receive() {
		s.err = s.stream.Err()
		if s.err == nil {
			s.err = errors.New("client: stream closed by the server without an end event")
		}
		return false
	}
	s.ev = convert(s.stream.Msg())
	switch e := s.ev.(type) {
	case *Started:
		s.token = e.ResumeToken
	case *Records:
		s.token = e.ResumeToken
	case *Progress:
		s.token = e.ResumeToken
	case *Ended:
		s.token = e.ResumeToken
		s.ended = true
	}
	return s.ev != nil
}

// Event returns the event Next moved to.
func (s *Subscription) Event() Event { return s.ev }

// Err returns why the stream stopped: nil after an Ended event.
func (s *Subscription) Err() error {
	if s.ended {
		return nil
	}
	return s.err
}

// ResumeToken returns a token that continues right after the last event
// returned by Next: pass it to From(ResumeToken(tok)).
func (s *Subscription) ResumeToken() string { return s.token }

// Close ends the stream.
func (s *Subscription) Close() error {
	s.cancel()
	return s.stream.Close()
}

// Records iterates the stream's records, skipping other events. It stops
// after the Ended event (with no error) or at the first error.
func (s *Subscription) Records() iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		if r, ok := s.ev.(*Records); ok { // delivered before the loop began
			s.ev = nil
			for _, rec := range r.Records {
				if !yield(rec, nil) {
					return
				}
			}
		}
		for s.Next() {
			r, ok := s.ev.(*Records)
			if !ok {
				continue
			}
			for _, rec := range r.Records {
				if !yield(rec, nil) {
					return
				}
			}
		}
		if err := s.Err(); err != nil {
			yield(Record{}, err)
		}
	}
}

func positions(ps []*rewindv1.PartitionPosition) []PartitionPosition {
	out := make([]PartitionPosition, len(ps))
	for i, p := range ps {
		out[i] = PartitionPosition{Partition: p.GetPartition(), NextOffset: p.GetNextOffset(), EndOffset: p.GetEndOffset(), LogStartOffset: p.GetLogStartOffset()}
	}
	return out
}

func convert(m *rewindv1.SubscribeResponse) Event {
	switch e := m.GetEvent().(type) {
	case *rewindv1.SubscribeResponse_Started:
		return &Started{TopicID: e.Started.GetTopicId(), Partitions: positions(e.Started.GetPartitions()), ResumeToken: e.Started.GetResumeToken()}
	case *rewindv1.SubscribeResponse_Records:
		in := e.Records.GetRecords()
		out := &Records{Partition: e.Records.GetPartition(), ResumeToken: e.Records.GetResumeToken(), Records: make([]Record, len(in))}
		for i, r := range in {
			rec := &out.Records[i]
			rec.Partition, rec.Offset, rec.MessageID = r.GetPartition(), r.GetOffset(), r.GetMessageId()
			rec.AppendTime = time.Unix(0, r.GetAppendTimeUnixNanos())
			rec.Key, rec.Value, rec.IdempotencyKey = r.GetKey(), r.GetValue(), r.GetIdempotencyKey()
			if et := r.GetEventTimeUnixNanos(); et != 0 {
				rec.EventTime = time.Unix(0, et)
			}
			if hs := r.GetHeaders(); len(hs) > 0 {
				rec.Headers = make([]Header, len(hs))
				for j, h := range hs {
					rec.Headers[j] = Header{Key: h.GetKey(), Value: h.GetValue()}
				}
			}
		}
		return out
	case *rewindv1.SubscribeResponse_Progress:
		return &Progress{Partitions: positions(e.Progress.GetPartitions()), ResumeToken: e.Progress.GetResumeToken()}
	case *rewindv1.SubscribeResponse_CaughtUp:
		return &CaughtUp{Partition: e.CaughtUp.GetPartition(), NextOffset: e.CaughtUp.GetNextOffset(), LaggingPartitions: e.CaughtUp.GetLaggingPartitions()}
	case *rewindv1.SubscribeResponse_End:
		return &Ended{Partitions: positions(e.End.GetPartitions()), ResumeToken: e.End.GetResumeToken()}
	}
	return &Progress{} // an event type from a newer server: harmless
}
