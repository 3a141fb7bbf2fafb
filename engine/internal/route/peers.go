package route

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/remote"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/gen/rewind/peer/v1/peerv1connect"
	"github.com/rewind-io/rewind/internal/peerauth"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// The wire of a hop: the headers members read on each other's requests
// and answers. The member guard (engine) decides where a request's hop
// header is believed (api/member.go).
const (
	// MemberPrefix is the path prefix under which a cluster member serves
	// its public services to the other members.
	MemberPrefix = "/rewind.member"
	// ForwardedHeader marks a request forwarded by another member (its
	// id): the receiver serves it only if it leads the partition.
	ForwardedHeader = "Rewind-Forwarded-By"
	// RelayedHeader marks a request relayed by another member (its id)
	// that cannot reach the partition's leader: a receiver that does not
	// lead the partition forwards it once to the leader.
	RelayedHeader = "Rewind-Relayed-By"
	// NotStoredHeader is set on an error whose request stored nothing
	// (safe to retry without duplicating).
	NotStoredHeader = "Rewind-Not-Stored"
	// LeaderHeader names the node the answering node believes leads the
	// partition.
	LeaderHeader = "Rewind-Leader"
)

// Limits of the calls between members.
const (
	// MaxMessageBytes bounds a forwarded publish and its answer.
	MaxMessageBytes = 64 << 20
	// MaxFetchBytes bounds the batch bytes one fetch returns.
	MaxFetchBytes = 16 << 20
)

// HTTP is how a member calls the others: an HTTP/2 client and the URL
// scheme, "http" (h2c) or "https" (peer TLS).
type HTTP struct {
	Client *http.Client
	Scheme string
}

// url is the base URL of the member at addr.
func (h HTTP) url(addr string) string {
	scheme := h.Scheme
	if scheme == "" {
		scheme = "http"
	}
	return scheme + "://" + addr
}

// ClientOptions are the Connect options of every call between members:
// gRPC, and no compression. Connect clients accept gzip by default, and a
// server then compresses every answer: on a LAN that costs far more CPU
// than it saves (it was the top item of a profile of forwarded publishes,
// and halved relayed reads).
func ClientOptions(more ...connect.ClientOption) []connect.ClientOption {
	return append([]connect.ClientOption{connect.WithGRPC(), connect.WithAcceptCompression("gzip", nil, nil)}, more...)
}

// PeersConfig configures the peer clients.
type PeersConfig struct {
	// Self and ClusterID name this member. Required.
	Self, ClusterID uint64
	// HTTP carries the calls on the member path; its client authenticates
	// them (peer TLS naming the member each call's context targets,
	// peerauth.WithTarget, and the cluster secret). Default client:
	// http.DefaultClient.
	HTTP HTTP
	// PartitionHTTP carries the PartitionService calls (fetches can be
	// large: they get connections of their own). Default: HTTP.
	PartitionHTTP HTTP
	// Credentials, if set, gives a call sent on a caller's behalf (a
	// forwarded publish, a membership call sent to the metadata leader)
	// the caller's credentials, from ctx.
	Credentials func(ctx context.Context, h http.Header)
}

// Peers are this member's clients of the others: the member path (the
// public services, for forwarded publishes and membership calls) and the
// peer PartitionService (fetch, locate, bind). One Connect client per
// address and service, made on first use. Safe for concurrent use.
type Peers struct {
	cfg     PeersConfig
	publish *clients[rewindv1connect.PublishServiceClient]
	cluster *clients[rewindv1connect.ClusterServiceClient]
	parts   *clients[peerv1connect.PartitionServiceClient]
	store   *clients[rewindv1connect.EventStoreServiceClient]
}

