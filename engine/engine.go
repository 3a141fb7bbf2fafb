// Package engine is a Rewind node as a library: Open a data directory, serve
// Handler on an HTTP server that speaks HTTP/1.1 and h2c, Close on shutdown.
// cmd/rewind's `serve` is a thin wrapper around it; `demo` and the tests
// embed it directly.
//
// Inside, the node is a broker (engine/internal/broker) running one raft
// group per partition plus a metadata group on a multi-raft host
// (raftlog), over one Pebble store, with the Connect edge in
// engine/internal/api. docs/architecture.md walks through the whole path.
package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/rewind-io/rewind/engine/internal/sched"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/api"
	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/route"
	"github.com/rewind-io/rewind/internal/failpoint"
	"github.com/rewind-io/rewind/internal/identity"
	"github.com/rewind-io/rewind/internal/tlsconf"
	"github.com/rewind-io/rewind/raftlog/transport"
	"github.com/rewind-io/rewind/sandbox"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
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

	// InitialCluster makes the node a member of a cluster: every member's
	// id and the address peers and clients reach it at (this node's
	// included). The same map on every node; nil runs the node alone.
	InitialCluster map[uint64]string
	// ClusterID names the cluster (ClusterIDOf gives the one derived from
	// InitialCluster). A data directory or a raft message of another
	// cluster is refused.
	ClusterID uint64
	// DefaultReplicationFactor is used for topics created without one,
	// capped at the number of members. Default 3.
	DefaultReplicationFactor uint32
	// TickInterval is the raft tick (default 100 ms) and ElectionTicks the
	// election timeout in ticks (default 10): a leader that died is
	// replaced after 1-2 election timeouts.
	TickInterval  time.Duration
	ElectionTicks int
	// LeaderBalanceInterval is how often leaders hand partitions back to
	// their preferred replica. Default 5 s; negative: never.
	LeaderBalanceInterval time.Duration
	// NewLeaderWait bounds how long a node whose forward to a partition's
	// leader was cut short by an election waits for the winner, so that
	// its Unavailable answer names the new leader rather than the old one.
	// Default half an election timeout; tests set it long.
	NewLeaderWait time.Duration
	// Join adds the node to a running cluster through any of these members
	// (host:port), as Advertise (the address peers and clients dial).
	// Asking again after a restart is fine: a member that asks again with
	// the same address is let in.
	Join      []string
	Advertise string
	// FollowerReads serves streams from this node's replicas unless a
	// request asks for the leader (fetch from follower); by default each
	// partition is read from its leader.
	FollowerReads bool
	// ReplayShare is the share of the node's processors that catch-up
	// reads (replays of history, and fetches of history for streams on
	// other nodes) may use, in (0, 1]; default 0.1. Live publishes and
	// deliveries are never held back by it. See docs/design.md, "Live
	// first".
	ReplayShare float64
	// Tier is the URL of the tiered storage object store: file:///path or
	// s3://bucket/prefix?endpoint=URL&region=R (docs/design.md §12,
	// "Tiered storage"). Empty: no tiering; topics cannot set local
	// retention limits.
	Tier string
	// TierCacheBytes bounds the memory that keeps recently read parts of
	// tiered history (windows of batches, segment indexes), shared by the
	// node's partitions. Default 64 MiB; negative: nothing is kept.
	TierCacheBytes int64
	// PeerDialer opens the connections to the other members (raft
	// streams, forwarded publishes, reads through leaders, membership
	// calls). Default: TCP with a 3 s dial timeout. Tests inject network
	// faults with it.
	PeerDialer func(ctx context.Context, network, addr string) (net.Conn, error)

	// Transport security (docs/security.md); the zero values serve plain
	// HTTP/1.1 and h2c and let anyone who reaches the port speak as a
	// member.
	//
	// TLSCertFile and TLSKeyFile make the port speak TLS only (ALPN h2 and
	// http/1.1: Connect, gRPC and gRPC-web), with this certificate, loaded
	// again when the files change; serve with TLSConfig. TLSClientCAFile
	// also requires every client to present a certificate signed by one of
	// its CAs (tlsconf.PrincipalFromCert names its holder).
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// PeerTLSCertFile, PeerTLSKeyFile and PeerTLSCAFile (all or none; TLS
	// required) make members speak mutual TLS on the same port: a member
	// dials with the server name node-<id>, both sides present
	// certificates signed by the cluster CA, each with the DNS SAN
	// node-<its id>. A member whose port has TLS needs them.
	PeerTLSCertFile, PeerTLSKeyFile, PeerTLSCAFile string
	// ClusterSecret, if set (at least 16 bytes), authenticates every
	// request and raft stream between members with an HMAC of it
	// (internal/peerauth); the secret itself never travels.
	ClusterSecret []byte
	// Auth turns authentication and authorization on (auth.go,
	// docs/security.md): every public call needs a bearer token or a
	// verified client certificate, and the rights the ACLs give it.
	Auth bool
	// AuditLog receives the audit log's JSON lines; default: the logger.
	AuditLog io.Writer
	// JoinToken is the bearer token (cluster admin) a node joining a
	// cluster with auth on presents.
	JoinToken string
	// AuthRecheckInterval is how often open streams' tokens and rights are
	// checked again. Default 1 s.
	AuthRecheckInterval time.Duration

	// Slow and idle clients, bad-token floods (issue 24; the HTTP server's
	// own limits are HTTPConfig, httpserver.go).
	//
	// AuthFailures limits failed authentications by source, with Auth.
	AuthFailures AuthFailureConfig
}

