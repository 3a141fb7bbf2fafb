package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeCluster: DescribeCluster describes the cluster as Metadata
// does (kadm's view): the same cluster id, this node as the controller
// and only broker; at every version, and with v1's endpoint types a
// broker refuses.
func TestDescribeCluster(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := n.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	md, err := kadm.NewClient(c).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster == "" || len(md.Brokers) != 1 {
		t.Fatalf("Metadata: cluster %q, brokers %+v", md.Cluster, md.Brokers)
	}
	b := md.Brokers[0]

	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	check := func(v int16, resp *kmsg.DescribeClusterResponse) {
		t.Helper()
		if resp.ErrorCode != 0 || resp.ClusterID != md.Cluster || resp.ControllerID != md.Controller || resp.ControllerID != b.NodeID {
			t.Fatalf("v%d: error %d, cluster %q controller %d; Metadata says cluster %q controller %d", v, resp.ErrorCode, resp.ClusterID, resp.ControllerID, md.Cluster, md.Controller)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != b.NodeID || resp.Brokers[0].Host != b.Host || resp.Brokers[0].Port != b.Port || resp.Brokers[0].IsFenced {
			t.Fatalf("v%d: brokers %+v, Metadata says %+v", v, resp.Brokers, b)
		}
	}
	check(resp.Version, resp)

	raw := dialRaw(t, n.Kafka)
	ask := func(v int16, endpoint int8) *kmsg.DescribeClusterResponse {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType = v, endpoint
		resp := kmsg.NewPtrDescribeClusterResponse()
		resp.Version = v
		if err := resp.ReadFrom(raw.roundTrip(frameRequest(req), true)); err != nil {
			t.Fatalf("DescribeCluster v%d: %v", v, err)
		}
		return resp
	}
	for v := int16(0); v <= 2; v++ {
		check(v, ask(v, 1))
	}
	for _, tc := range []struct {
		endpoint int8
		want     *kerr.Error
	}{{2, kerr.MismatchedEndpointType}, {0, kerr.UnsupportedEndpointType}, {9, kerr.UnsupportedEndpointType}} {
		if got := ask(2, tc.endpoint); got.ErrorCode != tc.want.Code || len(got.Brokers) != 0 {
			t.Errorf("endpoint type %d: error %d with %d brokers, want %s and none", tc.endpoint, got.ErrorCode, len(got.Brokers), tc.want.Message)
		}
	}
}
