package engine_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
)

// waitProbe polls url until it answers code, for up to a minute (an
// election on a busy machine), and returns the last body.
func waitProbe(t *testing.T, url string, code int) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, body := probe(t, url)
		if got == code {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %q, want %d", url, got, body, code)
		}
		time.Sleep(20 * time.Millisecond) // poll: an election or a hand-off
	}
}

// probeNames asks url and returns the node id and the cluster id its
// answer's headers name, whatever its status.
func probeNames(t *testing.T, url string) (node, cluster string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("Rewind-Node-Id"), resp.Header.Get("Rewind-Cluster-Id")
}

// checkProbesName checks that every probe of the node at base names node
// id of cluster (as 16 hex digits, the form `rewind cluster` prints).
func checkProbesName(t *testing.T, base string, id, cluster uint64) {
	t.Helper()
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		node, c := probeNames(t, base+p)
		if want := fmt.Sprintf("%016x", cluster); node != fmt.Sprint(id) || c != want {
			t.Errorf("%s%s names node %q of cluster %q, want %d of %s", base, p, node, c, id, want)
		}
	}
}

// TestProbesNameALoneNode: a node running alone (no cluster) answers its
// probes as node 1 of cluster 0.
func TestProbesNameALoneNode(t *testing.T) {
	url := enginetest.StartNode(t, engine.Config{Dir: t.TempDir(), Logger: hclog.NewNullLogger(), Storage: engine.StorageConfig{StoreCacheBytes: 8 << 20, TailCacheBytes: 8 << 20}}).URL
	waitProbe(t, url+"/readyz", http.StatusOK)
	checkProbesName(t, url, 1, 0)
}

// TestReadyNeedsAMetadataLeader runs the three probes through a cluster's
// life on real nodes over loopback: a member started alone of three is
// healthy and live but not ready (no majority elects a metadata leader);
// once a second member starts, both become ready; a member drained through
// Node.Drain (what `rewind serve` does on SIGTERM) is healthy but not
// ready, while the others stay ready. Every probe answer names the
// member that gave it and its cluster.
func TestReadyNeedsAMetadataLeader(t *testing.T) {
	const n = 3
	c := enginetest.PrepareCluster(t, n, nil)
	members := c.Members
	start := func(i int) string { return c.Start(uint64(i + 1)).URL }

	// Every probe names the member that answered, ready or not.
	cluster := engine.ClusterIDOf(members)
	u1 := start(0)
	checkProbesName(t, u1, 1, cluster)
	for _, p := range []string{"/healthz", "/livez"} {
		if code, body := probe(t, u1+p); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("%s of a lone member: %d %q", p, code, body)
		}
	}
	// Alone, it cannot win an election: however long it waits (here many
	// election timeouts), it is not ready.
	time.Sleep(10 * 10 * 20 * time.Millisecond)
	if code, body := probe(t, u1+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no leader of the metadata group") {
		t.Fatalf("/readyz of a lone member of three: %d %q, want 503 naming the missing metadata leader", code, body)
	}

	u2 := start(1)
	checkProbesName(t, u2, 2, cluster)
	waitProbe(t, u1+"/readyz", http.StatusOK)
	waitProbe(t, u2+"/readyz", http.StatusOK)
	u3 := start(2)
	waitProbe(t, u3+"/readyz", http.StatusOK)
	checkProbesName(t, u3, 3, cluster)

	c.Node(3).Drain()
	if code, body := probe(t, u3+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("/readyz of a draining member: %d %q, want 503", code, body)
	}
	for _, p := range []string{"/healthz", "/livez"} {
		if code, _ := probe(t, u3+p); code != http.StatusOK {
			t.Fatalf("%s of a draining member: %d, want 200", p, code)
		}
	}
	// The two others keep (or, if node 3 led the metadata group, regain
	// after its hand-off) a leader.
	waitProbe(t, u1+"/readyz", http.StatusOK)
	waitProbe(t, u2+"/readyz", http.StatusOK)
}