// join asks the members in turn to add this node, for up to a minute.
func join(cfg Config, sec *security, log hclog.Logger) (clusterID uint64, members map[uint64]string, err error) {
	if cfg.Advertise == "" {
		return 0, nil, errors.New("engine: joining a cluster needs the address peers reach this node at (--advertise or --listen)")
	}
	hc := sec.client(cfg.PeerDialer, false)
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, addr := range cfg.Join {
			if sec.peer != nil {
				if e := sec.probeTLS(context.Background(), cfg.PeerDialer, addr); e != nil {
					var cve *tls.CertificateVerificationError
					if errors.As(e, &cve) || strings.Contains(e.Error(), "remote error: tls: ") {
						// One side refused the other's certificate.
						return 0, nil, fmt.Errorf("engine: join through %s: %w", addr, e)
					}
				}
			}
			c := rewindv1connect.NewClusterServiceClient(hc, sec.scheme()+"://"+addr, route.ClientOptions(bearerOption(cfg.JoinToken))...)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			resp, e := c.AddNode(ctx, &rewindv1.AddNodeRequest{Node: cfg.NodeID, Address: cfg.Advertise})
			cancel()
			if e == nil {
				members = map[uint64]string{}
				for _, n := range resp.GetNodes() {
					members[n.GetId()] = n.GetAddress()
				}
				log.Info("joined the cluster", "through", addr, "members", len(members))
				return resp.GetClusterId(), members, nil
			}
			switch connect.CodeOf(e) {
			case connect.CodeFailedPrecondition, connect.CodeAlreadyExists, connect.CodeInvalidArgument,
				connect.CodeUnauthenticated, connect.CodePermissionDenied: // asking again cannot help
				return 0, nil, fmt.Errorf("engine: join through %s: %w", addr, e)
			}
			var cve *tls.CertificateVerificationError
			if errors.As(e, &cve) || strings.Contains(e.Error(), "remote error: tls: ") {
				// One side refused the other's certificate.
				return 0, nil, fmt.Errorf("engine: join through %s: %w", addr, e)
			}
			err = e
			log.Warn("join: member not ready", "member", addr, "error", e)
		}
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("engine: could not join through %v: %w", cfg.Join, err)
		}
		time.Sleep(time.Second) // members down or electing: ask again
	}
}

// ClusterIDOf derives a cluster id from the initial members, so nodes
// started with the same --initial-cluster agree on it without another
// flag, and a node given another cluster's list is told so. No members (a
// node alone) is 0. The health probes name it (identity.ClusterHeader).
func ClusterIDOf(members map[uint64]string) uint64 { return identity.ClusterIDOf(members) }

