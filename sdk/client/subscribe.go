package client

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
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
	// KeyVersion is the record's position in its key's history (0, 1,
	// 2, ...) when HasKeyVersion (the record has a key).
	KeyVersion    uint64
	HasKeyVersion bool
}

// PartitionPosition is where a stream stands in one partition.
type PartitionPosition struct {
	Partition      uint32
	NextOffset     uint64
	EndOffset      uint64
	LogStartOffset uint64
	// Clamped: the requested start was removed by retention; the stream
	// starts at the log start (see ClampStart).
	Clamped bool
}

// Event is one stream event: *Started, *Records, *Progress, *CaughtUp,
// *Ended, for group members *Assigned and *ReplayStarted, and when a
// stream breaks and goes on, *Disconnected and *Reconnected.
type Event interface{ isEvent() }

// Assigned tells a group member which partitions it reads now (after every
// rebalance or reset). Commits use its Generation.
type Assigned struct {
	MemberID   string
	Generation uint64
	Epoch      uint64
	Partitions []PartitionPosition
	Revoked    []uint32
}

// ReplayStarted says a group reset moved a partition: the records that
// follow start at FromOffset.
type ReplayStarted struct {
	Epoch      uint64
	Partition  uint32
	FromOffset uint64
	Generation uint64
}

func (*Assigned) isEvent()      {}
func (*ReplayStarted) isEvent() {}

// Started is the first event: where each partition starts.
type Started struct {
	TopicID     uint64
	Partitions  []PartitionPosition
	ResumeToken string
	// FilterModule is the filter module the stream runs ("sha256:HEX"),
	// empty without one.
	FilterModule string
}

// Records carries records of one partition in offset order.
type Records struct {
	Partition   uint32
	Records     []Record
	ResumeToken string // continues right after the last record
	// FilterModule is the module that produced the records, if any.
	FilterModule string
}

// Progress is sent periodically, also while idle. In a filtered stream it
// moves on through history even when nothing matches.
type Progress struct {
	Partitions   []PartitionPosition
	ResumeToken  string
	FilterModule string
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
	Partitions   []PartitionPosition
	ResumeToken  string
	FilterModule string
}

func (*Started) isEvent()  {}
func (*Records) isEvent()  {}
func (*Progress) isEvent() {}
func (*CaughtUp) isEvent() {}
func (*Ended) isEvent()    {}

type subOptions struct {
	from, until   *Position
	partitions    []uint32
	key           []byte
	maxPerEvent   uint32
	progressEvery time.Duration
	group, name   string
	groupSet      bool
	reconnect     time.Duration
	readFrom      rewindv1.ReadFrom
	autoCommit    bool
	commitEvery   time.Duration
	clamp         bool
	filter        *rewindv1.ReplayFilter
	contains      []byte
	// stop is until as sent the first time (relative positions resolved
	// once), so a resumed stream stops where the first one would have.
	stop *rewindv1.StopPosition
}

// Contains limits the stream to the records whose key, value, or a
// header's key or value contains sub (an exact, case-sensitive substring),
// tested by the server beside each partition reader, before any Filter:
// a search with no module to upload. Offsets, message IDs, positions and
// resume tokens stay the partition's, and records keep their order. sub
// is at most 1024 bytes (longer is InvalidArgument); empty: every record.
func Contains(sub []byte) SubscribeOption { return func(o *subOptions) { o.contains = sub } }

// Filter runs a registered WebAssembly filter or transform beside each
// partition reader: plugin is "NAME", "NAME@VERSION" or "sha256:HEX";
// config is given to the module (e.g. JSON). Only what the module keeps or
// emits is delivered, with the offsets, message IDs and idempotency keys of
// the records it read.
func Filter(plugin string, config []byte) SubscribeOption {
	return func(o *subOptions) {
		o.filter = &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Plugin{Plugin: plugin}, Config: config}
	}
}

// InlineFilter is Filter with a module sent with the request (not stored;
// size-capped by the server, 4 MiB by default).
func InlineFilter(module, config []byte) SubscribeOption {
	return func(o *subOptions) {
		o.filter = &rewindv1.ReplayFilter{Module: &rewindv1.ReplayFilter_Inline{Inline: module}, Config: config}
	}
}

// ClampStart starts at the log start, instead of failing with OutOfRange,
// when the start offset or token was removed by retention; the Started
// event marks such partitions Clamped.
func ClampStart() SubscribeOption { return func(o *subOptions) { o.clamp = true } }

