package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
	// noAnswer is the error of a stream the open timeout ended;
	// stopTimer stops that timeout.
	noAnswer  error
	stopTimer func()
	// first: 0 until the first event or the open timeout, then 1 (an event
	// came) or 2 (the timeout cancelled the stream).
	first atomic.Int32
}

// open sends req and starts receiving. A stream whose first event does not
// come within c.openTimeout (0: no bound) ends with errNoAnswer.
func (c *Client) open(parent context.Context, req *rewindv1.SubscribeRequest, hold bool) (*reader, error) {
	base := parent
	if hold {
		base = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancel(base)
	r := &reader{cancel: cancel, events: make(chan *rewindv1.SubscribeResponse, 1), quit: make(chan struct{})}
	if c.openTimeout > 0 {
		// From before the request: sending it can wait on a connection to
		// a node that does not answer.
		t := time.AfterFunc(c.openTimeout, func() {
			if r.first.CompareAndSwap(0, 2) {
				cancel()
			}
		})
		r.noAnswer = connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("%w: %s sent no event within %s", errNoAnswer, c.addr, c.openTimeout))
		r.stopTimer = func() { t.Stop() }
	}
	st, err := c.sub.Subscribe(ctx, req)
	if err != nil {
		if r.stopTimer != nil {
			r.stopTimer()
		}
		cancel()
		if r.first.Load() == 2 {
			err = r.noAnswer
		}
		return nil, err
	}
	r.stream = st
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
	if r.stopTimer != nil {
		defer r.stopTimer()
	}
	for r.stream.Receive() {
		if r.first.Load() != 1 && !r.first.CompareAndSwap(0, 1) {
			r.err = r.noAnswer // the timeout won the race
			return
		}
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
	if r.first.Load() == 2 {
		r.err = r.noAnswer
	}
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
