package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/quota"
)

// errUnsupportedVersion is ApiVersions' answer to a version it does not
// know.
var errUnsupportedVersion = kerr.UnsupportedVersion.Code

// codeTable maps the classes of Rewind's errors to Kafka error codes, the
// one table at this edge (as api's errors.go is for Connect). The codes
// follow what Kafka and franz-go's kfake answer for the same situations,
// so that clients retry what is retriable and surface the rest. Order
// matters: the first class an error is wins.
var codeTable = []struct {
	err  error
	code *kerr.Error
}{
	{broker.ErrNoTopic, kerr.UnknownTopicOrPartition},
	{broker.ErrTopicDeleted, kerr.UnknownTopicOrPartition},
	{broker.ErrTopicExists, kerr.TopicAlreadyExists},
	{partition.ErrNotLeader, kerr.NotLeaderForPartition},
	{partition.ErrCorrupt, kerr.CorruptMessage},
	{partition.ErrBelowStart, kerr.OffsetOutOfRange},
	{partition.ErrDiskFull, kerr.KafkaStorageError},
	{partition.ErrBusy, kerr.RequestTimedOut},
	{partition.ErrOutcomeUnknown, kerr.RequestTimedOut},
	{partition.ErrLost, kerr.NotLeaderForPartition},
	{partition.ErrTierUnavailable, kerr.KafkaStorageError},
	{quota.ErrExceeded, kerr.ThrottlingQuotaExceeded},
	{broker.ErrClosed, kerr.NotLeaderForPartition},
	{broker.ErrUnavailable, kerr.NotLeaderForPartition},
	{broker.ErrNotReady, kerr.LeaderNotAvailable},
	{broker.ErrInvalid, kerr.InvalidRequest},
	{cursor.ErrInvalid, kerr.InvalidRequest},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
}

// codeOf is the Kafka error code for err (0 for nil). An error of no
// known class is UNKNOWN_SERVER_ERROR; its text stays in the server's
// log, not on the wire.
func codeOf(err error) int16 {
	if err == nil {
		return 0
	}
	var oor *cursor.OutOfRangeError
	if errors.As(err, &oor) {
		return kerr.OffsetOutOfRange.Code
	}
	var big *broker.RecordTooLargeError
	if errors.As(err, &big) {
		return kerr.MessageTooLarge.Code
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	for _, e := range codeTable {
		if errors.Is(err, e.err) {
			return e.code.Code
		}
	}
	return kerr.UnknownServerError.Code
}

// batchError is a produce batch refused before it reaches the broker,
// with the Kafka code it is answered with and a message for the client
// (Produce v8+ carries it).
type batchError struct {
	code *kerr.Error
	msg  string
}

func (e *batchError) Error() string { return "kafka: " + e.code.Message + ": " + e.msg }

// As lets codeOf find the Kafka code through errors.As on *kerr.Error.
func (e *batchError) As(target any) bool {
	if t, ok := target.(**kerr.Error); ok {
		*t = e.code
		return true
	}
	return false
}
