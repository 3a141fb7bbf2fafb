package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/groups"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/remote"
	"github.com/rewind-io/rewind/engine/internal/resume"
	"github.com/rewind-io/rewind/engine/internal/route"
	"github.com/rewind-io/rewind/engine/internal/stream"
	"github.com/rewind-io/rewind/sandbox"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// codes is the one table from internal errors to Connect codes. The first
// match wins, so more specific errors come first.
var codes = []struct {
	err  error
	code connect.Code
}{
	{partition.ErrCorrupt, connect.CodeDataLoss},
	{partition.ErrConflict, connect.CodeFailedPrecondition},
	{partition.ErrCondition, connect.CodeFailedPrecondition},
	{partition.ErrNoKeyIndex, connect.CodeFailedPrecondition},
	{partition.ErrFenced, connect.CodeFailedPrecondition},
	{broker.ErrNoTopic, connect.CodeNotFound},
	{broker.ErrNoGroup, connect.CodeNotFound},
	{broker.ErrNoPlugin, connect.CodeNotFound},
	{groups.ErrDeleted, connect.CodeNotFound},
	{groups.ErrUnknownGeneration, connect.CodeFailedPrecondition},
	{groups.ErrHasMembers, connect.CodeFailedPrecondition},
	{broker.ErrTopicDeleted, connect.CodeNotFound},
	{broker.ErrTopicExists, connect.CodeAlreadyExists},
	{broker.ErrInvalid, connect.CodeInvalidArgument},
	{cursor.ErrInvalid, connect.CodeInvalidArgument},
	{msgid.ErrInvalid, connect.CodeInvalidArgument},
	{resume.ErrInvalid, connect.CodeInvalidArgument},
	{partition.ErrBelowStart, connect.CodeOutOfRange},
	{partition.ErrBusy, connect.CodeResourceExhausted},
	{partition.ErrDiskFull, connect.CodeResourceExhausted},
	{partition.ErrStalePlan, connect.CodeAborted},
	{partition.ErrOutcomeUnknown, connect.CodeUnavailable},
	{partition.ErrTierUnavailable, connect.CodeUnavailable},
	{broker.ErrClosed, connect.CodeUnavailable},
	{broker.ErrUnavailable, connect.CodeUnavailable},
	{remote.ErrFailed, connect.CodeUnavailable},
	{broker.ErrFailedPrecondition, connect.CodeFailedPrecondition},
	{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
	{context.Canceled, connect.CodeCanceled},
}

// Error metadata that tells a forwarding node what a refusal means.
const (
	// NotStoredHeader is set on an error whose request stored nothing
	// (safe to retry without duplicating).
	NotStoredHeader = route.NotStoredHeader
	// LeaderHeader names the node the answering node believes leads the
	// partition.
	LeaderHeader = route.LeaderHeader
	// LeaderAddressHeader is the address clients reach that leader at, on
	// an Unavailable error of a node that could not get the request to it
	// (it cannot reach the leader, or lost it meanwhile): the client may
	// send the request there itself.
	LeaderAddressHeader = "Rewind-Leader-Address"
	// CoordinatorHeader is the address of the node that coordinates
	// subscriber groups, on a group request sent elsewhere.
	CoordinatorHeader = "Rewind-Coordinator"
	// ForwardedHeader marks a publish forwarded by another node (its id):
	// the receiver serves it only if it leads the partition.
	ForwardedHeader = route.ForwardedHeader
	// RelayedHeader marks a publish or binding relayed by another node
	// (its id) that cannot reach the partition's leader: a receiver that
	// does not lead the partition forwards it once to the leader.
	RelayedHeader = route.RelayedHeader
)

// hopContext marks ctx with how another node sent the request the handler
// serves (forwarded or relayed), from the request's headers: only on the
// member path (member.go), where the member guard checked the sender.
func hopContext(ctx context.Context) context.Context {
	ci, ok := connect.CallInfoForHandlerContext(ctx)
	if !ok {
		return ctx
	}
	if _, member := memberOf(ctx); !member {
		return ctx
	}
	switch {
	case ci.RequestHeader().Get(RelayedHeader) != "":
		return route.WithHop(ctx, route.Relayed)
	case ci.RequestHeader().Get(ForwardedHeader) != "":
		return route.WithHop(ctx, route.Forwarded)
	}
	return ctx
}

// toConnect maps err to a Connect error with details. Errors not in the
// table become Internal with a generic message; the real one is logged.
func toConnect(log hclog.Logger, err error) error {
	out := toConnectCode(log, err)
	var ce *connect.Error
	if out == nil || !errors.As(out, &ce) {
		return out
	}
	if errors.Is(err, broker.ErrNotStored) {
		ce.Meta().Set(NotStoredHeader, "1")
	}
	var nc *broker.NotCoordinatorError
	if errors.As(err, &nc) && nc.Addr != "" {
		ce.Meta().Set(CoordinatorHeader, nc.Addr)
	}
	var nl *broker.NotLeaderError
	if errors.As(err, &nl) && nl.Leader != 0 {
		ce.Meta().Set(LeaderHeader, strconv.FormatUint(nl.Leader, 10))
	}
	var lh *broker.LeaderHintError
	if errors.As(err, &lh) {
		ce.Meta().Set(LeaderHeader, strconv.FormatUint(lh.Leader, 10))
		ce.Meta().Set(LeaderAddressHeader, lh.Addr)
	}
	return ce
}

func toConnectCode(log hclog.Logger, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var oor *cursor.OutOfRangeError
	if errors.As(err, &oor) {
		e := connect.NewError(connect.CodeOutOfRange, clip(err))
		d := &rewindv1.OffsetRange{
			Partition: oor.Partition, RequestedOffset: oor.Requested,
			LogStartOffset: oor.LogStart, EndOffset: oor.End,
		}
		if oor.EarliestTime != 0 {
			d.EarliestTime = timestamppb.New(unixNano(oor.EarliestTime))
		}
		addDetail(e, d)
		return e
	}
	var cond *broker.ConditionError
	if errors.As(err, &cond) {
		e := connect.NewError(connect.CodeFailedPrecondition, clip(err))
		addDetail(e, route.ConditionFailedToProto(cond.Partition, cond.ConditionError))
		return e
	}
	var conflict *broker.ConflictError
	if errors.As(err, &conflict) {
		e := connect.NewError(connect.CodeFailedPrecondition, clip(err))
		d := &rewindv1.IdempotencyConflict{Index: uint32(conflict.Index), IdempotencyKey: conflict.Key, Partition: conflict.Partition}
		if !conflict.OffsetUnknown {
			d.Offset, d.MessageId = conflict.Offset, msgid.ID{TopicID: conflict.TopicID, Partition: conflict.Partition, Offset: conflict.Offset}.String()
		}
		addDetail(e, d)
		return e
	}
	if e := filterConnectError(err); e != nil {
		return e
	}
	var big *broker.RecordTooLargeError
	if errors.As(err, &big) {
		e := connect.NewError(connect.CodeInvalidArgument, clip(err))
		addDetail(e, &rewindv1.RecordTooLarge{Index: uint32(big.Index), Size: uint64(big.Size), MaxRecordBytes: uint64(big.Max)})
		return e
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			if c.code == connect.CodeDataLoss {
				log.Error("data integrity check failed", "error", err)
			}
			return connect.NewError(c.code, clip(err))
		}
	}
	log.Error("internal error", "error", err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error (see the server log)"))
}

func addDetail(e *connect.Error, m proto.Message) {
	if d, err := connect.NewErrorDetail(m); err == nil {
		e.AddDetail(d)
	}
}

// invalidf is an InvalidArgument error for a malformed request. Strings
// from the request go through echo.Quote.
func invalidf(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, clip(fmt.Errorf(format, args...)))
}

