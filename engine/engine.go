// Package engine is a Rewind node as a library: Open a data directory, serve
// Handler on an HTTP server that speaks HTTP/1.1 and h2c, Close on shutdown.
// cmd/rewind's `serve` is a thin wrapper around it; `demo` and the tests
// embed it directly.
//
// Inside, the node is a broker (engine/internal/broker) running one raft
// group per partition plus a metadata group on a multi-raft host
// (raftlog), over one Pebble store, with the Connect edge in
// engine/internal/api. docs/design.md walks through the whole path.
package engine

import (
	"net/http"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/api"
	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/sandbox"
)

// Config configures a node. The zero value of every field but Dir selects
// its default.
type Config struct {
	// Dir is the data directory; created if missing. Required.
	Dir string
	// NodeID is this node's id. Default 1.
	NodeID uint64
	// Logger is the root logger; default: none.
	Logger hclog.Logger
	// TailCacheBytes bounds the in-memory cache of recent batches that live
	// subscribers read from. Default 256 MiB.
	TailCacheBytes int64
	// StoreCacheBytes sizes Pebble's block cache. Default 256 MiB.
	StoreCacheBytes int64
	// FS replaces the operating system's filesystem (tests: in-memory or
	// crash-simulating). Default: the OS.
	FS vfs.FS
	// Clock replaces the broker clock (tests). Default time.Now.
	Clock func() time.Time
	// HousekeepingInterval is how often retention limits are checked
	// (default 1 s); CompactionInterval how often a compacted partition
	// with new records is compacted (default 30 s).
	HousekeepingInterval, CompactionInterval time.Duration
	// MinFreeBytes: publishes fail with ResourceExhausted below this much
	// free disk space (default 64 MiB; negative: no check).
	MinFreeBytes int64
	// Filters bounds WebAssembly filter and transform modules (memory,
	// fuel per call, module size, concurrent guest calls, ...); zero fields
	// take their defaults (sandbox.Limits, docs/design.md).
	Filters sandbox.Limits
	// MaxInlineModuleBytes bounds a module sent with a subscribe request
	// instead of being uploaded. Default 4 MiB.
	MaxInlineModuleBytes int
}

// Node is a running Rewind node.
type Node struct {
	b   *broker.Broker
	api *api.Server
}

// Open opens cfg.Dir and starts the node. It returns once every partition
// stored there is serving.
func Open(cfg Config) (*Node, error) {
	b, err := broker.Open(broker.Config{
		Dir: cfg.Dir, FS: cfg.FS, NodeID: cfg.NodeID, Logger: cfg.Logger,
		TailCacheBytes: cfg.TailCacheBytes, StoreCacheBytes: cfg.StoreCacheBytes, Clock: cfg.Clock,
		HousekeepingInterval: cfg.HousekeepingInterval, CompactionInterval: cfg.CompactionInterval,
		MinFreeBytes: cfg.MinFreeBytes, Sandbox: cfg.Filters, MaxInlineModuleBytes: cfg.MaxInlineModuleBytes,
	})
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Node{b: b, api: api.New(b, log.Named("api"))}, nil
}

// Handler serves the public API (Connect, gRPC and gRPC-web), gRPC health
// and reflection.
func (n *Node) Handler() http.Handler { return n.api.Handler() }

// NewHTTPServer returns the HTTP server configuration Rewind serves with:
// HTTP/1.1 and unencrypted HTTP/2 (h2c) on one port, so Connect, gRPC and
// gRPC-web clients all connect, with flow-control windows large enough for
// a replay stream at loopback speed (the defaults throttle it), liveness
// pings, and a bound on header reads.
func NewHTTPServer(h http.Handler) *http.Server {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           h,
		Protocols:         p,
		ReadHeaderTimeout: 10 * time.Second,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          1000,
			MaxReceiveBufferPerConnection: 64 << 20,
			MaxReceiveBufferPerStream:     16 << 20,
			// A connection silent for 15 s is pinged and closed if the ping
			// goes unanswered for 15 s more: a subscriber group member that
			// vanished without closing its stream loses its partitions
			// within about 30 s (its session timeout).
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
}

// Drain starts shutting down without waiting: new requests are refused and
// streams end with Unavailable. Call it before shutting the HTTP server
// down, then Close.
func (n *Node) Drain() { n.b.Drain() }

// Close drains the node, waits for streams to end, and closes the store.
func (n *Node) Close() error { return n.b.Close() }
