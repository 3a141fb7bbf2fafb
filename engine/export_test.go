package engine

import "github.com/rewind-io/rewind/engine/internal/broker"

// BrokerOf returns the broker a node runs, for tests that check what the
// API does not show (a partition's tier manifest) or run housekeeping
// steps with their own thresholds.
func BrokerOf(n *Node) *broker.Broker { return n.b }
