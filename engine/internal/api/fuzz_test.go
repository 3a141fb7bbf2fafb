package api

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/broker"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// fuzzServer is one real broker (in memory) behind the real handlers, shared
// by every input of a fuzz run.
var fuzzServer = sync.OnceValue(func() string {
	b, err := broker.Open(broker.Config{Dir: "fuzz", FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	if _, err := b.CreateTopic(context.Background(), broker.TopicSpec{Name: "t", Partitions: 3, MaxRecordBytes: 4096}); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(New(b, Config{}).Handler())
	return srv.URL
})

// allowed is every code a malformed or hostile request may get. Internal
// and Unknown are not on it: they would mean the server failed on input.
var allowed = map[connect.Code]bool{
	connect.CodeInvalidArgument: true, connect.CodeNotFound: true, connect.CodeOutOfRange: true,
	connect.CodeResourceExhausted: true, connect.CodeDeadlineExceeded: true, connect.CodeCanceled: true,
}

func seedSubscribe(f *testing.F) {
	for _, r := range []*rewindv1.SubscribeRequest{
		{Topic: "t"},
		{Topic: "t", Partitions: []uint32{0, 0, 9}},
		{Topic: "nope"},
		{Topic: "t", Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_Offset{Offset: 1 << 60}}},
		{Topic: "t", Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_Time{Time: &timestamppb.Timestamp{Seconds: -1 << 62}}}},
		{Topic: "t", Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_TimeBack{TimeBack: &durationpb.Duration{Seconds: -5}}}},
		{Topic: "t", Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_MessageId{MessageId: "AQEBAHbr"}}},
		{Topic: "t", Start: &rewindv1.StartPosition{Position: &rewindv1.StartPosition_ResumeToken{ResumeToken: "AQECAAABAJNqjV8"}}},
		{Topic: "t", Stop: &rewindv1.StopPosition{Position: &rewindv1.StopPosition_MessageId{MessageId: "x"}}},
		{Topic: "t", ProgressInterval: &durationpb.Duration{Nanos: 1}, MaxRecordsPerEvent: 1 << 31},
		{Topic: "t", Contains: []byte("\x00\xff")},
		{Topic: "t", Contains: make([]byte, 1025)},
	} {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
}

// FuzzSubscribe sends arbitrary bytes as a subscribe request: the server
// must answer with a client-error code or a stream that starts, never fail
// or panic.
func FuzzSubscribe(f *testing.F) {
	seedSubscribe(f)
	url := fuzzServer()
	c := rewindv1connect.NewSubscribeServiceClient(httpClient(), url)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rewindv1.SubscribeRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		req.Stop = &rewindv1.StopPosition{Position: &rewindv1.StopPosition_End{End: true}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := c.Subscribe(ctx, &req)
		if err == nil {
			for st.Receive() {
			}
			err = st.Err()
			st.Close()
		}
		if err != nil && !allowed[connect.CodeOf(err)] {
			t.Fatalf("request %v: %v", &req, err)
		}
	})
}

// FuzzPublish sends arbitrary publish requests: client errors or success,
// never a server failure.
func FuzzPublish(f *testing.F) {
	for _, r := range []*rewindv1.PublishRequest{
		{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: []byte("v")}}},
		{Topic: "t", Records: []*rewindv1.PublishRecord{{Key: []byte("k"), Headers: []*rewindv1.Header{{Key: "h"}}, IdempotencyKey: "i"}}},
		{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: make([]byte, 5000)}}},
		{Topic: "t", Records: []*rewindv1.PublishRecord{{Partition: proto.Uint32(7)}}},
		{Topic: "", Records: nil},
	} {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	url := fuzzServer()
	c := rewindv1connect.NewPublishServiceClient(httpClient(), url)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rewindv1.PublishRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Publish(ctx, &req)
		if err != nil {
			if !allowed[connect.CodeOf(err)] {
				t.Fatalf("request %v: %v", &req, err)
			}
			return
		}
		if len(resp.GetResults()) != len(req.GetRecords()) {
			t.Fatalf("%d results for %d records", len(resp.GetResults()), len(req.GetRecords()))
		}
	})
}

func TestMetrics(t *testing.T) {
	url := fuzzServer()
	resp, err := httpClient().Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	io.Copy(&b, resp.Body)
	for _, want := range []string{`rewind_partition_bytes{partition="2",topic="t"}`, "# TYPE rewind_partition_end_offset gauge", "rewind_disk_full 0"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("metrics lack %q:\n%s", want, b.String())
		}
	}
}