// NewPeers returns the peer clients.
func NewPeers(cfg PeersConfig) *Peers {
	if cfg.HTTP.Client == nil {
		cfg.HTTP.Client = http.DefaultClient
	}
	if cfg.PartitionHTTP.Client == nil {
		cfg.PartitionHTTP = cfg.HTTP
	}
	p := &Peers{cfg: cfg}
	var icpt []connect.ClientOption
	if cfg.Credentials != nil {
		icpt = append(icpt, connect.WithInterceptors(carrier(cfg.Credentials)))
	}
	member := func(addr string) string { return cfg.HTTP.url(addr) + MemberPrefix }
	p.publish = newClients(func(addr string) rewindv1connect.PublishServiceClient {
		return rewindv1connect.NewPublishServiceClient(cfg.HTTP.Client, member(addr),
			ClientOptions(append([]connect.ClientOption{connect.WithReadMaxBytes(MaxMessageBytes), connect.WithSendMaxBytes(MaxMessageBytes)}, icpt...)...)...)
	})
	p.store = newClients(func(addr string) rewindv1connect.EventStoreServiceClient {
		return rewindv1connect.NewEventStoreServiceClient(cfg.HTTP.Client, member(addr),
			ClientOptions(append([]connect.ClientOption{connect.WithReadMaxBytes(MaxMessageBytes)}, icpt...)...)...)
	})
	p.cluster = newClients(func(addr string) rewindv1connect.ClusterServiceClient {
		return rewindv1connect.NewClusterServiceClient(cfg.HTTP.Client, member(addr), ClientOptions(icpt...)...)
	})
	p.parts = newClients(func(addr string) peerv1connect.PartitionServiceClient {
		return peerv1connect.NewPartitionServiceClient(cfg.PartitionHTTP.Client, cfg.PartitionHTTP.url(addr),
			ClientOptions(connect.WithReadMaxBytes(MaxFetchBytes+(4<<20)))...)
	})
	return p
}

// Cluster returns node's ClusterService on the member path at addr; its
// calls' contexts are marked for node. Membership calls go to the
// metadata leader this way, with the caller's credentials.
func (p *Peers) Cluster(node uint64, addr string) rewindv1connect.ClusterServiceClient {
	return targeted{node: node, ClusterServiceClient: p.cluster.get(addr)}
}

// targeted marks every call's context with its member.
type targeted struct {
	node uint64
	rewindv1connect.ClusterServiceClient
}

func (t targeted) AddNode(ctx context.Context, req *rewindv1.AddNodeRequest) (*rewindv1.AddNodeResponse, error) {
	return t.ClusterServiceClient.AddNode(peerauth.WithTarget(ctx, t.node), req)
}

func (t targeted) RemoveNode(ctx context.Context, req *rewindv1.RemoveNodeRequest) (*rewindv1.RemoveNodeResponse, error) {
	return t.ClusterServiceClient.RemoveNode(peerauth.WithTarget(ctx, t.node), req)
}

func (t targeted) Rebalance(ctx context.Context, req *rewindv1.RebalanceRequest) (*rewindv1.RebalanceResponse, error) {
	return t.ClusterServiceClient.Rebalance(peerauth.WithTarget(ctx, t.node), req)
}

func (t targeted) GetClusterStatus(ctx context.Context, req *rewindv1.GetClusterStatusRequest) (*rewindv1.GetClusterStatusResponse, error) {
	return t.ClusterServiceClient.GetClusterStatus(peerauth.WithTarget(ctx, t.node), req)
}

func (t targeted) TransferLeader(ctx context.Context, req *rewindv1.TransferLeaderRequest) (*rewindv1.TransferLeaderResponse, error) {
	return t.ClusterServiceClient.TransferLeader(peerauth.WithTarget(ctx, t.node), req)
}

// Published is one record's outcome on the leader.
type Published struct {
	Partition  uint32
	Offset     uint64
	AppendTime int64
	Duplicate  bool
	// KeyVersion is the record's key version when HasKeyVersion.
	KeyVersion    uint64
	HasKeyVersion bool
}

