package httpedge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client/fastpath"
)

// fastServer serves h as a node does: the fast path beside h, under a
// body guard of limits. It returns the server's URL and its Fastpath.
func fastServer(t *testing.T, h http.Handler, limits BodyLimits) (string, *Fastpath) {
	t.Helper()
	guard := NewBodyGuard(limits)
	fp := NewFastpath(h, FastpathConfig{Bodies: guard, MaxFrameBytes: 1 << 20, IdleTimeout: time.Minute})
	srv := httptest.NewUnstartedServer(fp.Handler(guard.Handler(h)))
	srv.Config.RegisterOnShutdown(fp.Shutdown)
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(fp.Close) // first: httptest waits for the streams' requests
	return srv.URL, fp
}

// recorder is a fallback transport that counts what it carries.
type recorder struct{ n atomic.Int64 }

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	r.n.Add(1)
	return http.DefaultClient.Do(req)
}

func unaryRequest(t *testing.T, ctx context.Context, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/svc/Method", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("X-Echo", "header")
	return req
}

func TestFastpathCallsRunTheHandler(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Path", r.URL.Path)
		w.Header().Set("X-Echo", r.Header.Get("X-Echo"))
		w.Header().Set("X-Remote", r.RemoteAddr)
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "%s from %s", body, r.Host)
	})
	url, _ := fastServer(t, h, BodyLimits{InFlight: 1 << 20, ReadTimeout: time.Minute})
	fb := &recorder{}
	tr := &fastpath.Transport{Fallback: fb}
	calls := Totals().FastpathCalls
	for i := range 3 {
		resp, err := tr.Do(unaryRequest(t, context.Background(), url, "call "+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		host := strings.TrimPrefix(url, "http://")
		if resp.StatusCode != http.StatusAccepted || string(body) != fmt.Sprintf("call %d from %s", i, host) ||
			resp.Header.Get("X-Path") != "/svc/Method" || resp.Header.Get("X-Echo") != "header" || resp.Header.Get("X-Remote") == "" {
			t.Fatalf("answer %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
	}
	// The first call learns that the server serves the fast path.
	if fb.n.Load() != 1 || Totals().FastpathCalls-calls != 2 {
		t.Fatalf("fallback carried %d calls, the fast path %d; want 1 and 2", fb.n.Load(), Totals().FastpathCalls-calls)
	}
	// Anything but a unary Connect call goes the usual way.
	req := unaryRequest(t, context.Background(), url, "stream")
	req.Header.Set("Content-Type", "application/connect+proto")
	resp, err := tr.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if fb.n.Load() != 2 {
		t.Fatalf("a streaming call did not go through the fallback")
	}
}

// TestFastpathFallsBackOnServersWithout: a server without the fast path
// (an older node) does not say it serves it; calls go through the
// fallback, and succeed. One that says so but refuses the stream (a proxy
// between) is called through the fallback too.
func TestFastpathFallsBackOnServersWithout(t *testing.T) {
	var streams atomic.Int64
	var claim atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == fastpath.Path {
			streams.Add(1)
			http.Error(w, "no", http.StatusBadGateway)
			return
		}
		if claim.Load() {
			w.Header().Set(fastpath.Header, "1")
		}
		io.WriteString(w, "plain")
	}))
	defer srv.Close()
	fb := &recorder{}
	tr := &fastpath.Transport{Fallback: fb}
	for range 2 {
		resp, err := tr.Do(unaryRequest(t, context.Background(), srv.URL, "x"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "plain" {
			t.Fatalf("answer %q", body)
		}
	}
	if fb.n.Load() != 2 || streams.Load() != 0 {
		t.Fatalf("fallback carried %d of 2 calls, %d streams were asked for", fb.n.Load(), streams.Load())
	}
	claim.Store(true)
	tr = &fastpath.Transport{Fallback: fb}
	for range 3 {
		resp, err := tr.Do(unaryRequest(t, context.Background(), srv.URL, "x"))
		if err != nil {
			t.Fatal(err)
		}
		if body, _ := io.ReadAll(resp.Body); string(body) != "plain" {
			t.Fatalf("answer %q", body)
		}
	}
	if fb.n.Load() != 5 || streams.Load() != 1 {
		t.Fatalf("fallback carried %d of 5 calls, %d streams were asked for; want 1", fb.n.Load(), streams.Load())
	}
}

// TestFastpathCancelReachesTheHandler: a caller that gives up cancels its
// call's context on the server.
func TestFastpathCancelReachesTheHandler(t *testing.T) {
	started, cancelled := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/warm" {
			return
		}
		close(started)
		<-r.Context().Done()
		close(cancelled)
	})
	url, _ := fastServer(t, h, BodyLimits{})
	tr := &fastpath.Transport{Fallback: &recorder{}}
	warm(t, tr, url)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := tr.Do(unaryRequest(t, ctx, url, "x"))
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call returned %v; want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-time.After(time.Minute):
		t.Fatal("the handler's context was not cancelled")
	}
}

