package fastpath

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
)

// DefaultMaxResponseBytes bounds a response frame the Transport reads.
const DefaultMaxResponseBytes = 256 << 20

// refusedFor is how long a server that refused the upgrade (one that does
// not speak the fast path) is called through the fallback only.
const refusedFor = time.Minute

// Transport is a connect.HTTPClient that sends Connect unary calls (POST,
// Content-Type application/proto or application/json) over the fast path:
// one connection per server, upgraded from HTTP/1.1, many calls at once.
// Every other request (streams, gRPC, GET), and every call to a server
// that refuses the upgrade, goes through Fallback. Safe for concurrent use;
// its fields must not change after its first call.
type Transport struct {
	// Fallback serves what the fast path does not. Required.
	Fallback connect.HTTPClient
	// TLS configures connections to https:// servers (nil: defaults).
	TLS *tls.Config
	// Dialer dials servers (nil: a net.Dialer with a 10 s timeout).
	Dialer *net.Dialer
	// MaxResponseBytes bounds a response (0: DefaultMaxResponseBytes).
	MaxResponseBytes int
	// HealthIdle and HealthTimeout: a stream with calls out that has
	// received nothing for HealthIdle is pinged, and ended (its calls
	// failing as on a lost connection) when nothing comes within
	// HealthTimeout more. Zero HealthIdle: never.
	HealthIdle, HealthTimeout time.Duration

	mu    sync.Mutex
	conns map[string]*conn     // by scheme://host
	known map[string]bool      // servers that said they serve the fast path (Header)
	off   map[string]time.Time // servers that refused a stream, until
}

// errRefused is a server's refusal of the upgrade: call it the usual way.
var errRefused = errors.New("fastpath: upgrade refused")

// errNotRun fails the calls a GoAway says the server did not run: they are
// sent again on another connection.
var errNotRun = errors.New("fastpath: call not run")

// Do implements connect.HTTPClient.
func (t *Transport) Do(r *http.Request) (*http.Response, error) {
	if !unary(r) {
		return t.Fallback.Do(r)
	}
	key := r.URL.Scheme + "://" + r.URL.Host
	t.mu.Lock()
	known := t.known[key]
	t.mu.Unlock()
	if !known {
		resp, err := t.Fallback.Do(r)
		if err == nil && resp.Header.Get(Header) != "" {
			t.mu.Lock()
			if t.known == nil {
				t.known = map[string]bool{}
			}
			t.known[key] = true
			t.mu.Unlock()
		}
		return resp, err
	}
	var body []byte
	for {
		c, err := t.conn(r.Context(), r.URL, r.Header.Get("Authorization"))
		if errors.Is(err, errRefused) {
			if body != nil {
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			return t.Fallback.Do(r)
		}
		if err != nil {
			return nil, err
		}
		if body == nil {
			if body, err = readBody(r); err != nil {
				return nil, err
			}
		}
		resp, err := c.roundTrip(r, body)
		if errors.Is(err, errNotRun) {
			continue // the server is going away: a new connection
		}
		return resp, err
	}
}

// unary reports whether r is a Connect unary call.
func unary(r *http.Request) bool {
	if r.Method != http.MethodPost || r.URL == nil || (r.URL.Scheme != "http" && r.URL.Scheme != "https") {
		return false
	}
	ct := r.Header.Get("Content-Type")
	return ct == "application/proto" || ct == "application/json"
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return []byte{}, nil
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if b == nil {
		b = []byte{}
	}
	return b, err
}

// conn returns the connection to u's server, dialling it if there is none.
// A new stream is opened with auth, the credentials of the call that
// needed it: a node with authentication admits only streams whose opener
// authenticates (each call is still checked by its own).
func (t *Transport) conn(ctx context.Context, u *url.URL, auth string) (*conn, error) {
	key := u.Scheme + "://" + u.Host
	t.mu.Lock()
	if until, ok := t.off[key]; ok {
		if time.Now().Before(until) {
			t.mu.Unlock()
			return nil, errRefused
		}
		delete(t.off, key)
	}
	c := t.conns[key]
	if c == nil {
		c = &conn{t: t, key: key, ready: make(chan struct{}), pending: map[uint32]chan result{}}
		if t.conns == nil {
			t.conns = map[string]*conn{}
		}
		t.conns[key] = c
		go c.dial(u, auth)
	}
	t.mu.Unlock()
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.dialErr != nil {
		return nil, c.dialErr
	}
	return c, nil
}

// forget drops c from the connections, so the next call dials anew.
func (t *Transport) forget(c *conn, refused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conns[c.key] == c {
		delete(t.conns, c.key)
	}
	if refused {
		if t.off == nil {
			t.off = map[string]time.Time{}
		}
		t.off[c.key] = time.Now().Add(refusedFor)
	}
}

// CloseIdleConnections closes every connection, failing the calls on them.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	cs := make([]*conn, 0, len(t.conns))
	for _, c := range t.conns {
		cs = append(cs, c)
	}
	t.mu.Unlock()
	for _, c := range cs {
		<-c.ready
		if c.dialErr == nil {
			c.fail(net.ErrClosed)
		}
	}
	if f, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

type result struct {
	f   Frame
	err error
}

// conn is one upgraded connection and the calls out on it.
type conn struct {
	t       *Transport
	key     string
	ready   chan struct{} // closed when dial has ended; then nc or dialErr
	nc      net.Conn
	dialErr error

	wmu sync.Mutex // one frame written at a time

	mu      sync.Mutex
	nextID  uint32
	pending map[uint32]chan result
	// lastRead is when a frame last came (unix ns), for the health check.
	lastRead atomic.Int64
	goneErr  error // why the connection ended; nil while it serves
}

// dial connects and upgrades, then reads answers until the connection ends.
func (c *conn) dial(u *url.URL, auth string) {
	nc, br, err := c.t.upgrade(u, auth)
	if err != nil {
		c.dialErr = err
		c.t.forget(c, errors.Is(err, errRefused))
		close(c.ready)
		return
	}
	c.nc = nc
	c.lastRead.Store(time.Now().UnixNano())
	close(c.ready)
	if c.t.HealthIdle > 0 {
		go c.watch()
	}
	c.read(br)
}

// errSilent is a stream's failed health check: a read error, so that the
// client counts its calls as sent to a node that did not answer.
var errSilent = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("fastpath: no answer to a health-check ping (the node is paused or cut off)")}

