package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// The client's options that change what goes on the wire, tested against
// fake nodes: the generated PublishService handler over fakeNet, an HTTP
// client without sockets, so each test runs in a synctest bubble with its
// own clock and waits on no real time. (The client against real nodes:
// internal/cliente2e.)

// fakeNet is a connect.HTTPClient that hands each request to the handler
// of its host ("a" for http://a) in the caller's goroutine, and logs the
// hosts asked and the headers they were sent.
type fakeNet struct {
	nodes map[string]http.Handler
	mu    struct {
		sync.Mutex
		asked   []string
		headers []http.Header
		// down holds hosts whose next requests fail as unreachable (a
		// refused connection): how many.
		down map[string]int
	}
}

func newFakeNet(nodes map[string]http.Handler) *fakeNet {
	n := &fakeNet{nodes: nodes}
	n.mu.down = map[string]int{}
	return n
}

func (n *fakeNet) Do(r *http.Request) (*http.Response, error) {
	host := r.URL.Host
	n.mu.Lock()
	n.mu.asked = append(n.mu.asked, host)
	n.mu.headers = append(n.mu.headers, r.Header.Clone())
	down := n.mu.down[host] > 0
	if down {
		n.mu.down[host]--
	}
	n.mu.Unlock()
	h, ok := n.nodes[host]
	if down || !ok {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// asked returns the hosts asked so far, in order.
func (n *fakeNet) asked() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.mu.asked)
}

// publishNode is a fake node's PublishService: publish answers each
// request (nil: every record stored, at offsets counting from 0), and
// every request's record values are kept.
type publishNode struct {
	rewindv1connect.UnimplementedPublishServiceHandler
	publish func(context.Context, *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error)
	mu      struct {
		sync.Mutex
		requests [][]string
		offset   uint64
	}
}

func (p *publishNode) Publish(ctx context.Context, req *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
	var values []string
	for _, r := range req.GetRecords() {
		values = append(values, string(r.GetValue()))
	}
	p.mu.Lock()
	p.mu.requests = append(p.mu.requests, values)
	p.mu.Unlock()
	if p.publish != nil {
		return p.publish(ctx, req)
	}
	return p.stored(req), nil
}

// stored answers req as if every record were stored.
func (p *publishNode) stored(req *rewindv1.PublishRequest) *rewindv1.PublishResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &rewindv1.PublishResponse{}
	for range req.GetRecords() {
		resp.Results = append(resp.Results, &rewindv1.PublishResult{Offset: p.mu.offset})
		p.mu.offset++
	}
	return resp
}

func (p *publishNode) requests() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.mu.requests)
}

func (p *publishNode) handler() http.Handler {
	_, h := rewindv1connect.NewPublishServiceHandler(p)
	return h
}

// TestWithGzip: with WithGzip a request goes compressed (Content-Encoding:
// gzip) and asks for compressed answers, and the node reads it; without
// it, nothing is compressed and the client does not accept gzip.
func TestWithGzip(t *testing.T) {
	for _, gzip := range []bool{false, true} {
		t.Run(fmt.Sprint("gzip=", gzip), func(t *testing.T) {
			node := &publishNode{}
			fn := newFakeNet(map[string]http.Handler{"a": node.handler()})
			opts := []client.Option{client.WithHTTPClient(fn)}
			if gzip {
				opts = append(opts, client.WithGzip())
			}
			c := client.New("a", opts...)
			value := strings.Repeat("compressible ", 100)
			if _, err := c.Publish(context.Background(), "t", client.Message{Value: []byte(value)}); err != nil {
				t.Fatal(err)
			}
			if got := node.requests(); len(got) != 1 || got[0][0] != value {
				t.Fatalf("the node read %.40q, want the one record", got)
			}
			h := fn.mu.headers[0]
			sent := h.Get("Content-Encoding") == "gzip"
			accepts := slices.Contains(strings.Split(strings.ReplaceAll(h.Get("Accept-Encoding"), " ", ""), ","), "gzip")
			if sent != gzip || accepts != gzip {
				t.Errorf("Content-Encoding %q, Accept-Encoding %q: want gzip in both = %v", h.Get("Content-Encoding"), h.Get("Accept-Encoding"), gzip)
			}
		})
	}
}