// Node is a running Rewind node.
type Node struct {
	b   *broker.Broker
	api *api.Server
	// tr carries raft messages to the other members (nil alone).
	tr        *transport.Transport
	clusterID uint64
	sec       *security
	// auth runs the authorization bootstrap (auth.go); nil with auth off.
	auth *authRun
	// tierCache keeps tiered segment parts (nil without --tier); Close
	// stops its prefetches.
	tierCache *tier.Cache
}

// Open opens cfg.Dir and starts the node. It returns once every partition
// stored there is serving.
func Open(cfg Config) (*Node, error) {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if cfg.NodeID == 0 {
		cfg.NodeID = 1
	}
	if failpoint.Available {
		log.Warn("built with failpoints: for fault-injection tests only", "active", failpoint.Active())
	}
	bc := broker.Config{
		Dir: cfg.Dir, FS: cfg.FS, NodeID: cfg.NodeID, Logger: cfg.Logger,
		TailCacheBytes: cfg.TailCacheBytes, StoreCacheBytes: cfg.StoreCacheBytes, Clock: cfg.Clock,
		HousekeepingInterval: cfg.HousekeepingInterval, CompactionInterval: cfg.CompactionInterval,
		MinFreeBytes: cfg.MinFreeBytes, Sandbox: cfg.Filters, MaxInlineModuleBytes: cfg.MaxInlineModuleBytes,
		Peers: cfg.InitialCluster, ClusterID: cfg.ClusterID, DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		TickInterval: cfg.TickInterval, ElectionTicks: cfg.ElectionTicks, LeaderBalanceInterval: cfg.LeaderBalanceInterval,
		NewLeaderWait: cfg.NewLeaderWait,
		FollowerReads: cfg.FollowerReads, Replay: sched.Config{Share: cfg.ReplayShare},
	}
	if cfg.Tier != "" {
		st, err := tier.Open(cfg.Tier)
		if err != nil {
			return nil, err
		}
		bc.Tier = st
		bc.TierCache = tier.NewCache(tier.CacheConfig{MaxBytes: cfg.TierCacheBytes})
		log.Info("tiered storage", "store", st.String())
	}
	sec, err := newSecurity(cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.Join) > 0 {
		if len(cfg.InitialCluster) > 0 {
			return nil, errors.New("engine: a node either bootstraps a cluster (InitialCluster) or joins one (Join), not both")
		}
		id, members, err := join(cfg, sec, log)
		if err != nil {
			return nil, err
		}
		members[cfg.NodeID] = cfg.Advertise
		cfg.InitialCluster, cfg.ClusterID = members, id
		sec.cluster = id // before any peer client signs with it
		bc.Peers, bc.ClusterID, bc.Join = members, id, true
	}
	var peers *route.Peers
	if len(cfg.InitialCluster) > 0 {
		if _, ok := cfg.InitialCluster[cfg.NodeID]; !ok {
			return nil, fmt.Errorf("engine: node %d is not in the initial cluster %v", cfg.NodeID, slices.Sorted(maps.Keys(cfg.InitialCluster)))
		}
		// The broker builds the raft transport (it wires the transport's
		// callbacks to itself); the engine gives it what security decides.
		bc.Transport = transport.Config{Logger: log.Named("transport"), Dial: cfg.PeerDialer}
		bc.PeerScheme = sec.scheme()
		if sec.authenticates() {
			bc.Transport.Authorize = sec.authorize
			bc.Transport.HTTPClient = sec.client(cfg.PeerDialer, true)
		}
		peers = route.NewPeers(route.PeersConfig{
			Self: cfg.NodeID, ClusterID: cfg.ClusterID, Credentials: api.CarryCredentials,
			HTTP: sec.peerHTTP(cfg.PeerDialer), PartitionHTTP: sec.peerHTTP(cfg.PeerDialer),
		})
		bc.PeerClients = peers
	}
	b, err := broker.Open(bc)
	if err != nil {
		return nil, err
	}
	tr := b.Transport()
	acfg := api.Config{Logger: log.Named("api"), Peers: peers, Auth: apiAuth(cfg, log)}
	if tr != nil {
		acfg.PeerStats = func() map[uint64]api.PeerStat {
			out := map[uint64]api.PeerStat{}
			for _, p := range tr.Stats().Peers {
				out[p.Node] = api.PeerStat{Connected: p.Connected, Dropped: p.Dropped}
			}
			return out
		}
	}
	n := &Node{b: b, api: api.New(b, acfg), tr: tr, clusterID: cfg.ClusterID, sec: sec, tierCache: bc.TierCache}
	if cfg.Auth {
		n.startAuth(cfg, log)
	}
	return n, nil
}

