package httpedge

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client/fastpath"
)

// FastpathConfig configures a Fastpath.
type FastpathConfig struct {
	// Bodies are the body limits of the node's other requests: a request
	// frame's payload must arrive within ReadTimeout of its header, and
	// holds its bytes of the InFlight budget (shared with GuardBodies)
	// until its call returns.
	Bodies *BodyGuard
	// Admit checks the request that opens a stream (its credentials),
	// and writes the refusal when it reports false. Nil: every stream is
	// admitted.
	Admit func(http.ResponseWriter, *http.Request) bool
	// IdleTimeout closes a connection with no call out for this long
	// (after a GoAway). Zero or negative: never.
	IdleTimeout time.Duration
	// MaxFrameBytes bounds a request frame's payload (its path, headers
	// and body).
	MaxFrameBytes int
	// MaxCallsPerConn bounds the calls a connection has out at once; the
	// next request frame is read when one returns. Default 1000 (as
	// HTTP/2's concurrent streams).
	MaxCallsPerConn int
}

// Fastpath serves Rewind's unary fast path (package
// github.com/rewind-io/rewind/sdk/client/fastpath has the protocol): an
// HTTP/1.1 request upgrades its connection, and each request frame on it
// is then served by the node's handler as the request it describes, so
// every check an HTTP request passes (hosts, authentication, limits,
// routing) applies to it unchanged. What it saves is HTTP/2's framing,
// its per-request goroutines and its write hand-offs. Safe for concurrent
// use.
type Fastpath struct {
	h   http.Handler
	cfg FastpathConfig

	mu      sync.Mutex
	conns   map[*fconn]struct{}
	closing bool
}

// NewFastpath returns a Fastpath whose calls h serves (h: the node's
// handler behind the Host check; body limits are cfg's).
func NewFastpath(h http.Handler, cfg FastpathConfig) *Fastpath {
	if cfg.MaxCallsPerConn <= 0 {
		cfg.MaxCallsPerConn = 1000
	}
	return &Fastpath{h: h, cfg: cfg, conns: map[*fconn]struct{}{}}
}

// Handler returns next with the fast path's upgrade requests served by f.
func (f *Fastpath) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != fastpath.Path {
			w.Header().Set(fastpath.Header, "1") // calls may come as frames
			next.ServeHTTP(w, r)
			return
		}
		f.upgrade(w, r)
	})
}

// Shutdown tells every stream that no new call will run (GoAway) and ends
// each once its calls have returned. Streams opened later are refused.
func (f *Fastpath) Shutdown() {
	for _, c := range f.closeAll() {
		c.goAway()
	}
}

// Close ends every stream now; calls out on them are cancelled.
func (f *Fastpath) Close() {
	for _, c := range f.closeAll() {
		c.close()
	}
}

// closeAll refuses new streams and returns the open ones.
func (f *Fastpath) closeAll() []*fconn {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closing = true
	cs := make([]*fconn, 0, len(f.conns))
	for c := range f.conns {
		cs = append(cs, c)
	}
	return cs
}

