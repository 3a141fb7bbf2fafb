package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// TestClusterStatusSaysAnIsolatedNodeIsNotReady: a member cut off from
// both others still answers, but its cluster status says it is not ready,
// with the reason its own /readyz gives (what `rewind cluster status`
// shows), and it says ready again once the links are back.
func TestClusterStatusSaysAnIsolatedNodeIsNotReady(t *testing.T) {
	c := startFaultCluster(t)
	leader := c.settle(t)
	isolated, _ := others(leader)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	status := rewindv1connect.NewClusterServiceClient(http.DefaultClient, "http://"+c.addrs[isolated], connect.WithGRPC())
	ready := func() (*rewindv1.GetClusterStatusResponse, string) {
		st, err := status.GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
		if err != nil {
			t.Fatalf("node %d's cluster status: %v", isolated, err)
		}
		resp, err := http.Get("http://" + c.addrs[isolated] + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return st, resp.Status
	}
	if st, probe := ready(); !st.GetReady() || st.GetNotReady() != "" {
		t.Fatalf("connected node %d: ready %v (%q), /readyz %s; want ready", isolated, st.GetReady(), st.GetNotReady(), probe)
	}
	for n := uint64(1); n <= 3; n++ {
		if n != isolated {
			c.net.setCut(isolated, n, true)
		}
	}
	eventually(t, fmt.Sprintf("isolated node %d says it is not ready", isolated), func() error {
		st, probe := ready()
		if st.GetReady() || st.GetNotReady() == "" || probe != "503 Service Unavailable" {
			return fmt.Errorf("ready %v (%q), /readyz %s", st.GetReady(), st.GetNotReady(), probe)
		}
		return nil
	})
	for n := uint64(1); n <= 3; n++ {
		c.net.setCut(isolated, n, false)
	}
	eventually(t, fmt.Sprintf("node %d is ready again", isolated), func() error {
		if st, probe := ready(); !st.GetReady() || probe != "200 OK" {
			return fmt.Errorf("ready %v (%q), /readyz %s", st.GetReady(), st.GetNotReady(), probe)
		}
		return nil
	})
}
