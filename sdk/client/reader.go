package client

import (
	"context"
	"sync"
	"time"

	"connectrpc.com/connect"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// closeGrace bounds how long a group member's stream stays open after the
// caller's context ended without Close being called: Close commits, then
// leaves; a caller that never calls Close leaves after closeGrace.
const closeGrace = 10 * time.Second

// reader receives one stream's events on its own goroutine, so Next can
// return as soon as the caller's context ends.
//
// A group member's stream does not end with the caller's context (hold):
// the member keeps its partitions until Close has committed what it was
// given, and leaves after that. Ending the stream first would let the
// coordinator move the partitions and fence the commit, and the next owner
// would read those records again.
//
// The goroutines are the reader's: close cancels the stream and waits for
// them. One event at a time is buffered; the stream pushes back beyond.
type reader struct {
	stream *connect.ServerStreamForClient[rewindv1.SubscribeResponse]
	cancel context.CancelFunc
	events chan *rewindv1.SubscribeResponse // closed after the last event
	err    error                            // why the stream ended; read after events is closed
	quit   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// open sends req and starts receiving.
func (c *Client) open(parent context.Context, req *rewindv1.SubscribeRequest, hold bool) (*reader, error) {
	base := parent
	if hold {
		base = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancel(base)
	st, err := c.sub.Subscribe(ctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	r := &reader{stream: st, cancel: cancel, events: make(chan *rewindv1.SubscribeResponse, 1), quit: make(chan struct{})}
	r.wg.Add(1)
	go r.run(ctx)
	if hold {
		r.wg.Add(1)
		go r.release(parent)
	}
	return r, nil
}

func (r *reader) run(ctx context.Context) {
	defer r.wg.Done()
	defer close(r.events)
	for r.stream.Receive() {
		select {
		case r.events <- r.stream.Msg():
		case <-r.quit:
			return
		case <-ctx.Done():
			r.err = connect.NewError(connect.CodeCanceled, ctx.Err())
			return
		}
	}
	r.err = r.stream.Err()
}

// release ends a held stream closeGrace after the caller's context ended,
// if Close did not end it first.
func (r *reader) release(parent context.Context) {
	defer r.wg.Done()
	select {
	case <-parent.Done():
	case <-r.quit:
		return
	}
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-t.C:
		r.cancel()
	case <-r.quit:
	}
}

// next returns the next event; at the end of the stream, nil and why (nil
// if the server closed it without an error). It returns early, with
// Canceled, when ctx ends.
func (r *reader) next(ctx context.Context) (*rewindv1.SubscribeResponse, bool, error) {
	select {
	case m, ok := <-r.events:
		if !ok {
			return nil, false, r.err
		}
		return m, true, nil
	case <-ctx.Done():
		return nil, false, connect.NewError(connect.CodeCanceled, ctx.Err())
	}
}

// close ends the stream and waits for the reader's goroutines.
func (r *reader) close() error {
	var err error
	r.once.Do(func() {
		r.cancel()
		close(r.quit)
		r.wg.Wait()
		err = r.stream.Close()
	})
	return err
}