// warm makes a first call through tr, by which it learns that url serves
// the fast path: the next calls go as frames.
func warm(t *testing.T, tr *fastpath.Transport, url string) {
	t.Helper()
	req := unaryRequest(t, context.Background(), url, "x")
	req.URL.Path = "/warm"
	resp, err := tr.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// rawStream opens a fast-path stream by hand, to send what the Transport
// never would.
type rawStream struct {
	nc   net.Conn
	resp *bufio.Reader
}

func openRaw(t *testing.T, url string) *rawStream {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	fmt.Fprintf(nc, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n", fastpath.Path, fastpath.ContentType)
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", resp, err)
	}
	return &rawStream{nc: nc, resp: bufio.NewReader(resp.Body)}
}

func (s *rawStream) send(t *testing.T, frame []byte) {
	t.Helper()
	if _, err := fmt.Fprintf(s.nc, "%x\r\n%s\r\n", len(frame), frame); err != nil {
		t.Fatal(err)
	}
}

// next reads the server's next frame (io.EOF: the stream ended).
func (s *rawStream) next() (fastpath.Frame, error) {
	var hdr [fastpath.HeaderLen]byte
	n, id, k, err := fastpath.ReadHeader(s.resp, &hdr, 1<<20)
	if err != nil {
		return fastpath.Frame{}, err
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(s.resp, p); err != nil {
		return fastpath.Frame{}, err
	}
	return fastpath.Decode(id, k, p)
}

func protoCall() http.Header { return http.Header{"Content-Type": {"application/proto"}} }

// TestFastpathBadStreamsEnd: a malformed frame or a request id that does
// not grow ends its stream without running anything; the server goes on.
func TestFastpathBadStreamsEnd(t *testing.T) {
	var ran atomic.Int64
	url, _ := fastServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Add(1) }), BodyLimits{})
	cases := map[string][][]byte{
		"garbage":          {[]byte("this is not a frame at all")},
		"a response frame": {fastpath.AppendResponse(nil, 1, 200, nil, nil)},
		"a bad path":       {fastpath.AppendRequest(nil, 1, "no-slash", protoCall(), nil)},
		"ids going back":   {fastpath.AppendRequest(nil, 5, "/a", protoCall(), nil), fastpath.AppendRequest(nil, 4, "/a", protoCall(), nil)},
		"a huge frame":     {{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1, 1}},
	}
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			before := ran.Load()
			s := openRaw(t, url)
			for _, f := range frames {
				s.send(t, f)
			}
			var answers int64
			for {
				f, err := s.next()
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if f.Kind == fastpath.KindResponse {
					answers++
				}
			}
			if got := ran.Load() - before; got != answers || got > 1 {
				t.Fatalf("%d calls ran and %d were answered before the stream ended", got, answers)
			}
		})
	}
	// The server still serves.
	s := openRaw(t, url)
	s.send(t, fastpath.AppendRequest(nil, 1, "/a", protoCall(), nil))
	if f, err := s.next(); err != nil || f.Status != http.StatusOK {
		t.Fatalf("after bad streams: %+v %v", f, err)
	}
}

// TestFastpathBodyBudget: a call whose body would go past the node's
// budget of bodies in flight is refused with ResourceExhausted, unrun, and
// the stream goes on.
func TestFastpathBodyBudget(t *testing.T) {
	var ran atomic.Int64
	url, _ := fastServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Add(1) }), BodyLimits{InFlight: 64})
	s := openRaw(t, url)
	s.send(t, fastpath.AppendRequest(nil, 1, "/a", protoCall(), bytes.Repeat([]byte("x"), 200)))
	f, err := s.next()
	if err != nil {
		t.Fatal(err)
	}
	resp := &http.Response{StatusCode: f.Status, Header: f.Header, Body: io.NopCloser(bytes.NewReader(f.Body))}
	if f.Status != http.StatusTooManyRequests || !strings.Contains(string(f.Body), "resource_exhausted") || ran.Load() != 0 {
		t.Fatalf("an over-budget call: %d %s %v (ran %d)", f.Status, f.Body, resp.Header, ran.Load())
	}
	s.send(t, fastpath.AppendRequest(nil, 2, "/a", protoCall(), []byte("small")))
	if f, err := s.next(); err != nil || f.Status != http.StatusOK || ran.Load() != 1 {
		t.Fatalf("the next call: %+v %v", f, err)
	}
	if err := connect.NewError(connect.CodeResourceExhausted, nil); err == nil {
		t.Fatal("unreachable")
	}
}