// Group joins a subscriber group: the server assigns this subscription a
// share of the topic's partitions and moves them as members come and go.
// From is then where partitions without a committed offset start. A named
// subscription with a single reader is a group with one member.
func Group(name string) SubscribeOption {
	return func(o *subOptions) { o.group, o.groupSet = name, true }
}

// ClientName says who this member is in DescribeGroup.
func ClientName(name string) SubscribeOption { return func(o *subOptions) { o.name = name } }

// AutoCommit commits a group member's progress for it: when Next is called
// again after a Records event (the caller is done with it; of an event a
// Records loop broke out of, the records it yielded; see also Processed),
// its offsets are due, and due offsets are committed at most every interval
// (0: at once) and on Close, also when the context given to Subscribe was
// cancelled (a graceful stop re-delivers nothing). At-least-once: a crash
// re-delivers what was not committed.
func AutoCommit(interval time.Duration) SubscribeOption {
	return func(o *subOptions) { o.autoCommit, o.commitEvery = true, interval }
}

// SubscribeOption configures Subscribe.
type SubscribeOption func(*subOptions)

// FollowerReads reads each partition from the replica on the node the
// client is connected to (fetch from follower), up to what that replica
// has applied, even if the server reads from leaders by default. It keeps
// catch-up replays off the partition leaders; the records, their order and
// offsets are the same, but a follower may trail the leader by a few
// milliseconds.
func FollowerReads() SubscribeOption {
	return func(o *subOptions) { o.readFrom = rewindv1.ReadFrom_READ_FROM_LOCAL_REPLICA }
}

// LeaderReads reads each partition from its leader (relayed by the node the
// client is connected to), even if the server was started with
// --follower-reads. Without it (or FollowerReads), a server delivers what
// the leader holds too, but reads the history its own replica holds from
// that replica.
func LeaderReads() SubscribeOption {
	return func(o *subOptions) { o.readFrom = rewindv1.ReadFrom_READ_FROM_LEADER }
}

// From sets the start (default Earliest).
func From(p Position) SubscribeOption { return func(o *subOptions) { o.from = &p } }

// Until sets the stop (default: follow live forever).
func Until(p Position) SubscribeOption { return func(o *subOptions) { o.until = &p } }

// Key limits the stream to one key's records (an entity's stream), read
// through the server's key index; without Partitions, the key's
// partition. Start it at a version with From(KeyVersion(n)).
func Key(key []byte) SubscribeOption { return func(o *subOptions) { o.key = key } }

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
	// rd is the open stream. Replaced (by Next) and read (by Close, which
	// may run on another goroutine) under rdMu.
	rd   *reader
	rdMu sync.Mutex
	// stop is closed by Close: a reconnect waiting to try again gives up.
	stop chan struct{}
	ev   Event
	// handed counts the records of ev (a *Records) handed to the caller:
	// by Records, one by one, or as set by Processed; -1: all of them (Next
	// returned the event). Invariant: -1 <= handed <= len(records).
	handed int
	// settled: ev's handed records are accounted (delivered, due).
	settled bool
	err     error
	token   string
	ended   bool
	// closed is set by Close, which may run on another goroutine (see
	// Close).
	closed atomic.Bool
	// started: the stream's Started event was read; only a stream that
	// started is reconnected.
	started bool

	// root is the client Subscribe was called on, node the one serving
	// the stream; a broken stream reconnects through root (reconnect.go).
	root, node *Client
	resumes    int
	parent     context.Context // the caller's: a reconnected stream's too
	// broke is why the stream broke, after a *Disconnected event; the
	// next Next reconnects. brokeAt is when.
	broke   error
	brokeAt time.Time
	// A reconnected stream that breaks again before it delivered records
	// or stayed up for maxReconnectPause (a node that accepts the stream
	// but fails it at once, e.g. its tiered storage is down) does not
	// start a new window: the window goes on from brokeAt, and the next
	// reconnect waits pause first, doubling, so it neither spins nor
	// retries forever.
	progressed  bool
	connectedAt time.Time
	pause       time.Duration

	// Group members.
	c          *Client // the coordinator
	topic      string
	opts       subOptions
	memberID   string
	generation uint64
	epoch      uint64
	owned      map[uint32]bool
	due        map[uint32]uint64 // offsets given to the caller, not committed (AutoCommit)
	// delivered is, per owned partition, the offset after the last record
	// handed to the caller. After a rejoin (reconnect.go), skip holds it for
	// the partitions to skip to, until the first Assigned (rejoining) and
	// the records below it are dropped.
	delivered  map[uint32]uint64
	skip       map[uint32]uint64
	skipEpoch  uint64
	rejoining  bool
	lastCommit time.Time
	commitErr  error
}