// Handler serves the public API (Connect, gRPC and gRPC-web), gRPC health
// and reflection, the /healthz, /livez and /readyz probes, /metrics
// (Prometheus), and the raft transport between members; in a build with
// the failpoints tag also /debug/failpoints (internal/failpoint).
//
// Clients never speak for a member: the public paths refuse the member
// assertion headers (api/member.go), and a cluster serves its members'
// calls to each other on paths of their own, behind the member guard
// (security.go).
func (n *Node) Handler() http.Handler {
	h := n.api.Handler()
	public := api.RefuseMemberHeaders(h)
	if failpoint.Available {
		mux := http.NewServeMux()
		mux.Handle(failpoint.Path, failpoint.Handler())
		mux.Handle(failpoint.Path+"/", failpoint.Handler())
		mux.Handle("/", public)
		public = mux
	}
	if n.tr == nil {
		return public
	}
	mux := http.NewServeMux()
	path, th := n.tr.Handler()
	mux.Handle(path, th)
	readsPath, rh := n.api.PeerReads(n.clusterID).Handler()
	mux.Handle(readsPath, rh)
	mux.Handle(api.MemberPrefix+"/", api.MemberHandler(h))
	mux.Handle("/", public)
	return n.sec.guard(mux, members{current: n.b.IsCurrentMember, raft: n.b.IsMember, raftPath: path}, path, readsPath, api.MemberPrefix+"/")
}

// TLSConfig is the TLS configuration to serve Handler with, or nil when
// the node serves plain HTTP/1.1 and h2c (Config.TLSCertFile unset).
// Listener applies it.
func (n *Node) TLSConfig() *tls.Config { return n.sec.server }

// Listener returns ln as the node serves on it: ln itself without TLS,
// else a TLS listener with TLSConfig (which tells a plaintext HTTP/2
// client to use https).
func (n *Node) Listener(ln net.Listener) net.Listener {
	if n.sec.server == nil {
		return ln
	}
	return tlsconf.NewListener(ln, n.sec.server)
}

// Drain starts shutting down: a cluster member first hands the leadership
// of its partitions to caught-up replicas (up to 2 s) and closes its raft
// streams; then new requests are refused and streams end with Unavailable.
// Call it before shutting the HTTP server down, then Close.
func (n *Node) Drain() {
	if n.tr != nil {
		// Hand leadership to the other members first (about one round
		// trip each; not when the store failed: nothing leads here any
		// more), then stop the raft streams, which would otherwise hold
		// the HTTP server's shutdown open.
		if n.b.Err() == nil {
			n.b.HandOff(2 * time.Second)
		}
		n.tr.Close()
	}
	n.b.Drain()
}

// Failed is closed when the node's store failed (a WAL write or fsync:
// disk full, gone or read-only); Err says why. Pebble treats such an error
// as fatal and so does Rewind: the node's raft groups have stopped, its
// health checks answer NOT_SERVING, and the owner should Close it and exit
// so that a supervisor restarts the process once the disk is healthy
// (`rewind serve` does; docs/design.md, "Failure behaviour"). Nothing is
// lost: every acknowledged record is on the replicas and, after a restart,
// on this node's disk.
func (n *Node) Failed() <-chan struct{} { return n.b.Failed() }

// Err returns the storage error that stopped the node, or nil.
func (n *Node) Err() error { return n.b.Err() }

// Close drains the node, waits for streams to end, and closes the store.
func (n *Node) Close() error {
	n.stopAuth()
	err := n.b.Close()
	if n.tierCache != nil {
		n.tierCache.Close()
	}
	if n.tr != nil {
		n.tr.Close()
	}
	n.sec.close()
	return err
}