// watch pings the stream when it has calls out and has been silent for
// HealthIdle, and fails it when the pong does not come within
// HealthTimeout.
func (c *conn) watch() {
	idle, timeout := c.t.HealthIdle, max(c.t.HealthTimeout, time.Millisecond)
	t := time.NewTicker(max(idle/4, time.Millisecond))
	defer t.Stop()
	var pinged time.Time // when the unanswered ping went out
	for range t.C {
		c.mu.Lock()
		gone, busy := c.goneErr != nil && c.goneErr != errNotRun, len(c.pending) > 0
		c.mu.Unlock()
		if gone {
			return
		}
		last := time.Unix(0, c.lastRead.Load())
		now := time.Now()
		switch {
		case !pinged.IsZero() && last.After(pinged):
			pinged = time.Time{} // answered
		case !pinged.IsZero() && now.Sub(pinged) >= timeout:
			c.fail(errSilent)
			return
		case pinged.IsZero() && busy && now.Sub(last) >= idle:
			pinged = now
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := c.write(ctx, AppendControl(nil, 0, KindPing))
			cancel()
			if err != nil {
				c.fail(err)
				return
			}
		}
	}
}

// upgrade dials u's server and asks for the fast path.
func (t *Transport) upgrade(u *url.URL, auth string) (net.Conn, *bufio.Reader, error) {
	d := t.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	nc, err := d.Dial("tcp", host)
	if err != nil {
		return nil, nil, err
	}
	if u.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if t.TLS != nil {
			cfg = t.TLS.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(nc, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), d.Timeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		nc = tc
	}
	_ = nc.SetDeadline(time.Now().Add(d.Timeout))
	// Expect: 100-continue lets a server that refuses the stream without
	// reading it (an older node, a proxy, a Host check) answer at once:
	// net/http would otherwise read the body to its end first.
	req := "POST " + Path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: " + ContentType +
		"\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n"
	if auth != "" && validValue(auth) {
		req += "Authorization: " + auth + "\r\n"
	}
	req += "\r\n"
	if _, err := io.WriteString(nc, req); err != nil {
		nc.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	var resp *http.Response
	for {
		if resp, err = http.ReadResponse(br, nil); err != nil {
			nc.Close()
			return nil, nil, err
		}
		if resp.StatusCode >= 200 {
			break
		}
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ContentType {
		nc.Close()
		return nil, nil, fmt.Errorf("%w: %s", errRefused, resp.Status)
	}
	_ = nc.SetDeadline(time.Time{})
	// The response's body, de-chunked, is the server's frames.
	return nc, bufio.NewReaderSize(resp.Body, 64<<10), nil
}

// chunk frames b as one chunk of the request's chunked body.
func chunk(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	out = strconv.AppendInt(out, int64(len(b)), 16)
	out = append(out, '\r', '\n')
	out = append(out, b...)
	return append(out, '\r', '\n')
}

// read delivers answers to their calls until the connection fails.
func (c *conn) read(br *bufio.Reader) {
	max := c.t.MaxResponseBytes
	if max <= 0 {
		max = DefaultMaxResponseBytes
	}
	var hdr [HeaderLen]byte
	for {
		n, id, k, err := ReadHeader(br, &hdr, max)
		if err != nil {
			c.fail(err)
			return
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			c.fail(err)
			return
		}
		c.lastRead.Store(time.Now().UnixNano())
		f, err := Decode(id, k, p)
		if k == KindPong && err == nil {
			continue
		}
		if err == nil && k != KindResponse && k != KindGoAway {
			err = fmt.Errorf("%w: kind %d from a server", ErrMalformed, k)
		}
		if err != nil {
			c.fail(err)
			return
		}
		if k == KindGoAway {
			c.goAway(id)
			continue
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- result{f: f}
		}
	}
}

// goAway takes c out of service: calls above last were not run and go
// again on a new connection; the others still get their answers, and the
// server then closes the connection.
func (c *conn) goAway(last uint32) {
	c.t.forget(c, false)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goneErr == nil {
		c.goneErr = errNotRun
	}
	for id, ch := range c.pending {
		if id > last {
			delete(c.pending, id)
			ch <- result{err: errNotRun}
		}
	}
}

// fail ends c: every call out on it fails with err (those a GoAway said
// were not run, with errNotRun).
func (c *conn) fail(err error) {
	c.t.forget(c, false)
	c.nc.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goneErr == nil || c.goneErr == errNotRun {
		c.goneErr = fmt.Errorf("fastpath: connection to %s lost: %w", c.key, err)
	}
	for id, ch := range c.pending {
		delete(c.pending, id)
		ch <- result{err: c.goneErr}
	}
}

// roundTrip sends r with body on c and waits for its answer.
func (c *conn) roundTrip(r *http.Request, body []byte) (*http.Response, error) {
	ctx := r.Context()
	ch := make(chan result, 1)
	// The id is taken as the frame goes out, under the write lock: ids
	// reach the server in the order they grow, as a GoAway's last id
	// needs (calls above it were not run).
	frame := AppendRequest(make([]byte, 0, len(body)+256), 0, r.URL.Path, r.Header, body)
	var id uint32
	err := c.writeWith(ctx, frame, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.goneErr != nil {
			return c.goneErr
		}
		c.nextID++
		id = c.nextID
		c.pending[id] = ch
		binary.BigEndian.PutUint32(frame[4:8], id)
		return nil
	})
	switch {
	case errors.Is(err, errNotRun):
		return nil, errNotRun
	case id == 0 && err != nil:
		return nil, err // the connection had ended: nothing was sent
	case err != nil:
		c.fail(err) // the call is answered with the connection's error
	}
	select {
	case res := <-ch:
		if res.err != nil {
			return nil, res.err
		}
		return &http.Response{
			Status:        fmt.Sprintf("%d %s", res.f.Status, http.StatusText(res.f.Status)),
			StatusCode:    res.f.Status,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        res.f.Header,
			Trailer:       http.Header{},
			Body:          io.NopCloser(bytes.NewReader(res.f.Body)),
			ContentLength: int64(len(res.f.Body)),
			Request:       r,
		}, nil
	case <-ctx.Done():
		c.mu.Lock()
		_, out := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if out {
			_ = c.write(context.Background(), AppendControl(nil, id, KindCancel))
		}
		return nil, ctx.Err()
	}
}

// writeTimeout bounds a frame's write when its call has no deadline: a
// server that stopped reading must not hold the connection's writes.
const writeTimeout = 30 * time.Second

// write sends frame b as one chunk. A failed write leaves the stream
// broken (part of a chunk may be out): the caller fails the connection.
func (c *conn) write(ctx context.Context, b []byte) error {
	return c.writeWith(ctx, b, nil)
}

// writeWith is write, calling before (if not nil) under the write lock
// first; an error of before is returned, and nothing written.
func (c *conn) writeWith(ctx context.Context, b []byte, before func() error) error {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(writeTimeout)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	_ = c.nc.SetWriteDeadline(dl)
	_, err := c.nc.Write(chunk(b))
	return err
}