// Publish sends one partition's records to node on the member path,
// marked forwarded (relay: relayed), for it to publish them only if it
// leads the partition. Errors: ErrNotStored ones (a *NotLeaderError says
// who leads as far as node knows) are safe to retry; a *RefusedError is
// the leader's refusal; partition.ErrBusy and ErrDiskFull keep their
// class; anything else is ErrUnavailable with the outcome unknown.
func (p *Peers) Publish(ctx context.Context, node uint64, addr, topic string, part uint32, recs []record.Record, conds *partition.Conditions, relay bool) ([]Published, error) {
	if addr == "" {
		return nil, fmt.Errorf("%w: %w: no address for node %d", ErrUnavailable, ErrNotStored, node)
	}
	req := &rewindv1.PublishRequest{Topic: topic, Records: make([]*rewindv1.PublishRecord, len(recs))}
	for i := range recs {
		r := &recs[i]
		pr := &rewindv1.PublishRecord{
			Key: r.Key, Value: r.Value, IdempotencyKey: string(r.IdempotencyKey), EventTimeUnixNanos: r.EventTime, Partition: &part,
		}
		for _, h := range r.Headers {
			pr.Headers = append(pr.Headers, &rewindv1.Header{Key: string(h.Key), Value: h.Value})
		}
		req.Records[i] = pr
	}
	req.Expectations, req.Conditions = ConditionsToProto(conds)
	resp, err := p.publish.get(addr).Publish(p.hop(peerauth.WithTarget(ctx, node), relay), req)
	if err != nil {
		return nil, forwardError(node, topic, part, err)
	}
	out := make([]Published, len(resp.GetResults()))
	for i, r := range resp.GetResults() {
		out[i] = Published{Partition: r.GetPartition(), Offset: r.GetOffset(), AppendTime: r.GetAppendTimeUnixNanos(), Duplicate: r.GetDuplicate(),
			KeyVersion: r.GetKeyVersion(), HasKeyVersion: r.KeyVersion != nil}
	}
	if len(out) != len(recs) {
		return nil, fmt.Errorf("%w: node %d answered %d results for %d records", ErrUnavailable, node, len(out), len(recs))
	}
	return out, nil
}

// hop marks an outgoing call from this member as forwarded, or relayed.
func (p *Peers) hop(ctx context.Context, relay bool) context.Context {
	ctx, ci := connect.NewClientContext(ctx)
	h := ForwardedHeader
	if relay {
		h = RelayedHeader
	}
	ci.RequestHeader().Set(h, strconv.FormatUint(p.cfg.Self, 10))
	return ctx
}

func (p *Peers) ref(topicID uint64, part uint32) *peerv1.PartitionRef {
	return &peerv1.PartitionRef{ClusterId: p.cfg.ClusterID, TopicId: topicID, Partition: part}
}

// Fetch reads partition part of topic topicID on node, its leader.
// Errors that are ErrUnavailable are transient; a *NotLeaderError names
// the leader node knows of.
func (p *Peers) Fetch(ctx context.Context, node uint64, addr string, topicID uint64, part uint32, f remote.Fetch) (remote.Fetched, error) {
	if addr == "" {
		return remote.Fetched{}, fmt.Errorf("%w: no address for node %d", ErrUnavailable, node)
	}
	resp, err := p.parts.get(addr).Fetch(peerauth.WithTarget(ctx, node), &peerv1.FetchRequest{
		Partition: p.ref(topicID, part), FromOffset: f.From, MaxBytes: uint32(min(f.MaxBytes, MaxFetchBytes)),
		MaxWaitMillis: uint32(f.Wait / time.Millisecond),
	})
	if err != nil {
		return remote.Fetched{}, readError(ctx, node, part, err)
	}
	bd := resp.GetBounds()
	out := remote.Fetched{
		Bounds: partition.State{
			LogStart: bd.GetLogStart(), Next: bd.GetNext(), FirstTime: bd.GetFirstTimeUnixNanos(),
			LastTime: bd.GetLastTimeUnixNanos(), Bytes: bd.GetBytes(),
		},
		Watermark: bd.GetTimeWatermarkUnixNanos(),
		Batches:   make([]*partition.Batch, len(resp.GetBatches())),
	}
	if out.Bounds.LogStart > out.Bounds.Next {
		return remote.Fetched{}, fmt.Errorf("node %d partition %d: %w: log start %d after end %d", node, part, partition.ErrCorrupt, out.Bounds.LogStart, out.Bounds.Next)
	}
	for i, b := range resp.GetBatches() {
		// Parse checks the batch's checksum: what is delivered is what the
		// leader stored.
		rb, err := record.Parse(b.GetRecords())
		if err != nil {
			return remote.Fetched{}, fmt.Errorf("node %d partition %d offset %d: %w: %w", node, part, b.GetBase(), partition.ErrCorrupt, err)
		}
		if rb.Span() != b.GetSpan() || b.GetSpan() == 0 {
			return remote.Fetched{}, fmt.Errorf("node %d partition %d offset %d: %w: batch span %d, header says %d", node, part, b.GetBase(), partition.ErrCorrupt, rb.Span(), b.GetSpan())
		}
		out.Batches[i] = &partition.Batch{Base: b.GetBase(), AppendTime: b.GetAppendTimeUnixNanos(), Span: b.GetSpan(), Records: rb, KeyVersions: b.GetKeyVersions()}
	}
	return out, nil
}

