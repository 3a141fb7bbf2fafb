// Package identity is how a Rewind node names itself to whoever asks: the
// id of its cluster, derived from the initial members, and the headers of
// the health probes that carry it with the node's id.
//
// The engine sets the headers (engine/internal/api, health.go); the
// scenario runner (scenarios/runner), which drives real processes and never
// imports the engine, checks them, so that a probe answered by another
// process that took a node's port is not taken for the node. An operator
// reads them to learn which node a load balancer reached.
//
// A node running alone (no initial cluster, no join) has cluster id 0:
// every lone node answers the same, so the headers tell lone nodes apart
// by node id only.
package identity

import (
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"strconv"
)

// The probe headers (/livez, /healthz, /readyz): the node's id in decimal
// and its cluster's id as 16 hex digits (FormatCluster, the form `rewind
// cluster` prints).
const (
	NodeHeader    = "Rewind-Node-Id"
	ClusterHeader = "Rewind-Cluster-Id"
)

// ClusterIDOf derives a cluster id from the initial members (id to
// host:port), so nodes started with the same --initial-cluster agree on it
// without another flag, and a node given another cluster's list is told
// so. No members (a node alone) is 0.
func ClusterIDOf(members map[uint64]string) uint64 {
	if len(members) == 0 {
		return 0
	}
	h := fnv.New64a()
	for _, id := range slices.Sorted(maps.Keys(members)) {
		fmt.Fprintf(h, "%d=%s,", id, members[id])
	}
	return h.Sum64()
}

// FormatCluster writes a cluster id as 16 hex digits.
func FormatCluster(id uint64) string { return fmt.Sprintf("%016x", id) }

// SetHeaders names node of cluster in h.
func SetHeaders(h http.Header, node, cluster uint64) {
	h.Set(NodeHeader, strconv.FormatUint(node, 10))
	h.Set(ClusterHeader, FormatCluster(cluster))
}

// FromHeaders reads what SetHeaders wrote; ok is false when either header
// is missing or malformed (an answer from something that is not a Rewind
// node).
func FromHeaders(h http.Header) (node, cluster uint64, ok bool) {
	node, err := strconv.ParseUint(h.Get(NodeHeader), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	c := h.Get(ClusterHeader)
	if len(c) != 16 {
		return 0, 0, false
	}
	cluster, err = strconv.ParseUint(c, 16, 64)
	if err != nil {
		return 0, 0, false
	}
	return node, cluster, true
}