func (f *Fastpath) upgrade(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ProtoMajor != 1 || r.Header.Get("Content-Type") != fastpath.ContentType {
		http.Error(w, "this path takes an HTTP/1.1 POST of "+fastpath.ContentType, http.StatusBadRequest)
		return
	}
	if f.cfg.Admit != nil && !f.cfg.Admit(w, r) {
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		http.Error(w, "this connection cannot carry the fast path", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	c := &fconn{f: f, w: w, rc: rc, host: r.Host, remote: r.RemoteAddr, tls: r.TLS, ctx: ctx, cancel: cancel,
		calls: map[uint32]context.CancelFunc{}, slots: make(chan struct{}, f.cfg.MaxCallsPerConn)}
	f.mu.Lock()
	closing := f.closing
	if !closing {
		f.conns[c] = struct{}{}
	}
	f.mu.Unlock()
	if closing {
		http.Error(w, "the node is shutting down", http.StatusServiceUnavailable)
		return
	}
	counters.fastpathStreams.Add(1)
	defer func() {
		// The response ends with this handler: nothing may write to it
		// or set its deadlines afterwards (a Shutdown that listed the
		// stream before it ended still calls goAway: net/http releases
		// the response's writer, and a write then panics).
		c.finish()
		counters.fastpathStreams.Add(-1)
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
	w.Header().Set("Content-Type", fastpath.ContentType)
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	c.serve(bufio.NewReaderSize(r.Body, 64<<10))
}

// fconn is one fast-path stream (one connection).
type fconn struct {
	f      *Fastpath
	w      http.ResponseWriter // the stream's response: frames to the client
	rc     *http.ResponseController
	host   string
	remote string
	tls    *tls.ConnectionState
	ctx    context.Context // cancelled when the stream ends
	cancel context.CancelFunc
	slots  chan struct{}  // one per call out
	runs   sync.WaitGroup // the calls out
	idle   *time.Timer    // a GoAway after IdleTimeout without a call

	wmu    sync.Mutex // one frame written at a time
	broken bool       // a write failed, or the handler returned: no more writes

	mu      sync.Mutex
	calls   map[uint32]context.CancelFunc // out, by id
	lastID  uint32                        // the last request's id
	closing bool                          // GoAway sent (or closed): no new call
	done    bool                          // the handler returned: the response is gone
}

// finish marks the stream's response as gone, before its handler returns.
func (c *fconn) finish() {
	c.wmu.Lock()
	c.broken = true
	c.wmu.Unlock()
	c.mu.Lock()
	c.done, c.closing = true, true
	c.mu.Unlock()
}

// serve reads frames until the stream ends, then waits for the calls out.
func (c *fconn) serve(br *bufio.Reader) {
	if d := c.f.cfg.IdleTimeout; d > 0 {
		c.idle = time.AfterFunc(d, c.idleCheck)
		defer c.idle.Stop()
	}
	err := c.readFrames(br)
	if !errors.Is(err, io.EOF) && !c.isClosing() {
		c.cancel() // the stream broke: nobody is waiting for the answers
	}
	c.runs.Wait()
}

// readFrames reads and starts calls until the stream ends or fails.
func (c *fconn) readFrames(br *bufio.Reader) error {
	bodies := c.f.cfg.Bodies
	var hdr [fastpath.HeaderLen]byte
	for {
		n, id, k, err := fastpath.ReadHeader(br, &hdr, c.f.cfg.MaxFrameBytes)
		if err != nil {
			return err
		}
		if !c.deadline(true) {
			return io.EOF
		}
		if k == fastpath.KindRequest && !bodies.take(int64(n)) {
			// Over the node's budget of bodies in flight: read past the
			// frame without keeping it, and refuse the call.
			if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
				return err
			}
			counters.bodyBudgetRefused.Add(1)
			c.refuse(id, bodies.InFlight)
			if !c.deadline(false) {
				return io.EOF
			}
			continue
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			bodies.give(int64(n), k == fastpath.KindRequest)
			if errors.Is(err, os.ErrDeadlineExceeded) && !c.isClosing() {
				counters.bodyTimeouts.Add(1)
			}
			return err
		}
		fr, err := fastpath.Decode(id, k, p)
		if err == nil && k != fastpath.KindRequest && k != fastpath.KindCancel && k != fastpath.KindPing {
			err = fmt.Errorf("%w: kind %d from a client", fastpath.ErrMalformed, k)
		}
		if err == nil && k == fastpath.KindRequest && (!strings.HasPrefix(fr.Path, "/") || strings.ContainsAny(fr.Path, " ?#\x00\r\n")) {
			err = fmt.Errorf("%w: bad path", fastpath.ErrMalformed)
		}
		if err != nil {
			bodies.give(int64(n), k == fastpath.KindRequest)
			return err
		}
		if !c.deadline(false) {
			bodies.give(int64(n), k == fastpath.KindRequest)
			return io.EOF
		}
		if k == fastpath.KindPing {
			c.write(fastpath.AppendControl(nil, id, fastpath.KindPong))
			continue
		}
		if k == fastpath.KindCancel {
			c.mu.Lock()
			cancel := c.calls[id]
			c.mu.Unlock()
			if cancel != nil {
				cancel()
			}
			continue
		}
		if err := c.start(fr, int64(n)); err != nil {
			return err
		}
	}
}

// deadline sets the read deadline of a frame's payload (payload true) or
// clears it, unless the connection is going away; then it reports false.
func (c *fconn) deadline(payload bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	d := time.Time{}
	if b := c.f.cfg.Bodies; payload && b != nil && b.ReadTimeout > 0 {
		d = time.Now().Add(b.ReadTimeout)
	}
	_ = c.rc.SetReadDeadline(d)
	return true
}

func (c *fconn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// idleCheck sends a GoAway if no call is out (IdleTimeout).
func (c *fconn) idleCheck() {
	c.mu.Lock()
	busy := len(c.calls) > 0
	c.mu.Unlock()
	if !busy {
		c.goAway()
	}
}

// errIDs ends a stream whose request ids do not grow.
var errIDs = fmt.Errorf("%w: request ids must grow", fastpath.ErrMalformed)

// start runs the call of request frame fr (n bytes of the body budget).
func (c *fconn) start(fr fastpath.Frame, n int64) error {
	select {
	case c.slots <- struct{}{}:
	case <-c.ctx.Done():
		c.f.cfg.Bodies.give(n, true)
		return c.ctx.Err()
	}
	c.mu.Lock()
	if fr.ID <= c.lastID {
		c.mu.Unlock()
		<-c.slots
		c.f.cfg.Bodies.give(n, true)
		return errIDs
	}
	if c.closing {
		// After a GoAway: the client sends it again elsewhere.
		c.mu.Unlock()
		<-c.slots
		c.f.cfg.Bodies.give(n, true)
		return nil
	}
	c.lastID = fr.ID
	ctx, cancel := context.WithCancel(c.ctx)
	c.calls[fr.ID] = cancel
	c.runs.Add(1)
	c.mu.Unlock()
	counters.fastpathCalls.Add(1)
	go c.run(ctx, cancel, fr, n)
	return nil
}

// run serves one call and writes its answer.
func (c *fconn) run(ctx context.Context, cancel context.CancelFunc, fr fastpath.Frame, n int64) {
	w := &frameWriter{header: http.Header{}}
	defer func() {
		cancel()
		c.f.cfg.Bodies.give(n, true)
		<-c.slots
		c.mu.Lock()
		delete(c.calls, fr.ID)
		if len(c.calls) == 0 {
			if c.closing {
				_ = c.rc.SetReadDeadline(time.Now()) // the last answer is out: end the stream
			} else if c.idle != nil {
				c.idle.Reset(c.f.cfg.IdleTimeout)
			}
		}
		c.mu.Unlock()
		c.runs.Done()
	}()
	r := (&http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: fr.Path},
		RequestURI:    fr.Path,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        fr.Header,
		Body:          io.NopCloser(bytes.NewReader(fr.Body)),
		ContentLength: int64(len(fr.Body)),
		Host:          c.host,
		RemoteAddr:    c.remote,
		TLS:           c.tls,
	}).WithContext(ctx)
	func() {
		defer func() {
			if p := recover(); p != nil {
				// net/http's answer to a handler's panic: the call fails,
				// the server goes on.
				w.reset()
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		c.f.h.ServeHTTP(w, r)
	}()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	c.write(fastpath.AppendResponse(make([]byte, 0, w.body.Len()+256), fr.ID, w.status, w.header, w.body.Bytes()))
}

// refuse answers call id with ResourceExhausted: the body budget is spent.
func (c *fconn) refuse(id uint32, budget int64) {
	err := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
		"the node is reading its limit of %d bytes of request bodies at once (--max-body-bytes-in-flight): retry later", budget))
	w := &frameWriter{header: http.Header{}}
	_ = connect.NewErrorWriter().Write(w, &http.Request{Header: http.Header{"Content-Type": {"application/proto"}}}, err)
	c.write(fastpath.AppendResponse(nil, id, w.status, w.header, w.body.Bytes()))
}

// write writes frame b to the stream; a failed write ends it.
func (c *fconn) write(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.broken {
		return
	}
	_ = c.rc.SetWriteDeadline(time.Now().Add(time.Minute))
	_, err := c.w.Write(b)
	if err == nil {
		err = c.rc.Flush()
	}
	if err != nil {
		c.broken = true
		c.cancel()
		_ = c.rc.SetReadDeadline(time.Now())
	}
}

// goAway stops new calls, tells the client which ran, and ends the stream
// once those have returned.
func (c *fconn) goAway() {
	c.mu.Lock()
	if c.closing { // done implies closing
		c.mu.Unlock()
		return
	}
	c.closing = true
	last := c.lastID
	if len(c.calls) == 0 {
		_ = c.rc.SetReadDeadline(time.Now())
	}
	c.mu.Unlock()
	c.write(fastpath.AppendControl(nil, last, fastpath.KindGoAway))
}

// close ends the stream now: its calls are cancelled.
func (c *fconn) close() {
	c.cancel()
	c.mu.Lock()
	c.closing = true
	if !c.done {
		_ = c.rc.SetReadDeadline(time.Now())
	}
	c.mu.Unlock()
}

// frameWriter is the http.ResponseWriter of a fast-path call: it keeps the
// answer for one response frame.
type frameWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *frameWriter) Header() http.Header { return w.header }

func (w *frameWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *frameWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

func (w *frameWriter) reset() {
	w.header = http.Header{}
	w.status = 0
	w.body.Reset()
}

// Flush, SetReadDeadline and SetWriteDeadline are what
// http.ResponseController finds: the answer goes out whole when the call
// returns, and the body was read before the call began.
func (w *frameWriter) Flush()                           {}
func (w *frameWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *frameWriter) SetWriteDeadline(time.Time) error { return nil }
