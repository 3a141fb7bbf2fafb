package api

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/broker"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// testServer is a real broker (in memory) behind the real handlers on a
// loopback port, for one test.
func testServer(t *testing.T) (*Server, string) {
	t.Helper()
	b, err := broker.Open(broker.Config{Dir: "data", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	s := New(b, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		b.Close()
	})
	return s, srv.URL
}

// TestRecordSizeLimitIsWhatTheUserSends: a record's limit counts the bytes
// the publisher controls (key, value, headers, idempotency key), not the
// framing, so a value of exactly the advertised size is accepted and one
// byte more is refused, naming the limit (issue 13, item 6).
func TestRecordSizeLimitIsWhatTheUserSends(t *testing.T) {
	_, url := testServer(t)
	ctx := context.Background()
	topics := rewindv1connect.NewTopicServiceClient(httpClient(), url)
	created, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 1}})
	if err != nil {
		t.Fatal(err)
	}
	limit := int(created.GetTopic().GetConfig().GetMaxRecordBytes())
	if limit != broker.DefaultMaxRecordBytes {
		t.Fatalf("advertised limit %d, want the default %d", limit, broker.DefaultMaxRecordBytes)
	}
	pub := rewindv1connect.NewPublishServiceClient(httpClient(), url)
	publish := func(r *rewindv1.PublishRecord) error {
		_, err := pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{r}})
		return err
	}
	if err := publish(&rewindv1.PublishRecord{Value: make([]byte, limit)}); err != nil {
		t.Fatalf("a value of exactly the advertised %d bytes: %v", limit, err)
	}
	// Every byte the user sends counts, wherever it is.
	parts := &rewindv1.PublishRecord{Key: []byte("kk"), Value: make([]byte, limit-9), IdempotencyKey: "i",
		Headers: []*rewindv1.Header{{Key: "h", Value: []byte("vvv")}, {Key: "", Value: nil}, {Key: "x"}}}
	if err := publish(parts); err != nil {
		t.Fatalf("a record of exactly %d bytes in all its fields: %v", limit, err)
	}
	for name, r := range map[string]*rewindv1.PublishRecord{
		"value":           {Value: make([]byte, limit+1)},
		"key":             {Key: []byte("k"), Value: make([]byte, limit)},
		"header":          {Value: make([]byte, limit), Headers: []*rewindv1.Header{{Key: "h"}}},
		"idempotency key": {Value: make([]byte, limit), IdempotencyKey: "i"},
	} {
		err := publish(r)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "1048576") {
			t.Errorf("one byte over in the %s: got %v, want InvalidArgument naming the limit", name, err)
		}
		var ce *connect.Error
		if errors.As(err, &ce) {
			found := false
			for _, d := range ce.Details() {
				if m, err := d.Value(); err == nil {
					if big, ok := m.(*rewindv1.RecordTooLarge); ok {
						found = true
						if big.GetSize() != uint64(limit+1) || big.GetMaxRecordBytes() != uint64(limit) {
							t.Errorf("%s: detail %v, want size %d of %d", name, big, limit+1, limit)
						}
					}
				}
			}
			if !found {
				t.Errorf("%s: no RecordTooLarge detail", name)
			}
		}
	}
	// Headers are bounded in number too, so the framing stays small.
	many := make([]*rewindv1.Header, broker.MaxHeaders+1)
	for i := range many {
		many[i] = &rewindv1.Header{}
	}
	if err := publish(&rewindv1.PublishRecord{Headers: many}); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "headers") {
		t.Errorf("%d headers: got %v, want InvalidArgument", len(many), err)
	}
}
