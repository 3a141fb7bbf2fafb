package httpedge

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// BodyLimits bound what request bodies may hold of a node. A slow client
// used to keep a 60 MB body half-sent, and its buffer, for as long as it
// liked; eight of them took 800 MB (issue 24, finding 5).
//
// Both apply to every request but those of a client-streaming procedure
// (the raft stream between members, whose body has no end): a unary call's
// body, and the single request message of a server stream (Subscribe),
// once read to its end, are done with both.
type BodyLimits struct {
	// ReadTimeout is how long after its headers a request's body must have
	// arrived in full. Zero or negative: no deadline.
	ReadTimeout time.Duration
	// InFlight bounds the request body bytes read and not yet consumed
	// (read up to the body's end), all requests together: a read past it
	// fails with ResourceExhausted (HTTP 429 for Connect), and the request
	// with it. Zero or negative: no bound.
	InFlight int64
}

// bodyChunk is the most a body read reserves of the budget at once, so a
// large read buffer does not fail for want of a budget it would not use.
const bodyChunk = 64 << 10

// GuardBodies applies cfg to the request bodies h reads.
func GuardBodies(h http.Handler, cfg BodyLimits) http.Handler {
	return NewBodyGuard(cfg).Handler(h)
}

// BodyGuard applies BodyLimits: to the bodies of HTTP requests (Handler)
// and to the request frames of the fast path (FastpathConfig.Bodies), out
// of one budget.
type BodyGuard struct {
	BodyLimits
	b *budget
}

// NewBodyGuard returns a guard of cfg with an unused budget.
func NewBodyGuard(cfg BodyLimits) *BodyGuard {
	g := &BodyGuard{BodyLimits: cfg}
	if cfg.InFlight > 0 {
		g.b = &budget{max: cfg.InFlight}
	}
	return g
}

// Handler applies g to the request bodies h reads.
func (g *BodyGuard) Handler(h http.Handler) http.Handler {
	cfg, b := g.BodyLimits, g.b
	if cfg.ReadTimeout <= 0 && cfg.InFlight <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || clientStreams(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		g := &guardedBody{rc: r.Body, b: b, timeout: cfg.ReadTimeout, budget: cfg.InFlight}
		if cfg.ReadTimeout > 0 {
			g.ctl = http.NewResponseController(w)
			// An error means the connection cannot take a deadline (not
			// net/http's); the body then goes without one.
			if g.ctl.SetReadDeadline(time.Now().Add(cfg.ReadTimeout)) != nil {
				g.ctl = nil
			}
		}
		r.Body = g
		defer g.finish()
		h.ServeHTTP(w, r)
	})
}

// take reserves n bytes of the budget, if there is one (nil g: none).
func (g *BodyGuard) take(n int64) bool {
	return g == nil || g.b == nil || g.b.take(n)
}

// give returns n bytes that take reserved (held false: none were).
func (g *BodyGuard) give(n int64, held bool) {
	if held && g != nil && g.b != nil {
		g.b.give(n)
	}
}

// budget counts the body bytes in flight. Safe for concurrent use.
type budget struct {
	max  int64
	used atomic.Int64
}

func (b *budget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			counters.bodyInFlight.Add(n)
			return true
		}
	}
}

func (b *budget) give(n int64) {
	b.used.Add(-n)
	counters.bodyInFlight.Add(-n)
}

// guardedBody is a request body under a deadline and the budget.
type guardedBody struct {
	rc      io.ReadCloser
	ctl     *http.ResponseController
	b       *budget
	timeout time.Duration
	budget  int64
	mu      sync.Mutex
	held    int64 // bytes of the budget this body holds
	done    bool  // the end (or an error) was read: deadline and budget are let go
}

func (g *guardedBody) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return g.rc.Read(p)
	}
	want := int64(len(p))
	if g.b != nil {
		want = min(want, bodyChunk)
		if !g.b.take(want) {
			counters.bodyBudgetRefused.Add(1)
			g.finishLocked()
			return 0, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
				"the node is reading its limit of %d bytes of request bodies at once (--max-body-bytes-in-flight): retry later", g.budget))
		}
	}
	n, err := g.rc.Read(p[:want])
	if g.b != nil {
		g.b.give(want - int64(n))
		g.held += int64(n)
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			counters.bodyTimeouts.Add(1)
			err = connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf(
				"the request body did not arrive within %v of its headers (--body-read-timeout)", g.timeout))
		}
		g.finishLocked()
	}
	return n, err
}

func (g *guardedBody) Close() error { return g.rc.Close() }

// finish lets go of the deadline and the budget once the body is read or
// the handler returned.
func (g *guardedBody) finish() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.finishLocked()
}

func (g *guardedBody) finishLocked() {
	if g.done {
		return
	}
	g.done = true
	if g.ctl != nil {
		// A server stream goes on after its request: a deadline left set
		// would end it (HTTP/1 cancels a request whose connection read
		// fails).
		_ = g.ctl.SetReadDeadline(time.Time{})
	}
	if g.b != nil {
		g.b.give(g.held)
		g.held = 0
	}
}

// streaming caches clientStreams by path.
var streaming sync.Map

// clientStreams reports whether path is a procedure whose client streams
// (its request body stays open), by the registered protobuf descriptors.
func clientStreams(path string) bool {
	if v, ok := streaming.Load(path); ok {
		return v.(bool)
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok {
		return false // not a procedure: not cached, the paths are the client's
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return false
	}
	m := sd.Methods().ByName(protoreflect.Name(method))
	if m == nil {
		return false
	}
	streaming.Store(path, m.IsStreamingClient())
	return m.IsStreamingClient()
}
