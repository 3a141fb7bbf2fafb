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
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/api"
	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/route"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/internal/failpoint"
	"github.com/rewind-io/rewind/internal/identity"
	"github.com/rewind-io/rewind/internal/tlsconf"
	"github.com/rewind-io/rewind/raftlog/transport"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// join asks the members in turn to add this node, for up to a minute.
func join(cfg Config, sec *security, log hclog.Logger) (clusterID uint64, members map[uint64]string, err error) {
	if cfg.Join.Advertise == "" {
		return 0, nil, errors.New("engine: joining a cluster needs the address peers reach this node at (--advertise or --listen)")
	}
	hc := sec.client(cfg.hooks.PeerDialer, false)
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, addr := range cfg.Join.Through {
			if sec.peer != nil {
				if e := sec.probeTLS(context.Background(), cfg.hooks.PeerDialer, addr); e != nil {
					var cve *tls.CertificateVerificationError
					if errors.As(e, &cve) || strings.Contains(e.Error(), "remote error: tls: ") {
						// One side refused the other's certificate.
						return 0, nil, fmt.Errorf("engine: join through %s: %w", addr, e)
					}
				}
			}
			c := rewindv1connect.NewClusterServiceClient(hc, sec.scheme()+"://"+addr, route.ClientOptions(bearerOption(cfg.Join.Token))...)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			resp, e := c.AddNode(ctx, &rewindv1.AddNodeRequest{Node: cfg.NodeID, Address: cfg.Join.Advertise})
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
			return 0, nil, fmt.Errorf("engine: could not join through %v: %w", cfg.Join.Through, err)
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
		Dir: cfg.Dir, NodeID: cfg.NodeID, Logger: cfg.Logger,
		Storage: cfg.Storage, Cluster: cfg.Cluster, Sandbox: cfg.Sandbox, MaxInlineModuleBytes: cfg.MaxInlineModuleBytes, Replay: cfg.Replay,
		FS: cfg.hooks.FS, Clock: cfg.hooks.Clock, NewLeaderWait: cfg.hooks.NewLeaderWait,
	}
	var tierStore tier.Store
	if cfg.Tier.URL != "" {
		st, err := tier.Open(cfg.Tier.URL)
		if err != nil {
			return nil, err
		}
		tierStore = st
		bc.TierCache = tier.NewCache(cfg.Tier.Cache)
		log.Info("tiered storage", "store", st.String())
	}
	sec, err := newSecurity(cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.Join.Through) > 0 {
		if len(cfg.Cluster.InitialMembers) > 0 {
			return nil, errors.New("engine: a node either bootstraps a cluster (Cluster.InitialMembers) or joins one (Join), not both")
		}
		id, members, err := join(cfg, sec, log)
		if err != nil {
			return nil, err
		}
		members[cfg.NodeID] = cfg.Join.Advertise
		cfg.Cluster.InitialMembers, cfg.Cluster.ID = members, id
		sec.cluster = id // before any peer client signs with it
		bc.Cluster, bc.Joined = cfg.Cluster, true
	}
	if tierStore != nil { // once the cluster's id is known (a joining node learns it above)
		if bc.Tier, err = claimTier(tierStore, cfg, log); err != nil {
			return nil, err
		}
	}
	var peers *route.Peers
	if len(cfg.Cluster.InitialMembers) > 0 {
		if _, ok := cfg.Cluster.InitialMembers[cfg.NodeID]; !ok {
			return nil, fmt.Errorf("engine: node %d is not in the initial cluster %v", cfg.NodeID, slices.Sorted(maps.Keys(cfg.Cluster.InitialMembers)))
		}
		// The broker builds the raft transport (it wires the transport's
		// callbacks to itself); the engine gives it what security decides.
		bc.Transport = transport.Config{Logger: log.Named("transport"), Dial: cfg.hooks.PeerDialer}
		bc.PeerScheme = sec.scheme()
		if sec.authenticates() {
			bc.Transport.Authorize = sec.authorize
			bc.Transport.HTTPClient = sec.client(cfg.hooks.PeerDialer, true)
		}
		peers = route.NewPeers(route.PeersConfig{
			Self: cfg.NodeID, ClusterID: cfg.Cluster.ID, Credentials: api.CarryCredentials,
			HTTP: sec.peerHTTP(cfg.hooks.PeerDialer), PartitionHTTP: sec.peerHTTP(cfg.hooks.PeerDialer),
		})
		bc.PeerClients = peers
	}
	b, err := broker.Open(bc)
	if err != nil {
		return nil, err
	}
	tr := b.Transport()
	acfg := api.Config{Logger: log.Named("api"), Peers: peers, Auth: apiAuth(cfg, log), Telemetry: cfg.Telemetry}
	if tr != nil {
		acfg.PeerStats = func() map[uint64]api.PeerStat {
			out := map[uint64]api.PeerStat{}
			for _, p := range tr.Stats().Peers {
				out[p.Node] = api.PeerStat{Connected: p.Connected, Dropped: p.Dropped}
			}
			return out
		}
	}
	n := &Node{b: b, api: api.New(b, acfg), tr: tr, clusterID: cfg.Cluster.ID, sec: sec, tierCache: bc.TierCache}
	if cfg.Auth.Enabled {
		n.startAuth(cfg, log)
	}
	return n, nil
}

// claimTier checks that the tier belongs to this cluster (tier.ClaimedStore),
// and refuses to start when its marker names another. A store that cannot
// be asked now is no reason to stay down: its uploads and deletions wait
// until the marker is checked.
func claimTier(st tier.Store, cfg Config, log hclog.Logger) (tier.Store, error) {
	id := cfg.Cluster.ID
	if id == 0 {
		id = ClusterIDOf(cfg.Cluster.InitialMembers)
	}
	owner := "cluster " + identity.FormatCluster(id)
	if id == 0 { // alone: every lone node's cluster id is 0
		var err error
		if owner, err = tier.LocalOwner(cfg.Dir); err != nil {
			return nil, err
		}
	}
	cs := tier.NewClaimedStore(st, owner)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var other *tier.OtherClusterError
	if err := cs.Claim(ctx); errors.As(err, &other) {
		return nil, err
	} else if err != nil {
		log.Warn("tiered storage: the store's cluster marker is not checked yet; uploads and deletions wait for it", "error", err)
	}
	return cs, nil
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
// the node serves plain HTTP/1.1 and h2c (Config.Security.TLSCertFile unset).
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
// disk gone or read-only; a full disk only when the node closes while a
// write waits for space, docs/operations.md "Disk full"); Err says why. Pebble treats such an error
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
