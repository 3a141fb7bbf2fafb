package client

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"connectrpc.com/connect"
)

// DefaultReconnectWindow is how long a broken stream tries to go on unless
// ReconnectWithin says otherwise.
const DefaultReconnectWindow = time.Minute

// Pauses between reconnect attempts: the first, doubling up to the most.
const (
	reconnectPause    = 100 * time.Millisecond
	maxReconnectPause = 2 * time.Second
)

// ReconnectWithin sets how long a stream keeps trying to go on after its
// server could not be reached or was unavailable (it stopped or restarted,
// or lost its partitions' leaders), pausing between attempts from 100 ms
// doubling up to 2 s, on the next of the client's nodes each time (the same
// one if it was given one). A stream continues from its resume token; a
// group member joins its group again and drops what it was given before
// the break, so nothing is delivered twice or skipped. A stream that stops
// at End fixes its end again when it goes on (so it also delivers what was
// appended meanwhile). Next returns a *Disconnected event when the stream
// breaks and a *Reconnected event when it goes on; after d without success
// the stream ends with a *ReconnectError. 0 turns this off: the stream ends
// with the error at once. Default DefaultReconnectWindow.
func ReconnectWithin(d time.Duration) SubscribeOption {
	return func(o *subOptions) { o.reconnect = d }
}

// Disconnected says the stream broke, with Err, and tries to go on for up
// to RetryFor: the next Next waits for that.
type Disconnected struct {
	Err      error
	RetryFor time.Duration
}

// Reconnected says a broken stream goes on, after Attempts attempts and
// Down since it broke. Partitions are where it continues (for a group
// member, the Assigned event that follows says which are its own).
type Reconnected struct {
	Attempts    int
	Down        time.Duration
	Partitions  []PartitionPosition
	ResumeToken string
}

func (*Disconnected) isEvent() {}
func (*Reconnected) isEvent()  {}

// ReconnectError ends a stream that broke and could not go on within
// Window: Err is the last attempt's error.
type ReconnectError struct {
	Window   time.Duration
	Attempts int
	Err      error
}

func (e *ReconnectError) Error() string {
	return fmt.Sprintf("client: the stream broke and could not go on within %s (%d attempts; last: %v)", e.Window, e.Attempts, e.Err)
}

func (e *ReconnectError) Unwrap() error { return e.Err }

// errClosed ends a stream that Close ended while it reconnected.
var errClosed = connect.NewError(connect.CodeCanceled, errors.New("client: subscription closed"))

// transient reports whether a stream or an attempt to open one failed for
// a reason that may pass: the node could not be reached, the connection
// broke, the node sent nothing within the open timeout, or it was
// unavailable.
func transient(err error) bool { return badNode(err) }

// reconnectable reports whether a stream that failed with err goes on: one
// that started, while the caller still wants it, if the failure may pass.
func (s *Subscription) reconnectable(err error) bool {
	if !s.started || s.root == nil || s.opts.reconnect <= 0 || s.parent.Err() != nil || s.closed.Load() {
		return false
	}
	if s.opts.group == "" && s.token == "" {
		return false
	}
	return transient(err)
}

// reconnect reopens a broken stream, from its resume token or, for a group
// member, by joining again, until the window since it broke has passed.
// The new stream's Started event is not delivered: the caller had one.
func (s *Subscription) reconnect() (Event, error) {
	s.rd.close() // the broken stream
	deadline := s.brokeAt.Add(s.opts.reconnect)
	o := s.opts
	if o.group == "" {
		tok := ResumeToken(s.token)
		o.from = &tok
	}
	wait := max(reconnectPause, s.pause)
	if s.pause > 0 {
		// The last reconnect made no progress: pause before trying again.
		if err := s.sleep(min(s.pause, max(time.Until(deadline), 0))); err != nil {
			return nil, err
		}
		if !time.Now().Before(deadline) {
			return nil, &ReconnectError{Window: s.opts.reconnect, Attempts: 0, Err: s.broke}
		}
	}
	for attempt := 1; ; attempt++ {
		s.root.nodes.fail(s.node.addr)
		cl := s.root.pick()
		ns, err := followCoordinator(cl, func(c *Client) (*Subscription, error) { return c.subscribe(s.parent, s.topic, o) })
		if err == nil {
			s.rdMu.Lock()
			closed := s.closed.Load()
			if !closed {
				s.rd = ns.rd
			}
			s.rdMu.Unlock()
			if closed { // by Close, on another goroutine
				ns.rd.close()
				return nil, errClosed
			}
			s.node, s.c = cl, ns.c
			s.broke = nil
			s.progressed, s.connectedAt = false, time.Now()
			s.pause = min(max(2*s.pause, reconnectPause), maxReconnectPause)
			s.resumes++
			ev := &Reconnected{Attempts: attempt, Down: time.Since(s.brokeAt)}
			if st, ok := ns.ev.(*Started); ok {
				ev.Partitions, ev.ResumeToken = st.Partitions, st.ResumeToken
				s.token = st.ResumeToken
			}
			if o.group != "" {
				// What was due carries the old generation, which the
				// rejoin ended: rejoined commits it again under the new
				// one (delivered covers due).
				s.skip, s.skipEpoch, s.rejoining = maps.Clone(s.delivered), s.epoch, true
				clear(s.due)
			}
			return ev, nil
		}
		s.node = cl
		if s.parent.Err() != nil {
			return nil, connect.NewError(connect.CodeCanceled, s.parent.Err())
		}
		if !transient(err) {
			return nil, err // why it cannot go on (e.g. OutOfRange)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, &ReconnectError{Window: s.opts.reconnect, Attempts: attempt, Err: err}
		}
		if err := s.sleep(min(wait, left)); err != nil {
			return nil, err
		}
		wait = min(2*wait, maxReconnectPause)
	}
}

// sleep waits d, or until the caller's context ends or Close is called.
func (s *Subscription) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.parent.Done():
		return connect.NewError(connect.CodeCanceled, s.parent.Err())
	case <-s.stop:
		return errClosed
	}
}

// rejoined handles a member's first assignment after it joined again: of
// the partitions it was given back, unless a reset came in between, the
// records it was given before the break are dropped (skip), and with
// AutoCommit their offsets are committed under the new generation. The
// event says where the member goes on.
func (s *Subscription) rejoined(e *Assigned) {
	s.rejoining = false
	for p, from := range s.skip {
		i := slices.IndexFunc(e.Partitions, func(pp PartitionPosition) bool { return pp.Partition == p })
		if i < 0 || e.Epoch != s.skipEpoch || e.Partitions[i].NextOffset >= from {
			delete(s.skip, p)
			continue
		}
		e.Partitions[i].NextOffset = from
		if s.opts.autoCommit {
			s.due[p] = from
		}
	}
}
