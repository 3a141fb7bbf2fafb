package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/quota"
	"github.com/rewind-io/rewind/engine/internal/stream"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Quotas (package quota) apply per principal when authentication is on:
// publish bytes per second (refused over it, ResourceExhausted with the
// wait in Rewind-Retry-After-Ms), replay bytes per second (paced, never
// failed; live reads exempt) and concurrent streams. The limits are the
// authorization state's (auth.State.QuotaFor), read on every call; what
// each principal was charged is this node's (ListQuotas, /metrics).

// quotaLimits reads the limits of a principal from the authorization
// state; none with authentication off.
func (s *Server) quotaLimits(principal string) quota.Limits {
	if s.guard == nil {
		return quota.Limits{}
	}
	return s.b.Auth().QuotaFor(principal)
}

// limiter returns the server's quota limiter, made on first use.
func (s *Server) limiter() *quota.Limiter {
	s.quotaOnce.Do(func() { s.quotas = quota.New(s.quotaLimits) })
	return s.quotas
}

// principalOf is the caller's principal ("" without authentication). A
// member's hop (a forwarded publish) is charged where the client called.
func principalOf(ctx context.Context) (string, bool) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return "", false
	}
	return id.Principal, true
}

// quotaError turns a refusal into ResourceExhausted, the wait in its
// message and in the Rewind-Retry-After-Ms header (a topic or partition
// quota has no wait: the message names the limit and the usage).
func quotaError(err error) error {
	var ex *quota.Exceeded
	if !errors.As(err, &ex) {
		return err
	}
	ce := connect.NewError(connect.CodeResourceExhausted, err)
	if ex.RetryAfter > 0 {
		ce.Meta().Set("Rewind-Retry-After-Ms", fmt.Sprint(max(ex.RetryAfter.Milliseconds(), 1)))
	}
	return ce
}

// chargePublish admits a client's publish of these records, plus extra
// bytes the server added to them (a trace stamp), or refuses it over its
// principal's quota.
func (s *Server) chargePublish(ctx context.Context, recs []*rewindv1.PublishRecord, extra int) error {
	if s.guard == nil || isHop(ctx) {
		return nil
	}
	p, ok := principalOf(ctx)
	if !ok {
		return nil
	}
	n := extra
	for _, r := range recs {
		n += len(r.GetKey()) + len(r.GetValue()) + len(r.GetIdempotencyKey())
		for _, h := range r.GetHeaders() {
			n += len(h.GetKey()) + len(h.GetValue())
		}
	}
	return quotaError(s.limiter().Publish(p, n))
}

// openStream counts a stream against its principal's cap and sets the
// replay pacing of opts; the returned function ends it.
func (s *Server) openStream(ctx context.Context, opts *stream.Options) (release func(), err error) {
	p, ok := principalOf(ctx)
	if s.guard == nil || !ok {
		return func() {}, nil
	}
	l := s.limiter()
	release, err = l.OpenStream(p)
	if err != nil {
		return nil, quotaError(err)
	}
	opts.Pace = func(ctx context.Context, n int) error { return l.Replay(ctx, p, n) }
	opts.PaceFuel = func(ctx context.Context, fuel uint64) error { return l.Fuel(ctx, p, fuel) }
	return release, nil
}

// SetQuota implements rewindv1connect.AuthServiceHandler.
func (s *Server) SetQuota(ctx context.Context, req *rewindv1.SetQuotaRequest) (*rewindv1.SetQuotaResponse, error) {
	if err := s.authOn(); err != nil {
		return nil, err
	}
	q := req.GetQuota()
	c := auth.SetQuota{Principal: req.GetPrincipal(), Default: req.GetDefaultQuota(), Limits: quota.Limits{
		PublishBytesPerSec: q.GetPublishBytesPerSec(), ReplayBytesPerSec: q.GetReplayBytesPerSec(), Streams: q.GetStreams(),
		FilterFuelPerSec: q.GetFilterFuelPerSec(), Topics: q.GetTopics(), Partitions: q.GetPartitions(),
	}}
	if _, err := s.b.ProposeAuth(ctx, auth.Command{SetQuota: &c}); err != nil {
		return nil, s.authError(err)
	}
	return &rewindv1.SetQuotaResponse{}, nil
}

func quotaProto(l quota.Limits) *rewindv1.Quota {
	return &rewindv1.Quota{PublishBytesPerSec: l.PublishBytesPerSec, ReplayBytesPerSec: l.ReplayBytesPerSec, Streams: l.Streams,
		FilterFuelPerSec: l.FilterFuelPerSec, Topics: l.Topics, Partitions: l.Partitions}
}

// ListQuotas implements rewindv1connect.AuthServiceHandler.
func (s *Server) ListQuotas(ctx context.Context, _ *rewindv1.ListQuotasRequest) (*rewindv1.ListQuotasResponse, error) {
	if err := s.authOn(); err != nil {
		return nil, err
	}
	st := s.b.Auth()
	out := &rewindv1.ListQuotasResponse{Quotas: map[string]*rewindv1.Quota{}}
	for p, l := range st.Quotas {
		out.Quotas[p] = quotaProto(l)
	}
	if !st.DefaultQuota.IsZero() {
		out.DefaultQuota = quotaProto(st.DefaultQuota)
	}
	owned := s.b.TopicsOwned()
	for _, u := range s.limiter().Usage() {
		o := owned[u.Principal]
		delete(owned, u.Principal)
		out.Usage = append(out.Usage, &rewindv1.QuotaUsage{
			Principal: u.Principal, PublishedBytes: u.PublishBytes, ReplayedBytes: u.ReplayBytes,
			OpenStreams: uint32(u.Streams), Refused: u.Refused, Paced: durationpb.New(time.Duration(u.PacedNanos)),
			FilterFuel: u.Fuel, Topics: clamp32(o.Topics), Partitions: clamp32(o.Partitions),
		})
	}
	for p, o := range owned { // creators this node charged nothing yet
		out.Usage = append(out.Usage, &rewindv1.QuotaUsage{Principal: p, Paced: durationpb.New(0),
			Topics: clamp32(o.Topics), Partitions: clamp32(o.Partitions)})
	}
	slices.SortFunc(out.Usage, func(a, b *rewindv1.QuotaUsage) int { return strings.Compare(a.GetPrincipal(), b.GetPrincipal()) })
	return out, nil
}

func clamp32(v uint64) uint32 { return uint32(min(v, math.MaxUint32)) }