// TestWithLinger: a Publisher with a linger holds a partial batch for it,
// so two messages published back to back go in one request, sent when the
// linger ends and not before.
func TestWithLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &publishNode{}
		c := client.New("a", client.WithHTTPClient(newFakeNet(map[string]http.Handler{"a": node.handler()})))
		p := c.NewPublisher("t", client.WithLinger(time.Second))
		ctx := context.Background()
		start := time.Now()
		var pending []*client.Pending
		for _, v := range []string{"m1", "m2"} {
			pd, err := p.Publish(ctx, client.Message{Value: []byte(v)})
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, pd)
		}
		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		if got := node.requests(); len(got) != 0 {
			t.Fatalf("requests before the linger ended: %q", got)
		}
		for i, pd := range pending {
			res, err := pd.Wait(ctx)
			if err != nil || res.Offset != uint64(i) {
				t.Fatalf("message %d: %+v, %v", i, res, err)
			}
		}
		if got, want := node.requests(), [][]string{{"m1", "m2"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("requests %q, want %q", got, want)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("answered after %s, want the linger, 1s", d)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWithMaxInFlight: a Publisher keeps at most MaxInFlight requests
// out (default 1), and Publish blocks while they are out and the batch is
// full.
func TestWithMaxInFlight(t *testing.T) {
	for _, tc := range []struct {
		opts []client.PublisherOption
		want int
	}{
		{nil, 1},
		{[]client.PublisherOption{client.WithMaxInFlight(3)}, 3},
	} {
		t.Run(fmt.Sprint("want=", tc.want), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				var mu sync.Mutex
				inFlight, most := 0, 0
				node := &publishNode{}
				node.publish = func(_ context.Context, req *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
					mu.Lock()
					inFlight++
					most = max(most, inFlight)
					mu.Unlock()
					<-release
					mu.Lock()
					inFlight--
					mu.Unlock()
					return node.stored(req), nil
				}
				c := client.New("a", client.WithHTTPClient(newFakeNet(map[string]http.Handler{"a": node.handler()})))
				p := c.NewPublisher("t", append(tc.opts, client.WithBatchSize(1))...)
				ctx := context.Background()
				const n = 10
				published := make(chan int)
				go func() {
					for i := range n {
						if _, err := p.Publish(ctx, client.Message{Value: []byte(fmt.Sprint(i))}); err != nil {
							t.Error(err)
						}
						published <- i
					}
					close(published)
				}()
				// Publish returns while a slot is free, then blocks.
				for range tc.want {
					<-published
				}
				synctest.Wait()
				mu.Lock()
				out := inFlight
				mu.Unlock()
				if out != tc.want {
					t.Errorf("%d requests out, want %d", out, tc.want)
				}
				select {
				case i := <-published:
					t.Errorf("publish %d returned while %d requests were out and the batch was full", i, out)
				default:
				}
				close(release)
				for range published {
				}
				if err := p.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if most != tc.want || len(node.requests()) != n {
					t.Errorf("at most %d requests out and %d requests in all, want %d and %d", most, len(node.requests()), tc.want, n)
				}
			})
		})
	}
}

// TestWithRequestTimeout: a Publisher's request that gets no answer ends
// with DeadlineExceeded when WithRequestTimeout says, not at the 30 s
// default.
func TestWithRequestTimeout(t *testing.T) {
	for _, tc := range []struct {
		opts []client.PublisherOption
		want time.Duration
	}{
		{nil, 30 * time.Second},
		{[]client.PublisherOption{client.WithRequestTimeout(3 * time.Second)}, 3 * time.Second},
	} {
		t.Run(tc.want.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				node := &publishNode{publish: func(ctx context.Context, _ *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
					<-ctx.Done() // a node that never answers
					return nil, ctx.Err()
				}}
				// One attempt without its own deadline: only the
				// publisher's request timeout bounds it.
				c := client.New("a", client.WithHTTPClient(newFakeNet(map[string]http.Handler{"a": node.handler()})),
					client.WithPublishRetry(1, 0, 0))
				p := c.NewPublisher("t", tc.opts...)
				ctx := context.Background()
				start := time.Now()
				pd, err := p.Publish(ctx, client.Message{Value: []byte("v")})
				if err != nil {
					t.Fatal(err)
				}
				_, err = pd.Wait(ctx)
				if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
					t.Errorf("got %v, want DeadlineExceeded", err)
				}
				if d := time.Since(start); d != tc.want {
					t.Errorf("ended after %s, want %s", d, tc.want)
				}
				_ = p.Close(ctx)
			})
		})
	}
}

// TestWithNodePenalty: the penalty decides whether a node that failed is
// tried again. Nodes a, b, c: the first publish finds a unreachable, is
// refused by b naming c the leader, and is stored by c. The second finds
// c unreachable; the next node in order is a, the one that failed first:
// within its penalty the publish goes to b instead, after it to a.
func TestWithNodePenalty(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []client.Option
		after time.Duration // between the two publishes
		want  string        // the node the second publish is stored by
	}{
		{"default, a penalised", nil, 0, "b"},
		{"default, a's penalty over", nil, client.DefaultNodePenalty, "a"},
		{"a minute, a penalised", []client.Option{client.WithNodePenalty(time.Minute)}, 30 * time.Second, "b"},
		{"none", []client.Option{client.WithNodePenalty(0)}, 0, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b, c := &publishNode{}, &publishNode{}, &publishNode{}
				hinted := false
				b.publish = func(_ context.Context, req *rewindv1.PublishRequest) (*rewindv1.PublishResponse, error) {
					if hinted {
						return b.stored(req), nil
					}
					hinted = true
					e := connect.NewError(connect.CodeUnavailable, errors.New("not the leader"))
					e.Meta().Set("Rewind-Leader", "3")
					e.Meta().Set("Rewind-Leader-Address", "c")
					e.Meta().Set("Rewind-Not-Stored", "1")
					return nil, e
				}
				fn := newFakeNet(map[string]http.Handler{"a": a.handler(), "b": b.handler(), "c": c.handler()})
				fn.mu.down["a"] = 1
				cl := client.New("a,b,c", append(tc.opts, client.WithHTTPClient(fn))...)
				ctx := context.Background()
				if _, err := cl.Publish(ctx, "t", client.Message{Value: []byte("first")}); err != nil {
					t.Fatal(err)
				}
				if got, want := fn.asked(), []string{"a", "b", "c"}; !slices.Equal(got, want) {
					t.Fatalf("the first publish asked %v, want %v", got, want)
				}
				time.Sleep(tc.after)
				fn.mu.Lock()
				fn.mu.down["c"] = 1
				fn.mu.Unlock()
				if _, err := cl.Publish(ctx, "t", client.Message{Value: []byte("second")}); err != nil {
					t.Fatal(err)
				}
				if got, want := fn.asked()[3:], []string{"c", tc.want}; !slices.Equal(got, want) {
					t.Errorf("the second publish asked %v, want %v", got, want)
				}
			})
		})
	}
}
