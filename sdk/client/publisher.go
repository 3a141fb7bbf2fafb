package client

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrPublisherClosed is returned by Publish after Close.
var ErrPublisherClosed = errors.New("client: publisher closed")

// Publisher batches messages to one topic, with at most MaxInFlight
// requests outstanding (Publish blocks while the batch is full and every
// request is out). By default (Linger 0) a message goes out at once when a
// request slot is free, and messages published while every slot is busy
// wait and go together, as one request, when one comes back: a publisher
// at a low rate pays one round trip per message, one at a high rate
// batches by itself (like a group commit). With a Linger, a partial batch
// instead waits that long for more. With MaxInFlight 1 (the default)
// messages reach the server in the order they were published; with more,
// batches may overtake each other. Safe for concurrent use.
type Publisher struct {
	c     *Client
	topic string
	opts  publisherOptions
	sem   chan struct{}
	wg    sync.WaitGroup
	mu    struct {
		sync.Mutex
		buf     []Message
		waiters []*Pending
		timer   *time.Timer
		closed  bool
	}
}

type publisherOptions struct {
	batchSize   int
	linger      time.Duration
	maxInFlight int
	timeout     time.Duration
}

// PublisherOption configures a Publisher.
type PublisherOption func(*publisherOptions)

// WithBatchSize sets the messages per request (default 1000).
func WithBatchSize(n int) PublisherOption {
	return func(o *publisherOptions) { o.batchSize = max(1, n) }
}

// WithLinger makes a partial batch wait up to d for more messages, even
// when a request slot is free (default 0: it goes as soon as a slot is).
func WithLinger(d time.Duration) PublisherOption { return func(o *publisherOptions) { o.linger = d } }

// WithMaxInFlight sets the requests outstanding at once (default 1, which
// keeps publish order).
func WithMaxInFlight(n int) PublisherOption {
	return func(o *publisherOptions) { o.maxInFlight = max(1, n) }
}

// WithRequestTimeout bounds each request (default 30 s).
func WithRequestTimeout(d time.Duration) PublisherOption {
	return func(o *publisherOptions) { o.timeout = d }
}

// Pending is the outcome of one published message.
type Pending struct {
	done chan struct{}
	res  Result
	err  error
}

// Done is closed once the outcome is known.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait returns the message's result once it is durable.
func (p *Pending) Wait(ctx context.Context) (Result, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// NewPublisher returns a batching publisher for topic.
func (c *Client) NewPublisher(topic string, opts ...PublisherOption) *Publisher {
	o := publisherOptions{batchSize: 1000, maxInFlight: 1, timeout: 30 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	return &Publisher{c: c, topic: topic, opts: o, sem: make(chan struct{}, o.maxInFlight)}
}

// Publish queues m. It blocks only while MaxInFlight requests are
// outstanding and the batch is full, until ctx ends.
func (p *Publisher) Publish(ctx context.Context, m Message) (*Pending, error) {
	pd := &Pending{done: make(chan struct{})}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil, ErrPublisherClosed
	}
	p.mu.buf = append(p.mu.buf, m)
	p.mu.waiters = append(p.mu.waiters, pd)
	if len(p.mu.buf) >= p.opts.batchSize {
		batch, ws := p.takeLocked()
		p.mu.Unlock()
		return pd, p.dispatch(ctx, batch, ws)
	}
	if p.opts.linger == 0 {
		// A free slot sends now; otherwise the request that comes back
		// next takes what waits (send). Under mu, so a message is never
		// left behind by a sender that just found nothing to take.
		select {
		case p.sem <- struct{}{}:
			batch, ws := p.takeLocked()
			p.mu.Unlock()
			p.wg.Add(1)
			go p.send(batch, ws)
		default:
			p.mu.Unlock()
		}
		return pd, nil
	}
	if p.mu.timer == nil {
		p.mu.timer = time.AfterFunc(p.opts.linger, p.lingered)
	}
	p.mu.Unlock()
	return pd, nil
}

func (p *Publisher) takeLocked() ([]Message, []*Pending) {
	batch, ws := p.mu.buf, p.mu.waiters
	p.mu.buf, p.mu.waiters = nil, nil
	if p.mu.timer != nil {
		p.mu.timer.Stop()
		p.mu.timer = nil
	}
	return batch, ws
}

func (p *Publisher) lingered() {
	p.mu.Lock()
	batch, ws := p.takeLocked()
	p.mu.Unlock()
	if len(batch) > 0 {
		_ = p.dispatch(context.Background(), batch, ws)
	}
}

// dispatch waits for an in-flight slot, then sends the batch.
func (p *Publisher) dispatch(ctx context.Context, batch []Message, ws []*Pending) error {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		for _, w := range ws {
			w.err = ctx.Err()
			close(w.done)
		}
		return ctx.Err()
	}
	p.wg.Add(1)
	go p.send(batch, ws)
	return nil
}

// send sends batch in a request slot it holds, then, without Linger, the
// messages that queued meanwhile, until none wait; then it frees the slot.
func (p *Publisher) send(batch []Message, ws []*Pending) {
	defer p.wg.Done()
	for {
		rctx, cancel := context.WithTimeout(context.Background(), p.opts.timeout)
		res, err := p.c.Publish(rctx, p.topic, batch...)
		cancel()
		var partial *PartialError
		var failed map[int]error
		if errors.As(err, &partial) {
			failed = make(map[int]error, len(partial.Failed))
			for _, f := range partial.Failed {
				failed[f.Index] = f.Err
			}
		}
		for i, w := range ws {
			switch {
			case failed[i] != nil:
				w.err = failed[i]
			case partial != nil, err == nil:
				w.res = res[i]
			default:
				w.err = err
			}
			close(w.done)
		}
		p.mu.Lock()
		if p.opts.linger > 0 || len(p.mu.buf) == 0 {
			<-p.sem
			p.mu.Unlock()
			return
		}
		batch, ws = p.takeLocked()
		p.mu.Unlock()
	}
}

// Flush sends what is queued and waits until every request sent so far is
// answered. It returns the first error among the flushed messages.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	batch, ws := p.takeLocked()
	p.mu.Unlock()
	if len(batch) > 0 {
		if err := p.dispatch(ctx, batch, ws); err != nil {
			return err
		}
	}
	// Wait for every in-flight slot to drain.
	for range cap(p.sem) {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for range cap(p.sem) {
		<-p.sem
	}
	for _, w := range ws {
		if w.err != nil {
			return w.err
		}
	}
	return nil
}

// Close flushes and stops the publisher.
func (p *Publisher) Close(ctx context.Context) error {
	err := p.Flush(ctx)
	p.mu.Lock()
	p.mu.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
