package route

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/remote"
)

// TestPeerCallsDoNotAskForCompression: members call each other without
// accepting gzip, so the answering member never spends CPU compressing
// (it halved relayed replays).
func TestPeerCallsDoNotAskForCompression(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	peers := NewPeers(PeersConfig{Self: 1, ClusterID: 1, HTTP: HTTP{Client: srv.Client()}})
	_, _ = peers.Fetch(ctx, 2, addr, 3, 0, remote.Fetch{MaxBytes: 1})
	_, _ = peers.Publish(ctx, 2, addr, "t", 0, []record.Record{{Value: []byte("v")}}, nil, false)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d calls reached the server, want 2", len(seen))
	}
	for _, h := range seen {
		for _, k := range []string{"Grpc-Accept-Encoding", "Accept-Encoding", "Connect-Accept-Encoding"} {
			if strings.Contains(h.Get(k), "gzip") {
				t.Errorf("a peer call accepts gzip (%s: %s)", k, h.Get(k))
			}
		}
	}
}
