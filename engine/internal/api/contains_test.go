package api

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// TestSubscribeContains: SubscribeRequest.contains, over the real handlers,
// delivers the records that hold the bytes in their key, value or headers
// with their offsets, and one byte over the limit is InvalidArgument.
func TestSubscribeContains(t *testing.T) {
	_, url := testServer(t)
	ctx := context.Background()
	topics := rewindv1connect.NewTopicServiceClient(httpClient(), url)
	if _, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	pub := rewindv1connect.NewPublishServiceClient(httpClient(), url)
	if _, err := pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{
		{Key: []byte("a"), Value: []byte("hay")},
		{Key: []byte("b"), Value: []byte("hay"), Headers: []*rewindv1.Header{{Key: "trace", Value: []byte("id-42")}}},
		{Key: []byte("c-42"), Value: []byte("hay")},
		{Key: []byte("d"), Value: []byte("hay")},
	}}); err != nil {
		t.Fatal(err)
	}
	sub := rewindv1connect.NewSubscribeServiceClient(httpClient(), url)
	end := &rewindv1.StopPosition{Position: &rewindv1.StopPosition_End{End: true}}
	read := func(contains string) ([]string, error) {
		st, err := sub.Subscribe(ctx, &rewindv1.SubscribeRequest{Topic: "t", Stop: end, Contains: []byte(contains)})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		var got []string
		for st.Receive() {
			for _, r := range st.Msg().GetRecords().GetRecords() {
				got = append(got, string(r.GetKey())+"@"+string(rune('0'+r.GetOffset())))
			}
		}
		return got, st.Err()
	}
	got, err := read("42")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "b@1 c-42@2" {
		t.Errorf("contains 42 delivered %v, want b@1 c-42@2", got)
	}
	if got, err := read(""); err != nil || len(got) != 4 {
		t.Errorf("an empty contains delivered %v (%v), want all 4", got, err)
	}
	if _, err := read(strings.Repeat("x", 1025)); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "1024") {
		t.Errorf("a 1025-byte contains: %v, want InvalidArgument naming 1024", err)
	}
}