// TestFastpathShutdownLetsCallsFinish: a shutdown's GoAway names the last
// call that will run; that call is answered, a later one is not run, and
// the stream ends.
func TestFastpathShutdownLetsCallsFinish(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 2)
	var ran atomic.Int64
	url, fp := fastServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		started <- struct{}{}
		<-gate
		io.WriteString(w, "done")
	}), BodyLimits{})
	s := openRaw(t, url)
	s.send(t, fastpath.AppendRequest(nil, 1, "/a", protoCall(), nil))
	<-started
	fp.Shutdown()
	f, err := s.next()
	if err != nil || f.Kind != fastpath.KindGoAway || f.ID != 1 {
		t.Fatalf("want a GoAway naming call 1, got %+v %v", f, err)
	}
	s.send(t, fastpath.AppendRequest(nil, 2, "/a", protoCall(), nil))
	close(gate)
	f, err = s.next()
	if err != nil || f.Kind != fastpath.KindResponse || f.ID != 1 || string(f.Body) != "done" {
		t.Fatalf("call 1's answer: %+v %v", f, err)
	}
	if _, err := s.next(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the stream did not end: %v", err)
	}
	if ran.Load() != 1 {
		t.Fatalf("%d calls ran; want 1 (call 2 came after the GoAway)", ran.Load())
	}
}

// TestFastpathHandlerPanic: a handler's panic fails its call with 500 and
// nothing else.
func TestFastpathHandlerPanic(t *testing.T) {
	url, _ := fastServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("a handler's bug")
		}
	}), BodyLimits{})
	s := openRaw(t, url)
	s.send(t, fastpath.AppendRequest(nil, 1, "/panic", protoCall(), nil))
	s.send(t, fastpath.AppendRequest(nil, 2, "/fine", protoCall(), nil))
	got := map[uint32]int{}
	for range 2 {
		f, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		got[f.ID] = f.Status
	}
	if got[1] != http.StatusInternalServerError || got[2] != http.StatusOK {
		t.Fatalf("statuses %v", got)
	}
}

// TestFastpathConcurrentCalls: many callers share a stream; every call is
// answered with its own answer (the server ends a stream whose request ids
// go back, so ids must reach it in order whatever the callers' timing).
func TestFastpathConcurrentCalls(t *testing.T) {
	url, _ := fastServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, r.Body)
	}), BodyLimits{InFlight: 1 << 20})
	tr := &fastpath.Transport{Fallback: &recorder{}}
	warm(t, tr, url)
	streams := Totals().FastpathStreams
	errc := make(chan error, 32)
	for g := range 32 {
		go func() {
			for i := range 50 {
				want := fmt.Sprintf("caller %d call %d", g, i)
				resp, err := tr.Do(unaryRequest(t, context.Background(), url, want))
				if err != nil {
					errc <- err
					return
				}
				got, _ := io.ReadAll(resp.Body)
				if string(got) != want {
					errc <- fmt.Errorf("answer %q to %q", got, want)
					return
				}
			}
			errc <- nil
		}()
	}
	for range 32 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if n := Totals().FastpathStreams; n != streams && n != streams+1 {
		t.Fatalf("%d streams open, %d before: the calls did not share one", n, streams)
	}
}

// TestFastpathShutdownAfterTheStreamEnded: a Shutdown lists the open
// streams and then tells each to go away; a stream that ended in between
// (its handler returned, and net/http released its response) must not be
// written to. Found in a scenario run: a node panicked in goAway during
// SIGTERM.
func TestFastpathShutdownAfterTheStreamEnded(t *testing.T) {
	url, fp := fastServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), BodyLimits{})
	s := openRaw(t, url)
	var c *fconn
	for deadline := time.Now().Add(time.Minute); c == nil; {
		fp.mu.Lock()
		for k := range fp.conns {
			c = k
		}
		fp.mu.Unlock()
		if c == nil && time.Now().After(deadline) {
			t.Fatal("the stream never registered")
		}
	}
	s.nc.Close() // the client goes away: the handler returns
	for deadline := time.Now().Add(time.Minute); ; {
		fp.mu.Lock()
		n := len(fp.conns)
		fp.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream's handler never returned")
		}
		time.Sleep(time.Millisecond) // poll
	}
	c.goAway() // as Shutdown would, with the stream listed before it ended
	c.close()
	c.write([]byte("late"))
}