// Subscribe opens a stream on topic. Errors in the request (unknown topic,
// bad position) surface from Subscribe itself, with Connect codes.
func (c *Client) Subscribe(ctx context.Context, topic string, opts ...SubscribeOption) (*Subscription, error) {
	// A node that cannot be reached, sends nothing within the open
	// timeout or is unavailable is left for the next: any node serves any
	// stream (the same records in the same order, whichever replica
	// serves them).
	o := subOptions{reconnect: DefaultReconnectWindow}
	for _, opt := range opts {
		opt(&o)
	}
	if o.groupSet && o.group == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("client: Group needs a name (an empty one was given)"))
	}
	for tries := 0; ; tries++ {
		cl := c.pick()
		s, err := followCoordinator(cl, func(c *Client) (*Subscription, error) { return c.subscribe(ctx, topic, o) })
		if err == nil {
			s.root, s.node = c, cl
			return s, nil
		}
		if !badNode(err) || ctx.Err() != nil || tries+1 >= c.nodes.count() {
			return nil, err
		}
		c.moveOn(ctx, cl, err)
	}
}

func (c *Client) subscribe(ctx context.Context, topic string, o subOptions) (*Subscription, error) {
	req := &rewindv1.SubscribeRequest{Topic: topic, Partitions: o.partitions, MaxRecordsPerEvent: o.maxPerEvent, Group: o.group, ClientName: o.name, ClampStart: o.clamp, Filter: o.filter, ReadFrom: o.readFrom, Key: o.key, Contains: o.contains}
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
	if o.stop == nil && o.until != nil {
		sp, err := o.until.stopProto(time.Now())
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		o.stop = sp
	}
	req.Stop = o.stop
	rd, err := c.open(ctx, req, o.group != "")
	if err != nil {
		return nil, err
	}
	s := &Subscription{rd: rd, stop: make(chan struct{}), c: c, parent: ctx, topic: topic, opts: o, handed: -1, settled: true,
		owned: map[uint32]bool{}, due: map[uint32]uint64{}, delivered: map[uint32]uint64{}}
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
// false, Err says why (nil after an Ended event). It returns false as soon
// as the context given to Subscribe ends.
func (s *Subscription) Next() bool {
	if s.err != nil || s.ended {
		return false
	}
	if s.closed.Load() { // by Close, maybe on another goroutine
		s.err = errClosed
		return false
	}
	s.settle()
	if s.opts.autoCommit && len(s.due) > 0 && time.Since(s.lastCommit) >= s.opts.commitEvery {
		s.commitDue(commitTimeout)
	}
	for {
		if s.broke != nil {
			ev, err := s.reconnect()
			if err != nil {
				s.err = err
				return false
			}
			s.setEvent(ev)
			return true
		}
		if err := s.parent.Err(); err != nil {
			s.err = connect.NewError(connect.CodeCanceled, err)
			return false
		}
		m, ok, err := s.rd.next(s.parent)
		if !ok {
			if err == nil && s.parent.Err() == nil {
				err = errStreamClosed
			}
			if s.reconnectable(err) {
				if s.resumes == 0 || s.progressed || time.Since(s.connectedAt) >= maxReconnectPause {
					s.brokeAt, s.pause = time.Now(), 0
				}
				s.broke = err
				s.setEvent(&Disconnected{Err: err, RetryFor: s.opts.reconnect})
				return true
			}
			s.err = err
			return false
		}
		if ev := s.apply(convert(m)); ev != nil {
			s.setEvent(ev)
			return true
		}
	}
}

// errStreamClosed: the server closed a stream that had no end (it was
// shutting down).
var errStreamClosed = connect.NewError(connect.CodeUnavailable, errors.New("client: stream closed by the server without an end event"))

func (s *Subscription) setEvent(ev Event) {
	s.ev, s.handed, s.settled = ev, -1, false
}

// apply updates the subscription with a received event and returns the
// event to deliver (nil: none, e.g. records a rejoined member was given
// before).
func (s *Subscription) apply(ev Event) Event {
	switch e := ev.(type) {
	case *Started:
		s.token, s.started = e.ResumeToken, true
	case *Records:
		s.token = e.ResumeToken
		s.progressed = true
		if from, ok := s.skip[e.Partition]; ok {
			i := 0
			for i < len(e.Records) && e.Records[i].Offset < from {
				i++
			}
			if i > 0 {
				e.Records = e.Records[i:]
			}
			if len(e.Records) == 0 {
				return nil
			}
			delete(s.skip, e.Partition)
		}
	case *Progress:
		s.token = e.ResumeToken
	case *Ended:
		s.token = e.ResumeToken
		s.ended = true
	case *Assigned:
		s.memberID, s.generation, s.epoch = e.MemberID, e.Generation, e.Epoch
		clear(s.owned)
		for _, p := range e.Partitions {
			s.owned[p.Partition] = true
		}
		for p := range s.due {
			if !s.owned[p] {
				delete(s.due, p) // revoked: its new owner continues from the last commit
			}
		}
		for p := range s.delivered {
			if !s.owned[p] {
				delete(s.delivered, p)
			}
		}
		if s.rejoining {
			s.rejoined(e)
		}
	case *ReplayStarted:
		delete(s.due, e.Partition) // progress from before the reset must not undo it
		delete(s.delivered, e.Partition)
		delete(s.skip, e.Partition)
	}
	return ev
}

// settle accounts the records of the current event handed to the caller:
// a group member has delivered them and, with AutoCommit, their offsets
// are due.
func (s *Subscription) settle() {
	if s.settled {
		return
	}
	s.settled = true
	r, ok := s.ev.(*Records)
	if !ok || s.opts.group == "" || !s.owned[r.Partition] {
		return
	}
	n := len(r.Records)
	if s.handed >= 0 {
		n = s.handed
	}
	if n == 0 {
		return
	}
	next := r.Records[n-1].Offset + 1
	s.delivered[r.Partition] = next
	if s.opts.autoCommit {
		s.due[r.Partition] = next
	}
}

// Processed says the caller processed only the first n records of the
// current Records event and will not process the rest: AutoCommit and
// Close commit up to the n-th and no further. A Records loop that breaks
// out does this by itself.
func (s *Subscription) Processed(n int) {
	if r, ok := s.ev.(*Records); ok && !s.settled {
		s.handed = min(max(n, 0), len(r.Records))
	}
}

// Resumes counts how often the stream was reopened after it broke.
func (s *Subscription) Resumes() int { return s.resumes }

// Generation returns the generation of a group member's current assignment.
func (s *Subscription) Generation() uint64 { return s.generation }

// MemberID returns the id the server gave this group member.
func (s *Subscription) MemberID() string { return s.memberID }

// Commit commits a group member's progress: for each partition, the next
// offset to read. It uses the current generation; a commit for a partition
// this member no longer owns, or from before a reset, fails with
// FailedPrecondition.
func (s *Subscription) Commit(ctx context.Context, offsets map[uint32]uint64) error {
	if s.opts.group == "" {
		return errors.New("client: Commit needs a group subscription")
	}
	return s.c.Commit(ctx, s.opts.group, s.topic, s.generation, offsets)
}

// CommitRecords commits the offsets after records (the last of each
// partition).
func (s *Subscription) CommitRecords(ctx context.Context, records ...Record) error {
	offsets := map[uint32]uint64{}
	for _, r := range records {
		if r.Offset+1 > offsets[r.Partition] {
			offsets[r.Partition] = r.Offset + 1
		}
	}
	return s.Commit(ctx, offsets)
}

// CommitErr returns the last error of an automatic commit (see AutoCommit),
// nil once one succeeded.
func (s *Subscription) CommitErr() error { return s.commitErr }

// Bounds of an automatic commit: while reading, and on Close (which must
// not hang on a server that went away).
const (
	commitTimeout      = 10 * time.Second
	closeCommitTimeout = 5 * time.Second
)

// commitDue commits the due offsets, bounded by timeout and independent of
// the caller's context (which may have ended: a graceful stop).
func (s *Subscription) commitDue(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.parent), timeout)
	defer cancel()
	err := s.Commit(ctx, s.due)
	s.commitErr = err
	if err == nil || connect.CodeOf(err) == connect.CodeFailedPrecondition {
		// A fenced commit never succeeds: the partition moved (its new owner
		// re-reads from the last commit) or a reset happened. Retrying it
		// would only fail again; the other partitions of the request were
		// committed.
		clear(s.due)
	}
	s.lastCommit = time.Now()
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

