package api

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

const testMaxRequest = 1 << 20

// blocked is a request body that sends head and then nothing more until
// the answer has come: a server that tried to read it all would never
// answer.
type blocked struct {
	io.Reader
	pw *io.PipeWriter
}

func newBlocked(head []byte) *blocked {
	pr, pw := io.Pipe()
	return &blocked{io.MultiReader(bytes.NewReader(head), pr), pw}
}

func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}}
}

// TestOversizedRequestsAreRefusedUnread: a request over the limit gets
// InvalidArgument (HTTP 400 in the Connect protocol, not the 429 of
// ResourceExhausted, which clients read as rate limiting) without the server
// reading the body, and the server goes on serving (issue 13, item 11).
func TestOversizedRequestsAreRefusedUnread(t *testing.T) {
	_, url := testServer(t, func(s *Server) { s.maxRequest = testMaxRequest })
	ctx := context.Background()
	if _, err := rewindv1connect.NewTopicServiceClient(httpClient(), url).CreateTopic(ctx,
		&rewindv1.CreateTopicRequest{Name: "t", Config: &rewindv1.TopicConfig{Partitions: 1, MaxRecordBytes: 4 << 20}}); err != nil {
		t.Fatal(err)
	}
	stillServes := func(t *testing.T) {
		t.Helper()
		pub := rewindv1connect.NewPublishServiceClient(httpClient(), url)
		if _, err := pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: []byte("ok")}}}); err != nil {
			t.Fatalf("a publish after the refusal: %v", err)
		}
	}
	post := func(t *testing.T, c *http.Client, path, contentType string, length int64, body *blocked) (*http.Response, string) {
		t.Helper()
		defer body.pw.Close() // after the answer: the HTTP/2 client waits for the body when closing
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.ContentLength = length
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		body.pw.Close()
		resp.Body.Close()
		return resp, string(b) + " " + resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status")
	}
	const publish = "/" + rewindv1connect.PublishServiceName + "/Publish"
	const subscribe = "/" + rewindv1connect.SubscribeServiceName + "/Subscribe"

	t.Run("content-length", func(t *testing.T) {
		// 100 MB announced, a few bytes sent, then nothing.
		resp, body := post(t, httpClient(), publish, "application/proto", 100<<20, newBlocked([]byte("\x0a\x01t")))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"invalid_argument"`) || !strings.Contains(body, strconv.Itoa(testMaxRequest)) {
			t.Fatalf("HTTP %d %s, want 400 invalid_argument naming the limit", resp.StatusCode, body)
		}
		stillServes(t)
	})
	t.Run("chunked", func(t *testing.T) {
		// No length: the body is cut off one byte past the limit.
		resp, body := post(t, httpClient(), publish, "application/proto", -1, newBlocked(make([]byte, testMaxRequest+1)))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"invalid_argument"`) {
			t.Fatalf("HTTP %d %s, want 400 invalid_argument", resp.StatusCode, body)
		}
		stillServes(t)
	})
	t.Run("envelope", func(t *testing.T) {
		// A streaming request whose envelope announces 100 MB, over HTTP/2.
		var prefix [5]byte
		binary.BigEndian.PutUint32(prefix[1:], 100<<20)
		resp, body := post(t, h2cClient(), subscribe, "application/connect+proto", -1, newBlocked(prefix[:]))
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"invalid_argument"`) {
			t.Fatalf("HTTP %d %s, want a Connect stream ending in invalid_argument", resp.StatusCode, body)
		}
		resp, body = post(t, h2cClient(), publish, "application/grpc", -1, newBlocked(prefix[:]))
		if !strings.HasSuffix(body, " 3") { // gRPC's INVALID_ARGUMENT
			t.Fatalf("HTTP %d %q, want grpc-status 3", resp.StatusCode, body)
		}
		stillServes(t)
	})
	t.Run("not an RPC", func(t *testing.T) {
		resp, _ := post(t, httpClient(), publish, "text/plain", 100<<20, newBlocked(nil))
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("HTTP %d, want 413", resp.StatusCode)
		}
		stillServes(t)
	})
	t.Run("every protocol", func(t *testing.T) {
		for name, opts := range map[string][]connect.ClientOption{
			"connect": nil, "grpc": {connect.WithGRPC()}, "grpcweb": {connect.WithGRPCWeb()},
		} {
			c := httpClient()
			if name == "grpc" {
				c = h2cClient()
			}
			pub := rewindv1connect.NewPublishServiceClient(c, url, opts...)
			_, err := pub.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: make([]byte, testMaxRequest)}}})
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "request too large") {
				t.Errorf("%s: %v, want InvalidArgument", name, err)
			}
		}
		stillServes(t)
	})
}