// clip bounds the message of an error on its way to a client
// (echo.Clip): the errors that quote a request's strings do so through
// echo.Quote, and this catches any that do not, so that no answer repeats
// a megabyte of input. errors.Is and errors.As still see err.
func clip(err error) error {
	if len(err.Error()) <= echo.MaxMessage {
		return err
	}
	return clipped{err}
}

type clipped struct{ err error }

func (c clipped) Error() string { return echo.Clip(c.err.Error()) }
func (c clipped) Unwrap() error { return c.err }

func unixNano(ns int64) time.Time { return time.Unix(0, ns) }

// filterFailures maps sandbox failure kinds to the API's enum and Connect
// codes: the module's own faults abort the stream, exhausted budgets are
// ResourceExhausted, refused modules InvalidArgument.
var filterFailures = map[sandbox.Kind]struct {
	failure rewindv1.FilterFailure
	code    connect.Code
}{
	sandbox.KindInvalid: {rewindv1.FilterFailure_FILTER_FAILURE_INVALID, connect.CodeInvalidArgument},
	sandbox.KindTrap:    {rewindv1.FilterFailure_FILTER_FAILURE_TRAP, connect.CodeAborted},
	sandbox.KindFuel:    {rewindv1.FilterFailure_FILTER_FAILURE_FUEL, connect.CodeResourceExhausted},
	sandbox.KindOutput:  {rewindv1.FilterFailure_FILTER_FAILURE_OUTPUT, connect.CodeAborted},
	sandbox.KindLimit:   {rewindv1.FilterFailure_FILTER_FAILURE_LIMIT, connect.CodeResourceExhausted},
	sandbox.KindGuest:   {rewindv1.FilterFailure_FILTER_FAILURE_GUEST, connect.CodeAborted},
	sandbox.KindConfig:  {rewindv1.FilterFailure_FILTER_FAILURE_CONFIG, connect.CodeInvalidArgument},
}