// Close ends the stream. A group member with AutoCommit first commits the
// records it handed over (all of the last event returned by Next, or those
// a Records loop yielded, or as set by Processed), also after the context
// given to Subscribe ended — a graceful stop — waiting at most a few
// seconds; it returns that commit's error, if any. A member stays in the
// group, holding its partitions, until Close (at most closeGrace after its
// context ended), so the commit is not fenced by a rebalance.
//
// Without AutoCommit, Close may also be called from another goroutine to
// end a stream that Next is waiting on. With it, cancel the context
// instead and call Close once Next returned, so it commits the last event.
// After Close, Next returns false and Err reports Canceled (unless the
// stream had already ended).
func (s *Subscription) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	var err error
	if s.opts.autoCommit && s.broke == nil {
		s.settle()
		if len(s.due) > 0 {
			s.commitDue(closeCommitTimeout)
			err = s.commitErr
		}
	}
	s.rdMu.Lock()
	rd := s.rd
	s.rdMu.Unlock()
	if cerr := rd.close(); err == nil {
		err = cerr
	}
	return err
}

// Records iterates the stream's records, skipping other events. It stops
// after the Ended event (with no error) or at the first error. A loop that
// breaks out and a later Records go on with the next record: none is
// yielded twice or skipped.
func (s *Subscription) Records() iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for {
			// The current event's records not yielded yet: all of an event
			// Next moved to before the loop, the rest of one a previous
			// loop broke out of.
			if r, ok := s.ev.(*Records); ok && !s.settled {
				if s.handed < 0 {
					s.handed = 0
				}
				for s.handed < len(r.Records) {
					rec := r.Records[s.handed]
					s.handed++
					if !yield(rec, nil) {
						return
					}
				}
			}
			if !s.Next() {
				break
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
		out[i] = PartitionPosition{Partition: p.GetPartition(), NextOffset: p.GetNextOffset(), EndOffset: p.GetEndOffset(),
			LogStartOffset: p.GetLogStartOffset(), Clamped: p.GetClamped()}
	}
	return out
}

