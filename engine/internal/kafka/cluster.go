package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Endpoint types of DescribeCluster v1+ (KIP-919).
const (
	endpointBrokers     = 1
	endpointControllers = 2
)

// describeCluster answers DescribeCluster as Metadata describes the
// cluster (metadata.go): this node is its only broker and its
// controller, under the Rewind cluster's id. Asking a broker for the
// controllers is MISMATCHED_ENDPOINT_TYPE, as Kafka answers; an endpoint
// type Kafka does not define, UNSUPPORTED_ENDPOINT_TYPE. Authorized
// operations are never filled in (the port has no authorization): the
// field keeps its "not provided" value, −2³¹.
func (s *Server) describeCluster(req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.EndpointType = endpointBrokers
	switch {
	case req.Version >= 1 && req.EndpointType == endpointControllers:
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("a Rewind node is a broker: it has no controller endpoints")
		return resp
	case req.Version >= 1 && req.EndpointType != endpointBrokers:
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("endpoint type 1 (brokers) is the only one served")
		return resp
	}
	resp.ClusterID = clusterID(s.b)
	resp.ControllerID = s.node
	br := kmsg.NewDescribeClusterResponseBroker()
	br.NodeID, br.Host, br.Port = s.node, s.host, s.port
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{br}
	return resp
}