// Locate resolves, on node, a time to an offset (at != nil) or an offset
// to its append time. Errors as Fetch's.
func (p *Peers) Locate(ctx context.Context, node uint64, addr string, topicID uint64, part uint32, at *int64, offset uint64) (uint64, int64, error) {
	if addr == "" {
		return 0, 0, fmt.Errorf("%w: no address for node %d", ErrUnavailable, node)
	}
	req := &peerv1.LocateRequest{Partition: p.ref(topicID, part)}
	if at != nil {
		req.What = &peerv1.LocateRequest_TimeUnixNanos{TimeUnixNanos: *at}
	} else {
		req.What = &peerv1.LocateRequest_Offset{Offset: offset}
	}
	resp, err := p.parts.get(addr).Locate(peerauth.WithTarget(ctx, node), req)
	if err != nil {
		return 0, 0, readError(ctx, node, part, err)
	}
	return resp.GetOffset(), resp.GetAppendTimeUnixNanos(), nil
}

// StoredOffset asks node, the leader of partition part of topic topicID,
// where the record with idempotency key key is stored there (ok false:
// not stored there). Errors as Fetch's.
func (p *Peers) StoredOffset(ctx context.Context, node uint64, addr string, topicID uint64, part uint32, key []byte) (uint64, bool, error) {
	if addr == "" {
		return 0, false, fmt.Errorf("%w: no address for node %d", ErrUnavailable, node)
	}
	req := &peerv1.LocateRequest{Partition: p.ref(topicID, part), What: &peerv1.LocateRequest_IdempotencyKey{IdempotencyKey: string(key)}}
	resp, err := p.parts.get(addr).Locate(peerauth.WithTarget(ctx, node), req)
	if err != nil {
		return 0, false, readError(ctx, node, part, err)
	}
	return resp.GetOffset(), resp.GetFound(), nil
}

// Bind binds idempotency keys in home partition home of topic topicID on
// node, which must lead it (relay: a node that does not forwards them
// once). An error that is ErrNotStored stored no record and may be sent
// again (a bind is idempotent).
func (p *Peers) Bind(ctx context.Context, node uint64, addr string, topicID uint64, home uint32, bs []partition.Binding, relay bool) ([]partition.Bound, error) {
	if addr == "" {
		return nil, fmt.Errorf("%w: %w: no address for node %d", ErrUnavailable, ErrNotStored, node)
	}
	req := &peerv1.BindRequest{Partition: p.ref(topicID, home), Bindings: make([]*peerv1.Binding, len(bs))}
	for i, b := range bs {
		req.Bindings[i] = &peerv1.Binding{IdempotencyKey: string(b.Key), Target: b.Target, Hash: b.Hash}
	}
	if relay {
		ctx = p.hop(ctx, true)
	}
	resp, err := p.parts.get(addr).Bind(peerauth.WithTarget(ctx, node), req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// Nothing reached the node: nothing was bound.
			return nil, fmt.Errorf("%w: %w: bind on node %d: %w", ErrUnavailable, ErrNotStored, node, err)
		}
		err = readError(ctx, node, home, err)
		if errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrNotStored) {
			// The node failed mid-call (it died, or the connection
			// broke): it may have bound the keys, but a bind sent again
			// answers as the first did (partition/bind.go), and no record
			// was stored. So it counts as not stored: the router waits
			// for the next leader and binds there, instead of failing the
			// publish at once during an election.
			err = fmt.Errorf("%w: %w", ErrNotStored, err)
		}
		return nil, err
	}
	if len(resp.GetBound()) != len(bs) {
		return nil, fmt.Errorf("%w: node %d answered %d bindings for %d", ErrUnavailable, node, len(resp.GetBound()), len(bs))
	}
	out := make([]partition.Bound, len(bs))
	for i, b := range resp.GetBound() {
		out[i] = partition.Bound{Partition: b.GetPartition(), Same: b.GetSame(), Stored: b.GetStored(), Offset: b.GetOffset(), AppendTime: b.GetAppendTimeUnixNanos()}
	}
	return out, nil
}