func convert(m *rewindv1.SubscribeResponse) Event {
	switch e := m.GetEvent().(type) {
	case *rewindv1.SubscribeResponse_Started:
		return &Started{TopicID: e.Started.GetTopicId(), Partitions: positions(e.Started.GetPartitions()), ResumeToken: e.Started.GetResumeToken(),
			FilterModule: e.Started.GetFilterModule()}
	case *rewindv1.SubscribeResponse_Records:
		in := e.Records.GetRecords()
		out := &Records{Partition: e.Records.GetPartition(), ResumeToken: e.Records.GetResumeToken(), Records: make([]Record, len(in)),
			FilterModule: e.Records.GetFilterModule()}
		for i, r := range in {
			out.Records[i] = recordOf(r)
		}
		return out
	case *rewindv1.SubscribeResponse_Progress:
		return &Progress{Partitions: positions(e.Progress.GetPartitions()), ResumeToken: e.Progress.GetResumeToken(),
			FilterModule: e.Progress.GetFilterModule()}
	case *rewindv1.SubscribeResponse_CaughtUp:
		return &CaughtUp{Partition: e.CaughtUp.GetPartition(), NextOffset: e.CaughtUp.GetNextOffset(), LaggingPartitions: e.CaughtUp.GetLaggingPartitions()}
	case *rewindv1.SubscribeResponse_End:
		return &Ended{Partitions: positions(e.End.GetPartitions()), ResumeToken: e.End.GetResumeToken(), FilterModule: e.End.GetFilterModule()}
	case *rewindv1.SubscribeResponse_Assignment:
		a := e.Assignment
		return &Assigned{MemberID: a.GetMemberId(), Generation: a.GetGeneration(), Epoch: a.GetEpoch(), Partitions: positions(a.GetPartitions()), Revoked: a.GetRevoked()}
	case *rewindv1.SubscribeResponse_ReplayStarted:
		r := e.ReplayStarted
		return &ReplayStarted{Epoch: r.GetEpoch(), Partition: r.GetPartition(), FromOffset: r.GetFromOffset(), Generation: r.GetGeneration()}
	}
	return &Progress{} // an event type from a newer server: harmless
}

func recordOf(r *rewindv1.Record) Record {
	rec := Record{
		Partition: r.GetPartition(), Offset: r.GetOffset(), MessageID: r.GetMessageId(),
		AppendTime: time.Unix(0, r.GetAppendTimeUnixNanos()),
		Key:        r.GetKey(), Value: r.GetValue(), IdempotencyKey: r.GetIdempotencyKey(),
	}
	if et := r.GetEventTimeUnixNanos(); et != 0 {
		rec.EventTime = time.Unix(0, et)
	}
	if r.KeyVersion != nil {
		rec.KeyVersion, rec.HasKeyVersion = r.GetKeyVersion(), true
	}
	if hs := r.GetHeaders(); len(hs) > 0 {
		rec.Headers = make([]Header, len(hs))
		for j, h := range hs {
			rec.Headers[j] = Header{Key: h.GetKey(), Value: h.GetValue()}
		}
	}
	return rec
}