// filterConnectError maps a failed filter (mid-stream, or a module refused
// at upload or subscribe) to a Connect error with a FilterError detail; nil
// when err is no sandbox failure.
func filterConnectError(err error) *connect.Error {
	var se *sandbox.Error
	if !errors.As(err, &se) {
		return nil
	}
	f, ok := filterFailures[se.Kind]
	if !ok {
		return nil
	}
	d := filterErrorOf(err)
	msg := d.Reason
	var fe *stream.FilterError
	if errors.As(err, &fe) {
		msg = fmt.Sprintf("filter %s failed on partition %d, %s", fe.Module, fe.Partition, d.Reason)
	}
	e := connect.NewError(f.code, clip(errors.New(msg)))
	addDetail(e, d)
	return e
}

// filterErrorOf is the FilterError detail of err. Its reason is one line:
// the sandbox's kind, the reason (for a trap, the guest's crash report
// when it printed one, never the wasm stack trace), and where the module
// failed, when the sandbox could tell which record it was on.
func filterErrorOf(err error) *rewindv1.FilterError {
	d := &rewindv1.FilterError{Reason: err.Error()}
	var se *sandbox.Error
	if errors.As(err, &se) {
		d.Failure = filterFailures[se.Kind].failure
		d.Reason = se.Error()
		if se.Module != "" {
			d.Module = "sha256:" + se.Module
		}
	}
	var fe *stream.FilterError
	if errors.As(err, &fe) {
		d.Module, d.Partition, d.Offset, d.ResumeToken = fe.Module, fe.Partition, fe.Offset, fe.ResumeToken
		if se != nil {
			d.Reason = "in a call over the records from offset " + strconv.FormatUint(fe.Offset, 10) + ": " + se.Message()
		}
	}
	if se != nil && se.Located {
		d.Reason = "record at offset " + strconv.FormatUint(se.Offset, 10) + ": " + se.Message()
	}
	return d
}