// notLeader reads a refusal that stored nothing: a *NotLeaderError naming
// the leader the answer's LeaderHeader names; nil if err is no such
// refusal. A dial that failed reached nobody, so it stored nothing too.
func notLeader(node uint64, topic string, part uint32, ce *connect.Error, err error) *NotLeaderError {
	var op *net.OpError
	if (errors.As(err, &op) && op.Op == "dial") || ce.Meta().Get(NotStoredHeader) != "" {
		nl := &NotLeaderError{Topic: topic, Partition: part, Node: node}
		nl.Leader, _ = strconv.ParseUint(ce.Meta().Get(LeaderHeader), 10, 64)
		return nl
	}
	return nil
}

// forwardError turns the leader's answer to a forwarded publish into this
// package's errors.
func forwardError(node uint64, topic string, part uint32, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w: forward to node %d: %w", ErrUnavailable, node, err)
	}
	if nl := notLeader(node, topic, part, ce, err); nl != nil {
		return fmt.Errorf("forward to node %d: %w: %v", node, nl, ce.Message())
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if c, ok := v.(*rewindv1.IdempotencyConflict); ok {
				return &RefusedError{Node: node, Refusal: RefusedConflict, Msg: ce.Message(), Conflict: &Conflict{
					Index: int(c.GetIndex()), Key: c.GetIdempotencyKey(), Partition: c.GetPartition(), Offset: c.GetOffset(),
					OffsetUnknown: c.GetMessageId() == "",
				}}
			}
			if c, ok := v.(*rewindv1.ConditionFailed); ok {
				return &RefusedError{Node: node, Refusal: RefusedCondition, Msg: ce.Message(), Condition: ConditionFailedFromProto(c)}
			}
		}
	}
	switch ce.Code() {
	case connect.CodeInvalidArgument:
		return &RefusedError{Node: node, Refusal: RefusedInvalid, Msg: ce.Message()}
	case connect.CodeNotFound:
		return &RefusedError{Node: node, Refusal: RefusedNotFound, Msg: ce.Message()}
	case connect.CodeDeadlineExceeded:
		return fmt.Errorf("forward to node %d: %w", node, context.DeadlineExceeded)
	case connect.CodeResourceExhausted:
		// The leader refused for lack of disk space or because too much is
		// pending: the client gets the same code as from the leader itself
		// (back off, not fail over as from Unavailable).
		cause := partition.ErrBusy
		if strings.Contains(ce.Message(), partition.ErrDiskFull.Error()) {
			cause = partition.ErrDiskFull
		}
		return fmt.Errorf("forward to node %d: %w (%s)", node, cause, ce.Message())
	}
	return fmt.Errorf("%w: forward to node %d: %s: %s", ErrUnavailable, node, ce.Code(), ce.Message())
}

// readError turns a leader's refusal of a fetch, locate or bind into this
// package's errors. Only the caller's own context ends a read for good: a
// call the other end cancelled (it stopped or died mid-answer) is worth
// trying again.
func readError(ctx context.Context, node uint64, part uint32, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("read from node %d: %w", node, cerr)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w: read from node %d: %w", ErrUnavailable, node, err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%w: read from node %d: %s", ErrUnavailable, node, ce.Message())
	}
	if nl := notLeader(node, "", part, ce, err); nl != nil {
		return fmt.Errorf("read from node %d: %w", node, nl)
	}
	switch ce.Code() {
	case connect.CodeNotFound:
		return &RefusedError{Node: node, Refusal: RefusedNotFound, Msg: ce.Message()}
	case connect.CodeOutOfRange:
		return fmt.Errorf("%w: %s", partition.ErrBelowStart, ce.Message())
	case connect.CodeInvalidArgument:
		return &RefusedError{Node: node, Refusal: RefusedInvalid, Msg: ce.Message()}
	case connect.CodeDataLoss:
		return fmt.Errorf("node %d: %w: %s", node, partition.ErrCorrupt, ce.Message())
	case connect.CodeFailedPrecondition:
		return &RefusedError{Node: node, Refusal: RefusedPrecondition, Msg: ce.Message()}
	}
	return fmt.Errorf("%w: read from node %d: %s: %s", ErrUnavailable, node, ce.Code(), ce.Message())
}

// clients keeps one Connect client per peer address.
type clients[C any] struct {
	dial func(addr string) C
	mu   sync.Mutex
	m    map[string]C
}

