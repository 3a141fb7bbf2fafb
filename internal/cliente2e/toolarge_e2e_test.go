package cliente2e_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// attempts counts the calls the client makes, attempt by attempt (an
// interceptor inside the client's own).
type attempts struct{ n atomic.Int32 }

func (a *attempts) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		a.n.Add(1)
		return next(ctx, req)
	}
}
func (a *attempts) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		a.n.Add(1)
		return next(ctx, spec)
	}
}
func (a *attempts) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// TestTooLargeSaysWhichLimit: requests over the 64 MiB a request may take
// are refused by the client with InvalidArgument and ErrTooLarge, in one
// attempt, saying how large they are, which limits they are over
// (a module: the server's 16 MiB upload and 4 MiB inline limits too) and
// what to do; a module between the server's module limit and 64 MiB is
// refused by the server, whose limit the client does not mask.
func TestTooLargeSaysWhichLimit(t *testing.T) {
	s := startServer(t, "")
	var n attempts
	c := client.New(s.addr, client.WithConnectOptions(connect.WithInterceptors(&n)))
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "big", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	huge := make([]byte, 100_000_010)
	for _, tc := range []struct {
		name string
		call func() error
		want []string
	}{
		{"upload", func() error {
			_, _, err := c.UploadPlugin(ctx, "huge", huge, "")
			return err
		}, []string{"the module is 100000010 bytes", "67108864 bytes (64 MiB)", "16777216 bytes (16 MiB) by upload", "4194304 bytes (4 MiB) inline", "build it smaller"}},
		{"inline filter", func() error {
			return subscribeErr(c, "big", client.InlineFilter(huge, nil))
		}, []string{"the request is 1000000", "67108864 bytes (64 MiB)", "4194304 bytes (4 MiB) inline", "upload the module as a plugin"}},
		{"publish", func() error {
			msgs := make([]client.Message, 5)
			for i := range msgs {
				msgs[i].Value = huge[:15<<20]
			}
			_, err := c.Publish(ctx, "big", msgs...)
			return err
		}, []string{"(5 records)", "67108864 bytes (64 MiB)", "publish fewer records per call"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.n.Store(0)
			err := tc.call()
			if code(err) != connect.CodeInvalidArgument || !errors.Is(err, client.ErrTooLarge) || n.n.Load() != 1 {
				t.Fatalf("%v (%v, %d attempts); want InvalidArgument, ErrTooLarge, in one attempt", err, code(err), n.n.Load())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	// 20 MiB: under the client's limit, over the server's module limit.
	_, _, err := c.UploadPlugin(ctx, "big", make([]byte, 20<<20), "")
	if code(err) != connect.CodeInvalidArgument || errors.Is(err, client.ErrTooLarge) || !strings.Contains(err.Error(), "module is 20971520 bytes, over the limit of 16777216") {
		t.Errorf("20 MiB upload: %v; want the server's InvalidArgument naming its 16 MiB limit", err)
	}
}

// bigAnswer answers GetPlugin with a module over the client's limit.
type bigAnswer struct {
	rewindv1connect.UnimplementedPluginServiceHandler
	asked atomic.Int32
}

func (b *bigAnswer) GetPlugin(context.Context, *rewindv1.GetPluginRequest) (*rewindv1.GetPluginResponse, error) {
	b.asked.Add(1)
	return &rewindv1.GetPluginResponse{Plugin: &rewindv1.Plugin{Name: "p"}, Module: make([]byte, client.MaxMessageBytes+1)}, nil
}

// TestTooLargeAnswerIsNotRetried: an answer over the client's limit fails
// with ResourceExhausted and ErrTooLarge at once: a read may be retried,
// but asking again would get the same answer.
func TestTooLargeAnswerIsNotRetried(t *testing.T) {
	b := &bigAnswer{}
	mux := http.NewServeMux()
	mux.Handle(rewindv1connect.NewPluginServiceHandler(b))
	c := client.New(enginetest.ServeHandler(t, mux))
	_, _, err := c.GetPlugin(context.Background(), "p", true)
	if code(err) != connect.CodeResourceExhausted || !errors.Is(err, client.ErrTooLarge) || b.asked.Load() != 1 {
		t.Fatalf("%v (%v), asked %d times; want ResourceExhausted and ErrTooLarge after one attempt", err, code(err), b.asked.Load())
	}
}
