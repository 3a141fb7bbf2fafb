package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

func TestSmoke(t *testing.T) {
	n := enginetest.StartNode(t, engine.Config{Dir: t.TempDir()})
	ctx := context.Background()
	topics := rewindv1connect.NewTopicServiceClient(http.DefaultClient, n.URL)
	pub := rewindv1connect.NewPublishServiceClient(http.DefaultClient, n.URL)
	sub := rewindv1connect.NewSubscribeServiceClient(http.DefaultClient, n.URL)
	if _, err := topics.CreateTopic(ctx, &rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 2}}); err != nil {
		t.Fatal(err)
	}
	var recs []*rewindv1.PublishRecord
	for i := range 10 {
		recs = append(recs, &rewindv1.PublishRecord{Value: []byte(fmt.Sprint(i))})
	}
	res, err := pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.GetResults())
	st, err := sub.Subscribe(ctx, &rewindv1.SubscribeRequest{Topic: "t", Stop: &rewindv1.StopPosition{Position: &rewindv1.StopPosition_End{End: true}}})
	if err != nil {
		t.Fatal(err)
	}
	n2 := 0
	for st.Receive() {
		t.Log(st.Msg())
		n2 += len(st.Msg().GetRecords().GetRecords())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if n2 != 10 {
		t.Fatalf("got %d records", n2)
	}
	_, err = topics.DescribeTopic(ctx, &rewindv1.DescribeTopicRequest{Name: "nope"})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatal(err)
	}
}