func newClients[C any](dial func(addr string) C) *clients[C] {
	return &clients[C]{dial: dial, m: make(map[string]C)}
}

func (p *clients[C]) get(addr string) C {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.m[addr]
	if !ok {
		c = p.dial(addr)
		p.m[addr] = c
	}
	return c
}

// carrier is the client interceptor of calls sent on a caller's behalf:
// it gives them the caller's credentials.
type carrier func(ctx context.Context, h http.Header)

func (c carrier) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		c(ctx, req.Header())
		return next(ctx, req)
	}
}

func (c carrier) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c carrier) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// ReadAnswer is a leader's answer to an event-store read.
type ReadAnswer struct {
	Records []ReadRecord
	// Key reads: the key's last version and the earliest still held.
	Head, Earliest       uint64
	HasHead, HasEarliest bool
	// Position is the partition's last offset when read (HasPosition
	// false: the partition is empty). More: the limit cut the read short.
	Position          uint64
	HasPosition, More bool
}

// ReadRecord is one record of a ReadAnswer.
type ReadRecord struct {
	record.Record
	Offset     uint64
	AppendTime int64
	Version    uint64
	HasVersion bool
}

// ReadSpec is one event-store read (EventStoreService.Read): the records
// of one key, or those a query matches, in one partition.
type ReadSpec struct {
	Key          []byte
	Query        partition.Query
	Partition    uint32
	HasPartition bool
	// One start at most: a key version, an offset, a time (Unix
	// nanoseconds), or the last N.
	FromVersion, FromOffset *uint64
	FromTime                *int64
	Last                    uint64
	Backward                bool
	Limit                   int
}

// Read sends an event-store read of partition part to node on the member
// path, marked forwarded (relay: relayed), for it to serve only if it
// leads the partition. Errors as Publish's.
func (p *Peers) Read(ctx context.Context, node uint64, addr, topic string, part uint32, spec ReadSpec, relay bool) (ReadAnswer, error) {
	if addr == "" {
		return ReadAnswer{}, fmt.Errorf("%w: %w: no address for node %d", ErrUnavailable, ErrNotStored, node)
	}
	req := &rewindv1.ReadRequest{Topic: topic, Partition: &part, Backward: spec.Backward, Limit: uint32(spec.Limit)}
	if len(spec.Key) > 0 {
		req.Select = &rewindv1.ReadRequest_Key{Key: spec.Key}
	} else {
		req.Select = &rewindv1.ReadRequest_Query{Query: QueryToProto(spec.Query)}
	}
	switch {
	case spec.FromVersion != nil:
		req.From = &rewindv1.ReadRequest_FromVersion{FromVersion: *spec.FromVersion}
	case spec.FromOffset != nil:
		req.From = &rewindv1.ReadRequest_FromOffset{FromOffset: *spec.FromOffset}
	case spec.FromTime != nil:
		req.From = &rewindv1.ReadRequest_FromTime{FromTime: timestamppb.New(time.Unix(0, *spec.FromTime))}
	case spec.Last > 0:
		req.From = &rewindv1.ReadRequest_Last{Last: spec.Last}
	}
	resp, err := p.store.get(addr).Read(p.hop(peerauth.WithTarget(ctx, node), relay), req)
	if err != nil {
		return ReadAnswer{}, forwardError(node, topic, part, err)
	}
	out := ReadAnswer{
		Head: resp.GetHeadVersion(), HasHead: resp.HeadVersion != nil, Earliest: resp.GetEarliestVersion(), HasEarliest: resp.EarliestVersion != nil,
		Position: resp.GetPosition(), HasPosition: resp.Position != nil, More: resp.GetMore(),
	}
	for _, r := range resp.GetRecords() {
		rr := ReadRecord{
			Record: record.Record{Key: r.GetKey(), Value: r.GetValue(), IdempotencyKey: []byte(r.GetIdempotencyKey()), EventTime: r.GetEventTimeUnixNanos()},
			Offset: r.GetOffset(), AppendTime: r.GetAppendTimeUnixNanos(), Version: r.GetKeyVersion(), HasVersion: r.KeyVersion != nil,
		}
		for _, h := range r.GetHeaders() {
			rr.Headers = append(rr.Headers, record.Header{Key: []byte(h.GetKey()), Value: h.GetValue()})
		}
		out.Records = append(out.Records, rr)
	}
	return out, nil
}
