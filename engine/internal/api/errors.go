package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/groups"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/resume"
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
	{partition.ErrFenced, connect.CodeFailedPrecondition},
	{broker.ErrNoTopic, connect.CodeNotFound},
	{broker.ErrNoGroup, connect.CodeNotFound},
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
	{broker.ErrClosed, connect.CodeUnavailable},
	{broker.ErrUnavailable, connect.CodeUnavailable},
	{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
	{context.Canceled, connect.CodeCanceled},
}

// toConnect maps err to a Connect error with details. Errors not in the
// table become Internal with a generic message; the real one is logged.
func toConnect(log hclog.Logger, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var oor *cursor.OutOfRangeError
	if errors.As(err, &oor) {
		e := connect.NewError(connect.CodeOutOfRange, err)
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
	var conflict *broker.ConflictError
	if errors.As(err, &conflict) {
		e := connect.NewError(connect.CodeFailedPrecondition, err)
		addDetail(e, &rewindv1.IdempotencyConflict{
			Index: uint32(conflict.Index), IdempotencyKey: conflict.Key, Partition: conflict.Partition,
			Offset: conflict.Offset, MessageId: msgid.ID{TopicID: conflict.TopicID, Partition: conflict.Partition, Offset: conflict.Offset}.String(),
		})
		return e
	}
	var big *broker.RecordTooLargeError
	if errors.As(err, &big) {
		e := connect.NewError(connect.CodeInvalidArgument, err)
		addDetail(e, &rewindv1.RecordTooLarge{Index: uint32(big.Index), Size: uint64(big.Size), MaxRecordBytes: uint64(big.Max)})
		return e
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			if c.code == connect.CodeDataLoss {
				log.Error("data integrity check failed", "error", err)
			}
			return connect.NewError(c.code, err)
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

// invalidf is an InvalidArgument error for a malformed request.
func invalidf(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

func unixNano(ns int64) time.Time { return time.Unix(0, ns) }
