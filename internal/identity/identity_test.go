package identity

import (
	"net/http"
	"testing"
)

// TestHeadersRoundTrip: what SetHeaders writes FromHeaders reads back,
// the cluster id in the 16 hex digits `rewind cluster` prints; anything
// else is not an identity.
func TestHeadersRoundTrip(t *testing.T) {
	for _, tc := range []struct{ node, cluster uint64 }{{1, 0}, {3, 0x00ab_cdef_0123_4567}, {1 << 40, ^uint64(0)}} {
		h := http.Header{}
		SetHeaders(h, tc.node, tc.cluster)
		if got := h.Get(ClusterHeader); len(got) != 16 {
			t.Errorf("cluster %x written as %q", tc.cluster, got)
		}
		n, c, ok := FromHeaders(h)
		if !ok || n != tc.node || c != tc.cluster {
			t.Errorf("read back %d %x %v, want %d %x", n, c, ok, tc.node, tc.cluster)
		}
	}
	for _, h := range []http.Header{
		{},
		{NodeHeader: {"2"}},
		{NodeHeader: {"two"}, ClusterHeader: {"0000000000000000"}},
		{NodeHeader: {"2"}, ClusterHeader: {"abc"}},
		{NodeHeader: {"2"}, ClusterHeader: {"zzzzzzzzzzzzzzzz"}},
	} {
		if _, _, ok := FromHeaders(h); ok {
			t.Errorf("%v read as an identity", h)
		}
	}
}

// TestClusterIDOf: the same members give the same id whatever the map's
// order; another address or another id gives another; a node alone is 0.
func TestClusterIDOf(t *testing.T) {
	a := ClusterIDOf(map[uint64]string{1: "127.0.0.1:7071", 2: "127.0.0.1:7072"})
	if a != ClusterIDOf(map[uint64]string{2: "127.0.0.1:7072", 1: "127.0.0.1:7071"}) {
		t.Error("order changed the id")
	}
	if a == ClusterIDOf(map[uint64]string{1: "127.0.0.1:7071", 2: "127.0.0.1:7073"}) ||
		a == ClusterIDOf(map[uint64]string{1: "127.0.0.1:7071", 3: "127.0.0.1:7072"}) {
		t.Error("other members, same id")
	}
	if ClusterIDOf(nil) != 0 {
		t.Error("a node alone has an id")
	}
}
