package client

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// ErrTooLarge marks an error about a message over MaxMessageBytes, a
// request the client would not send or an answer it would not read:
// sending it again cannot help. A request is InvalidArgument, as the
// server answers one over its own limit (the same 64 MiB); an answer
// keeps the ResourceExhausted the Connect library gives it, and neither is
// retried. Test it with errors.Is.
var ErrTooLarge = errors.New("message over the 64 MiB limit")

// The server's defaults for modules (rewind serve --filter-max-module-bytes
// and --filter-max-inline-mib), named in the client's advice: a module
// over MaxMessageBytes is over both, whatever the server's flags.
const (
	serverModuleBytes = 16 << 20
	serverInlineBytes = 4 << 20
)

// sizeInterceptor turns the Connect library's own refusal of a message
// over the client's limits (ResourceExhausted, "message size N exceeds
// sendMaxBytes M", which reads like a rate limit to be retried) into an
// error that says which limit, how big and what to do, marked ErrTooLarge.
// It costs nothing until such an error: the request is measured only then.
type sizeInterceptor struct{}

func (sizeInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		if err != nil {
			err = tooLarge(req.Any(), err)
		}
		return resp, err
	}
}

func (sizeInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		return sizedConn{next(ctx, spec)}
	}
}

func (sizeInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

type sizedConn struct{ connect.StreamingClientConn }

func (c sizedConn) Send(msg any) error {
	if err := c.StreamingClientConn.Send(msg); err != nil {
		return tooLarge(msg, err)
	}
	return nil
}

func (c sizedConn) Receive(msg any) error {
	if err := c.StreamingClientConn.Receive(msg); err != nil {
		return tooLarge(nil, err)
	}
	return nil
}

// tooLarge rewrites err, from a call that sent req (nil: only reading),
// when it is the client's own refusal of a message over MaxMessageBytes.
// Other errors, the server's included, come back unchanged.
func tooLarge(req any, err error) error {
	if connect.CodeOf(err) != connect.CodeResourceExhausted || connect.IsWireError(err) || errors.Is(err, ErrTooLarge) {
		return err
	}
	m, _ := req.(proto.Message)
	if m == nil || proto.Size(m) <= MaxMessageBytes {
		// The answer was over the limit.
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"%w: the answer is larger than the %d bytes the client reads: ask for less (%v)", ErrTooLarge, MaxMessageBytes, err))
	}
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%w: %s", ErrTooLarge, advice(m)))
}

// advice says how large request m is, which limits it is over and what to
// do instead.
func advice(m proto.Message) string {
	size := proto.Size(m)
	over := fmt.Sprintf("over the %d bytes (64 MiB) a request to a server may take", MaxMessageBytes)
	modules := fmt.Sprintf("a server takes modules of at most %d bytes (16 MiB) by upload and %d bytes (4 MiB) inline by default (rewind serve --filter-max-module-bytes, --filter-max-inline-mib)",
		serverModuleBytes, serverInlineBytes)
	switch r := m.(type) {
	case *rewindv1.UploadPluginRequest:
		return fmt.Sprintf("the module is %d bytes, %s, and %s: build it smaller (Go: -ldflags='-s -w'; strip debug sections, e.g. wasm-opt --strip-debug)",
			len(r.GetModule()), over, modules)
	case *rewindv1.SubscribeRequest, *rewindv1.TestPluginRequest:
		return fmt.Sprintf("the request is %d bytes, %s, and %s: upload the module as a plugin and name it, once it is small enough", size, over, modules)
	case *rewindv1.PublishRequest:
		return fmt.Sprintf("the publish is %d bytes (%d records), %s: publish fewer records per call", size, len(r.GetRecords()), over)
	}
	return fmt.Sprintf("the request is %d bytes, %s", size, over)
}
