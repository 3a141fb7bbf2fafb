package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
)

// TestPublishRefusesEventTimesThatWouldWrap: an event time outside int64
// Unix nanoseconds is refused before anything is sent (UnixNano wraps it
// into another year).
func TestPublishRefusesEventTimesThatWouldWrap(t *testing.T) {
	c := client.New("http://127.0.0.1:1") // nothing listens: the check comes first
	for _, at := range []time.Time{
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		_, err := c.Publish(context.Background(), "t", client.Message{Value: []byte("v"), EventTime: at})
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "event time") {
			t.Errorf("event time %s: %v, want InvalidArgument about the event time", at, err)
		}
	}
}
