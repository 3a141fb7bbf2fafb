package httpedge

import (
	"net"
	"net/netip"
	"testing"

	_ "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	_ "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// TestClientStreams: only the raft stream is exempt from the body limits;
// Subscribe (a server stream) and unary calls are not.
func TestClientStreams(t *testing.T) {
	for path, want := range map[string]bool{
		"/rewind.peer.v1.RaftService/Send":        true,
		"/rewind.v1.SubscribeService/Subscribe":   false,
		"/rewind.v1.PublishService/Publish":       false,
		"/rewind.peer.v1.PartitionService/Fetch":  false,
		"/rewind.v1.NoSuchService/Send":           false,
		"/console/":                               false,
		"/rewind.peer.v1.RaftService/NoSuchThing": false,
	} {
		if got := clientStreams(path); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

// TestSource: IPv4 addresses count one by one, IPv6 by /64, mapped IPv4 as
// IPv4.
func TestSource(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.1:5":              "192.0.2.1/32",
		"[2001:db8:1:2:3::4]:5":    "2001:db8:1:2::/64",
		"[::ffff:192.0.2.1]:5":     "192.0.2.1/32",
		"[2001:db8:1:2:ffff::]:80": "2001:db8:1:2::/64",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := Source(a); got != netip.MustParsePrefix(want) {
			t.Errorf("%s: %v, want %s", addr, got, want)
		}
	}
}
