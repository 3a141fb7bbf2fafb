package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/echo"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// testServer is a real broker (in memory) behind the real handlers on a
// loopback port (HTTP/1.1 and h2c, as rewind serve), for one test; setup
// may change the Server before it serves.
func testServer(t *testing.T, setup ...func(*Server)) (*Server, string) {
	t.Helper()
	b, err := broker.Open(broker.Config{Dir: "data", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	s := New(b, Config{})
	for _, f := range setup {
		f(s)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
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

// TestErrorsDoNotEchoHugeInput: a request with a megabyte-long name gets a
// short error that still says what is wrong (issue 13, item 10).
func TestErrorsDoNotEchoHugeInput(t *testing.T) {
	_, url := testServer(t)
	ctx := context.Background()
	huge := strings.Repeat("n", 1_000_000)
	topics := rewindv1connect.NewTopicServiceClient(httpClient(), url)
	if _, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	pub := rewindv1connect.NewPublishServiceClient(httpClient(), url)
	groups := rewindv1connect.NewGroupServiceClient(httpClient(), url)
	plugins := rewindv1connect.NewPluginServiceClient(httpClient(), url)
	sub := rewindv1connect.NewSubscribeServiceClient(httpClient(), url)
	subscribe := func(req *rewindv1.SubscribeRequest) error {
		st, err := sub.Subscribe(ctx, req)
		if err != nil {
			return err
		}
		defer st.Close()
		for st.Receive() {
		}
		return st.Err()
	}
	end := &rewindv1.StopPosition{Position: &rewindv1.StopPosition_End{End: true}}
	for _, c := range []struct {
		name string
		call func() error
		want string // what the message must still name
	}{
		{"create topic", func() error {
			_, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: huge, Config: &rewindv1.TopicConfig{Partitions: 1}})
			return err
		}, "use 1 to 249 characters"},
		{"describe topic", func() error {
			_, err := topics.DescribeTopic(ctx, &rewindv1.DescribeTopicRequest{Name: huge})
			return err
		}, "no such topic"},
		{"delete topic", func() error {
			_, err := topics.DeleteTopic(ctx, &rewindv1.DeleteTopicRequest{Name: huge})
			return err
		}, "topic name"},
		{"alter topic", func() error {
			_, err := topics.AlterTopic(ctx, &rewindv1.AlterTopicRequest{Name: huge})
			return err
		}, "topic name"},
		{"publish", func() error {
			_, err := pub.Publish(ctx, &rewindv1.PublishRequest{Topic: huge, Records: []*rewindv1.PublishRecord{{Value: []byte("v")}}})
			return err
		}, "no such topic"},
		{"subscribe", func() error { return subscribe(&rewindv1.SubscribeRequest{Topic: huge, Stop: end}) }, "no such topic"},
		{"subscribe group", func() error { return subscribe(&rewindv1.SubscribeRequest{Topic: "t", Group: huge}) }, "group name"},
		{"start message ID", func() error {
			return subscribe(&rewindv1.SubscribeRequest{Topic: "t", Stop: end,
				Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_MessageId{MessageId: huge}}})
		}, "start message ID"},
		{"resume token", func() error {
			return subscribe(&rewindv1.SubscribeRequest{Topic: "t", Stop: end,
				Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_ResumeToken{ResumeToken: huge}}})
		}, "resume token"},
		{"describe group", func() error {
			_, err := groups.DescribeGroup(ctx, &rewindv1.DescribeGroupRequest{Group: huge})
			return err
		}, "group name"},
		{"reset group", func() error {
			_, err := groups.ResetGroup(ctx, &rewindv1.ResetGroupRequest{Group: "g", Topic: "t", DryRun: true,
				Target: &rewindv1.ResetTarget{Target: &rewindv1.ResetTarget_MessageId{MessageId: huge}}})
			return err
		}, "reset message ID"},
		{"get plugin", func() error {
			_, err := plugins.GetPlugin(ctx, &rewindv1.GetPluginRequest{Plugin: huge})
			return err
		}, "plugin"},
		{"upload plugin", func() error {
			_, err := plugins.UploadPlugin(ctx, &rewindv1.UploadPluginRequest{Name: huge, Module: []byte("\x00asm")})
			return err
		}, "plugin name"},
	} {
		err := c.call()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if msg := err.Error(); len(msg) > 2*echo.MaxMessage || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d-byte error %.300q..., want a short one naming %q", c.name, len(msg), msg, c.want)
		}
	}
}

// TestTopicNamesMayNotStartWithADash: such a name reads as a flag on every
// command line that names it (issue 13).
func TestTopicNamesMayNotStartWithADash(t *testing.T) {
	_, url := testServer(t)
	topics := rewindv1connect.NewTopicServiceClient(httpClient(), url)
	for _, name := range []string{"-x", "--from", "-"} {
		_, err := topics.CreateTopic(context.Background(), &rewindv1.CreateTopicRequest{Name: name, Config: &rewindv1.TopicConfig{Partitions: 1}})
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "must not start with '-'") {
			t.Errorf("create %q: got %v, want InvalidArgument saying it must not start with '-'", name, err)
		}
	}
	if _, err := topics.CreateTopic(context.Background(), &rewindv1.CreateTopicRequest{Name: "a-b-", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
		t.Errorf("create a-b-: %v", err)
	}
}
