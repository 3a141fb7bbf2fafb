package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"connectrpc.com/connect"
	pb "go.etcd.io/raft/v3/raftpb"

	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/peerauth"
	"github.com/rewind-io/rewind/raftlog"
	"github.com/rewind-io/rewind/raftlog/transport"
)

// TestAuthorizeRunsBeforeDecoding: a frame Config.Authorize refuses ends
// the stream with its error, is counted as refused and delivers nothing,
// even when its messages are well formed; the sender learns the stream's
// target from its request context (peerauth.WithTarget), which is how the
// engine signs it and picks its TLS server name.
func TestAuthorizeRunsBeforeDecoding(t *testing.T) {
	var c cluster
	// The receiver authenticates requests by a header a test transport
	// sets from the target mark.
	b := &node{id: 2, frames: newRecorder[[]raftlog.Envelope]()}
	tr, err := transport.New(transport.Config{
		ClusterID: 7, NodeID: 2, Resolve: c.resolve,
		Deliver: func(envs []raftlog.Envelope) { b.frames.add(envs) },
		Authorize: func(ctx context.Context, from uint64) error {
			id, ok := peerauth.PeerOf(ctx)
			if !ok || id != from {
				return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("authenticated as %d (%v), sends as %d", id, ok, from))
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.tr = tr
	t.Cleanup(tr.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	c.set(2, b.addr)
	mux := http.NewServeMux()
	mux.Handle(tr.Handler())
	b.srv = serve(t, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, err := strconv.ParseUint(r.Header.Get("Test-Peer"), 10, 64); err == nil {
			r = r.WithContext(peerauth.WithPeer(r.Context(), id))
		}
		mux.ServeHTTP(w, r)
	}))
	good := &peerv1.RaftEnvelope{Group: 1, Message: encode(t, msg(pb.MsgApp, 1, 2, 1))}
	// Unauthenticated (no header): refused before the frame is read.
	err = rawSend(t, b.addr, &peerv1.SendRequest{ClusterId: 7, From: 1, To: 2, Messages: []*peerv1.RaftEnvelope{good}})
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("unauthenticated frame: %v, want PermissionDenied", err)
	}
	if got := b.frames.all(); len(got) != 0 {
		t.Fatalf("a refused frame delivered %v", got)
	}
	if st := b.tr.Stats(); st.Refused != 1 || st.ReceivedMessages != 0 {
		t.Fatalf("stats after the refusal: %+v", st)
	}
	// Node 1's transport marks its stream with the target; a client that
	// turns the mark into the header gets through.
	var mu sync.Mutex
	var marked []uint64
	a := newNode(t, &c, 7, 1, func(cfg *transport.Config) {
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.Protocols = new(http.Protocols)
		base.Protocols.SetUnencryptedHTTP2(true)
		cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			to, ok := peerauth.TargetOf(r.Context())
			if !ok {
				return nil, errors.New("stream context not marked with its target")
			}
			mu.Lock()
			marked = append(marked, to)
			mu.Unlock()
			r = r.Clone(r.Context())
			r.Header.Set("Test-Peer", "1")
			return base.RoundTrip(r)
		})}
	})
	a.tr.Send([]raftlog.Envelope{env(1, msg(pb.MsgApp, 1, 2, 1))})
	if got := b.messages(t, 1); len(got) != 1 {
		t.Fatalf("delivered %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(marked) == 0 || marked[0] != 2 {
		t.Fatalf("stream contexts marked %v, want node 2", marked)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
