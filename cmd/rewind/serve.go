package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rewind-io/rewind/cmd/rewind/internal/gctune"
	"github.com/rewind-io/rewind/console"
	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginehook"
	"github.com/rewind-io/rewind/internal/memlimit"
	"github.com/rewind-io/rewind/sandbox"
)

func newServe() *cobra.Command {
	var (
		listen, data, level, format, origins string
		tailCache, storeCache                int64
		housekeeping, compaction             time.Duration
		minFree                              string
		filters                              sandbox.Limits
		filterMemMiB, inlineMiB              int
		filterIdleMiB                        int64
		nodeID                               uint64
		initialCluster, advertise, joinAddrs string
		peerVia, tierURL                     string
		tierCacheMiB                         int64
		replicationFactor                    uint32
		tick                                 time.Duration
		electionTicks                        int
		failureDetectTicks                   int
		followerReads                        bool
		replayShare                          float64
		heapTarget                           string
		sec                                  securityFlags
		authOn                               bool
		auditLog, joinToken                  string
		withConsole                          bool
		edge                                 edgeFlags // edgeflags.go
		configFile                           string    // config.go
	)
	var tel telemetryFlags // serve_telemetry.go
	var kf kafkaFlags      // serve_kafka.go
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Rewind node",
		Long: `Run a Rewind node. With no flags it runs alone, listens on 127.0.0.1:7070
(HTTP/1.1 and h2c: Connect, gRPC and gRPC-web) and keeps its data in
./rewind-data. SIGINT or SIGTERM shut it down gracefully.

A cluster: start every member with the same --initial-cluster and its own
--node-id, --listen and --data, for example

  rewind serve --node-id 1 --listen 127.0.0.1:7071 --data d1 \
    --initial-cluster 1=127.0.0.1:7071,2=127.0.0.1:7072,3=127.0.0.1:7073

One port serves clients and the raft traffic between members. Grow a running
cluster with a new id:

  rewind serve --node-id 4 --listen 127.0.0.1:7074 --data d4 --join 127.0.0.1:7071

and shrink it with "rewind cluster remove-node N".

Security (docs/security.md): --tls-cert/--tls-key serve TLS only,
--tls-client-ca requires client certificates, --peer-tls-* make members
speak mutual TLS, --cluster-secret-file authenticates members with a shared
secret. Without client authentication the node refuses a non-loopback
--listen, and a cluster on non-loopback addresses needs peer TLS or a
cluster secret, unless --insecure is given.

Every flag can also be set by the environment variable REWIND_<FLAG>
(REWIND_TAIL_CACHE_MIB=512; REWIND_SERVE_TLS_CERT and REWIND_SERVE_TLS_KEY
for the server's pair) and by the HCL file --config names, one attribute
per flag with '_' for '-' (tail_cache_mib = 512). The command line wins
over the environment, the environment over the file, the file over the
defaults (docs/operations.md, "Configuration"). In a container with a
memory limit, the Go memory limit and the caches not set otherwise follow
it.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseClientFlags(cmd); err != nil {
				return err
			}
			return applyConfig(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(level, format)
			if err != nil {
				return err
			}
			lim, err := memlimit.Default().Read()
			if err != nil {
				log.Warn("cannot read the container's memory limit: running as without one", "error", err)
			}
			userSet, userLimit := userGoMemLimit()
			planMemory(cmd.Flags(), lim, userSet, userLimit).apply(cmd.Flags(), log, debug.SetMemoryLimit)
			free := int64(-1) // "0": the guard is off
			switch minFree {
			case "auto":
				free = 0 // the engine's default (StorageConfig.MinFreeBytes)
			case "0":
			default:
				n, err := parseBytes(minFree)
				if err != nil {
					return fmt.Errorf("--min-free-disk: %w", err)
				}
				if n > 0 {
					free = int64(n)
				}
			}
			target, err := parseBytes(heapTarget)
			if err != nil {
				return fmt.Errorf("--gc-heap-target: %w", err)
			}
			// MiB flags become bytes or 64 KiB pages: refuse what would
			// wrap (--filter-memory-mib 268435456 was 0 pages, the default).
			if filterMemMiB < 0 || filterMemMiB > 4096 {
				return fmt.Errorf("--filter-memory-mib %d: must be 0 (the default) to 4096 (a 32-bit module's 4 GiB)", filterMemMiB)
			}
			for name, v := range map[string]int64{"--tail-cache-mib": tailCache, "--store-cache-mib": storeCache, "--filter-max-inline-mib": int64(inlineMiB), "--tier-cache-mib": tierCacheMiB} {
				if v < 0 || v > 1<<40 {
					return fmt.Errorf("%s %d: must be 0 to %d", name, v, int64(1)<<40)
				}
			}
			if failureDetectTicks != 0 && failureDetectTicks != -1 && (failureDetectTicks < 2 || failureDetectTicks >= electionTicks) {
				return fmt.Errorf("--failure-detect-ticks %d: must be 2 to --election-ticks less one (%d), or -1 (off)", failureDetectTicks, electionTicks-1)
			}
			if filterIdleMiB < 0 || filterIdleMiB > 1<<20 {
				return fmt.Errorf("--filter-idle-memory-mib %d: must be 0 (the default) to %d", filterIdleMiB, 1<<20)
			}
			filters.MaxIdleMemoryBytes = filterIdleMiB << 20
			if !(replayShare > 0 && replayShare <= 1) {
				return fmt.Errorf("--replay-share %g: must be above 0 and at most 1", replayShare)
			}
			members, err := parseInitialCluster(initialCluster)
			if err != nil {
				return fmt.Errorf("--initial-cluster: %w", err)
			}
			via, err := parsePeerVia(peerVia, members)
			if err != nil {
				return fmt.Errorf("--peer-via: %w", err)
			}
			var joins []string
			if joinAddrs != "" {
				if members != nil {
					return errors.New("--join and --initial-cluster exclude each other: bootstrap a cluster, or join a running one")
				}
				for _, a := range strings.Split(joinAddrs, ",") {
					joins = append(joins, strings.TrimSpace(a))
				}
				if advertise == "" {
					advertise = listen
				}
			}
			if members != nil {
				if _, ok := members[nodeID]; !ok {
					return fmt.Errorf("--node-id %d is not in --initial-cluster %s", nodeID, initialCluster)
				}
				if advertise != "" && members[nodeID] != advertise {
					return fmt.Errorf("--advertise %s differs from node %d's address %s in --initial-cluster", advertise, nodeID, members[nodeID])
				}
			}
			// Try the address before opening the store, so a bad or busy
			// --listen fails before anything is created on disk. It is
			// let go again: peers get refused, not held in a backlog,
			// until the node serves.
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			ln.Close()
			clusterAddrs := slices.Collect(maps.Values(members))
			clusterAddrs = append(clusterAddrs, joins...)
			if advertise != "" && (members != nil || joins != nil) {
				clusterAddrs = append(clusterAddrs, advertise)
			}
			if err := refuseExposed(exposure{listen: listen, clientCerts: sec.clientAuth(), tokens: authOn, tls: sec.cert != "",
				cluster: clusterAddrs, peerAuth: sec.peerAuth(), insecure: sec.insecure}); err != nil {
				return err
			}
			if err := kf.bind(authOn, sec.insecure); err != nil {
				return err
			}
			defer kf.close()
			httpCfg, err := edge.http(listen, advertise, clusterAddrs)
			if err != nil {
				return err
			}
			authFailures, err := edge.authFailures()
			if err != nil {
				return err
			}
			secret, err := sec.secret(log)
			if err != nil {
				return err
			}
			audit, closeAudit, err := openAuditLog(auditLog, authOn)
			if err != nil {
				return err
			}
			defer closeAudit()
			cfg := engine.Config{
				Dir: data, NodeID: nodeID, Logger: log,
				Storage: engine.StorageConfig{
					TailCacheBytes: tailCache << 20, StoreCacheBytes: storeCache << 20, MinFreeBytes: free,
					HousekeepingInterval: housekeeping, CompactionInterval: compaction,
				},
				Tier:    engine.TierConfig{URL: tierURL, Cache: engine.TierCacheConfig{MaxBytes: tierCacheBytes(tierCacheMiB)}},
				Sandbox: withFilterMemory(filters, filterMemMiB), MaxInlineModuleBytes: inlineMiB << 20,
				Replay: engine.ReplayConfig{Share: replayShare},
				Cluster: engine.ClusterConfig{
					InitialMembers: members, ID: engine.ClusterIDOf(members),
					DefaultReplicationFactor: replicationFactor, TickInterval: tick, ElectionTicks: electionTicks,
					FailureDetectTicks: failureDetectTicks,
					FollowerReads:      followerReads,
				},
				Join: engine.JoinConfig{Through: joins, Advertise: advertise, Token: orEnv(joinToken, "REWIND_TOKEN")},
				Security: engine.SecurityConfig{
					TLSCertFile: sec.cert, TLSKeyFile: sec.key, TLSClientCAFile: sec.clientCA,
					PeerTLSCertFile: sec.peerCert, PeerTLSKeyFile: sec.peerKey, PeerTLSCAFile: sec.peerCA,
					ClusterSecret: secret,
				},
				Auth: engine.AuthConfig{Enabled: authOn, AuditLog: audit, Failures: authFailures},
			}
			enginehook.Of(&cfg).PeerDialer = via.dialer()
			stopTelemetry, err := tel.start(cmd.Context(), log, &cfg, httpCfg)
			if err != nil {
				return err
			}
			defer stopTelemetry()
			node, err := openNode(cmd.Context(), log, cfg)
			if err != nil {
				return err
			}
			if os.Getenv("GOGC") == "" {
				// GOGC set by hand wins over the tuner.
				ctx, cancel := context.WithCancel(cmd.Context())
				done := make(chan struct{})
				go func() { defer close(done); gctune.Run(ctx, target, 250*time.Millisecond) }()
				defer func() { cancel(); <-done }()
			}
			api := withCORS(node.Handler(), origins)
			if withConsole {
				api = console.Mount(api)
				scheme := "http"
				if sec.cert != "" {
					scheme = "https"
				}
				log.Info("web console", "url", scheme+"://"+listen+console.Prefix)
			}
			sc := engine.ServeConfig{HTTP: httpCfg, Handler: api, Logger: log}
			tel.metricsServe(&sc) // --metrics-listen
			kf.serve(&sc)         // --kafka-listen
			return serve(cmd.Context(), node, listen, sc)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:7070", "address to listen on")
	f.StringVar(&data, "data", "./rewind-data", "data directory")
	f.StringVar(&level, "log-level", "info", "log level: trace, debug, info, warn, error")
	f.StringVar(&format, "log-format", "text", "log format: text or json")
	f.StringVar(&origins, "allow-origin", "", "comma-separated origins browsers may call from (CORS), or * for any; default none")
	f.Int64Var(&tailCache, "tail-cache-mib", 256, "memory for the tail cache that serves live subscribers, MiB")
	f.Int64Var(&storeCache, "store-cache-mib", 256, "memory for the storage block cache, MiB")
	f.DurationVar(&housekeeping, "retention-interval", time.Second, "how often retention limits are enforced")
	f.DurationVar(&compaction, "compaction-interval", 30*time.Second, "how often compacted topics with new records are compacted")
	f.StringVar(&minFree, "min-free-disk", "auto", "below this much free disk space refuse publishes (ResourceExhausted), hand leadership away and stop replicating new records; below 16 MiB (or a quarter of it) take no raft traffic; reads go on. auto: room for Pebble's own writes, 2 × WAL file (110% of the 64 MiB memtable) + one memtable = 204.8MiB; 0 disables")
	f.Int64Var(&filters.FuelPerCall, "filter-fuel", 0, "fuel per WebAssembly filter call (default 10000000, an endless loop stops after about 20 ms)")
	f.IntVar(&filterMemMiB, "filter-memory-mib", 0, "linear memory per filter instance, MiB (default 64)")
	f.IntVar(&filters.MaxConcurrentCalls, "filter-concurrency", 0, "WebAssembly filter calls at once (default GOMAXPROCS-1, at least 1); filtered replays are paced like every replay (--replay-share)")
	f.IntVar(&filters.MaxModuleBytes, "filter-max-module-bytes", 0, "largest module accepted by plugin upload (default 16 MiB)")
	f.IntVar(&inlineMiB, "filter-max-inline-mib", 0, "largest module sent inline with a replay, MiB (default 4)")
	f.Int64Var(&filterIdleMiB, "filter-idle-memory-mib", 0, "memory of idle WebAssembly filter instances kept for reuse, all modules together, MiB (default 256); past it the least recently used are closed")
	f.Uint64Var(&nodeID, "node-id", 1, "this node's id in the cluster (never reused)")
	f.StringVar(&initialCluster, "initial-cluster", "", "every first member as ID=HOST:PORT,... (the same on every member); empty: run alone")
	f.StringVar(&joinAddrs, "join", "", "join a running cluster through any of these members (HOST:PORT,...); the node's --node-id must be new")
	f.StringVar(&advertise, "advertise", "", "the address peers and clients dial for this node (default: its --initial-cluster entry)")
	f.Uint32Var(&replicationFactor, "default-replication-factor", 3, "replicas of a topic created without --replication-factor (capped at the member count)")
	f.DurationVar(&tick, "raft-tick", 100*time.Millisecond, "raft tick (heartbeat interval)")
	f.IntVar(&electionTicks, "election-ticks", 10, "raft election timeout, in ticks")
	f.IntVar(&failureDetectTicks, "failure-detect-ticks", 0, "a member that leads partitions here and sends nothing for this many ticks is taken for dead: this node's replicas forget it and elect another leader at once (default: election-ticks/2; above 1, below election-ticks; -1: off, wait out the election timeout)")
	f.BoolVar(&followerReads, "follower-reads", false, "serve streams from this node's replicas (fetch from follower) unless a request asks for the leader; default: every partition is read from its leader")
	f.StringVar(&heapTarget, "gc-heap-target", "512MiB", "let the heap grow to this before the garbage collector runs (fewer collections while replays allocate; never less often than Go's default of twice the live heap); 0: Go's default. Ignored when GOGC is set")
	f.StringVar(&peerVia, "peer-via", "", "dial these members through other addresses, as ID=HOST:PORT,... (the scenario runner's fault-injecting proxies; testing only)")
	_ = f.MarkHidden("peer-via")
	f.StringVar(&tierURL, "tier", "", "tiered storage: keep history older than each topic's local retention in this object store, file:///path or s3://bucket/prefix[?endpoint=URL&region=R&path_style=B&profile=P] (credentials, region and endpoint also as the aws CLI reads them: AWS_* variables, ~/.aws, web identity, the instance role); every member needs the same")
	f.Int64Var(&tierCacheMiB, "tier-cache-mib", 64, "with --tier: memory for recently read parts of tiered history (windows of batches and segment indexes), shared by every partition, MiB (0: keep none; concurrent reads of the same part are still shared)")
	sec.register(f)
	edge.register(f)
	tel.register(f)
	kf.register(f)
	f.BoolVar(&withConsole, "console", true, "serve the web console at /console/ (on the same origin as the API)")
	f.Float64Var(&replayShare, "replay-share", 0.1, "share of the processors that catch-up reads (replays of history) may use, above 0 and at most 1; live publishes and deliveries always come first")
	f.BoolVar(&authOn, "auth", false, "require a bearer token or client certificate on every call, and check its rights (ACLs); the first start writes a superuser token to DATA/bootstrap-token (docs/security.md)")
	f.StringVar(&auditLog, "audit-log", "", "with --auth: append the audit log (JSON lines: denials and admin operations) to this file; default: the server log")
	// Not os.Getenv as the default: help and usage print defaults.
	f.StringVar(&joinToken, "join-token", "", "with --join to a cluster with --auth: a token with the cluster admin right (default: env REWIND_TOKEN)")
	f.StringVar(&configFile, configFlag, "", "read settings from this HCL file, an attribute per flag with '_' for '-' (tail_cache_mib = 512); flags and REWIND_<FLAG> environment variables win over it (env REWIND_CONFIG)")
	_ = cmd.MarkFlagFilename(configFlag, "hcl")
	markCommaList(f, "allow-origin", "initial-cluster", "join", "peer-via", "allowed-hosts")
	cmd.SetUsageFunc(serveUsage)
	return cmd
}

// serveUsage is serve's usage: its own flags only. The client commands'
// global flags (--server, --token, ...) mean nothing to a server, and its
// --tls-cert and --tls-key are the server's pair.
func serveUsage(cmd *cobra.Command) error {
	fmt.Fprintf(cmd.OutOrStderr(), "Usage:\n  %s\n\nFlags:\n%s", cmd.UseLine(), cmd.LocalFlags().FlagUsages())
	return nil
}

// refuseClientFlags refuses the client commands' global flags (--server,
// --tls-ca, --token) given to serve, which would otherwise be accepted
// and ignored.
func refuseClientFlags(cmd *cobra.Command) error {
	var given []string
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			given = append(given, "--"+f.Name)
		}
	})
	if len(given) > 0 {
		return fmt.Errorf("%s: a flag of the client commands, not of rewind serve (rewind serve --help lists its flags)", strings.Join(given, ", "))
	}
	return nil
}

// parseInitialCluster parses ID=HOST:PORT,...; "" is nil (run alone).
func parseInitialCluster(s string) (map[uint64]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[uint64]string{}
	addrs := map[string]uint64{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not ID=HOST:PORT", part)
		}
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q: node ids are positive integers", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		if _, dup := out[n]; dup {
			return nil, fmt.Errorf("node id %d appears twice", n)
		}
		if other, dup := addrs[addr]; dup {
			return nil, fmt.Errorf("nodes %d and %d have the same address %s", other, n, addr)
		}
		out[n], addrs[addr] = addr, n
	}
	return out, nil
}

// peerVia maps a member's address to the address its peers dial instead.
type peerVia map[string]string

// parsePeerVia parses --peer-via: ID=HOST:PORT,... for members of the
// initial cluster.
func parsePeerVia(s string, members map[uint64]string) (peerVia, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if members == nil {
		return nil, errors.New("needs --initial-cluster")
	}
	m, err := parseInitialCluster(s)
	if err != nil {
		return nil, err
	}
	out := peerVia{}
	for id, addr := range m {
		real, ok := members[id]
		if !ok {
			return nil, fmt.Errorf("node %d is not in --initial-cluster", id)
		}
		out[real] = addr
	}
	return out, nil
}

// dialer dials the members through their --peer-via addresses (nil: the
// engine's default dialer).
func (v peerVia) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if v == nil {
		return nil
	}
	d := net.Dialer{Timeout: 3 * time.Second, KeepAlive: 15 * time.Second} // as the engine's
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := v[addr]; ok {
			addr = to
		}
		return d.DialContext(ctx, network, addr)
	}
}

// withFilterMemory sets the filter memory limit from MiB (64 KiB pages).
func withFilterMemory(l sandbox.Limits, mib int) sandbox.Limits {
	if mib > 0 {
		l.MaxMemoryPages = uint32(mib) * 16
	}
	return l
}

func newLogger(level, format string) (hclog.Logger, error) {
	lvl := hclog.LevelFromString(level)
	if lvl == hclog.NoLevel {
		return nil, fmt.Errorf("unknown log level %q", level)
	}
	if format != "text" && format != "json" {
		return nil, fmt.Errorf("unknown log format %q (text or json)", format)
	}
	return hclog.New(&hclog.LoggerOptions{
		Name: "rewind", Level: lvl, JSONFormat: format == "json", Output: os.Stderr,
	}), nil
}

// serve listens on listen and serves sc.Handler (the node's API, and maybe
// the console; and /metrics on sc.MetricsListener) under sc's limits until
// ctx ends (SIGINT, SIGTERM) or the
// store fails: engine.Node.Serve, which drains the node, shuts the HTTP
// server down and closes the store, in that order.
func serve(ctx context.Context, node *engine.Node, listen string, sc engine.ServeConfig) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		node.Close()
		return err
	}
	return node.Serve(ctx, ln, sc)
}

// withCORS lets browsers on the given origins call the API (Connect and
// gRPC-web over fetch).
func withCORS(h http.Handler, origins string) http.Handler {
	if origins == "" {
		return h
	}
	allowed := map[string]bool{}
	for _, o := range strings.Split(origins, ",") {
		allowed[strings.TrimSpace(o)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && (allowed["*"] || allowed[origin]) {
			hd := w.Header()
			hd.Set("Access-Control-Allow-Origin", origin)
			hd.Add("Vary", "Origin")
			hd.Set("Access-Control-Expose-Headers", "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Content-Encoding, Connect-Content-Encoding, Rewind-Leader, Rewind-Leader-Address, Rewind-Coordinator, Rewind-Not-Stored")
			if r.Method == http.MethodOptions {
				hd.Set("Access-Control-Allow-Methods", "GET, POST")
				hd.Set("Access-Control-Allow-Headers", "Content-Type, Connect-Protocol-Version, Connect-Timeout-Ms, Connect-Accept-Encoding, Connect-Content-Encoding, Grpc-Timeout, X-Grpc-Web, X-User-Agent, Authorization, Traceparent, Tracestate, Rewind-Record-Trace")
				hd.Set("Access-Control-Max-Age", "7200")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// tierCacheBytes turns --tier-cache-mib into engine.TierCacheConfig.MaxBytes:
// 0 keeps nothing, which the engine spells as negative (its 0 is the
// default).
func tierCacheBytes(mib int64) int64 {
	if mib == 0 {
		return -1
	}
	return mib << 20
}

// openNode opens the node, or gives up when ctx ends first (SIGINT,
// SIGTERM): opening replays the store's WAL, which on a sick disk may take
// long, and a signal must stop the process all the same. An Open given up
// on is left running; the process exits.
func openNode(ctx context.Context, log hclog.Logger, cfg engine.Config) (*engine.Node, error) {
	type result struct {
		n   *engine.Node
		err error
	}
	log.Info("opening the data directory", "dir", cfg.Dir)
	done := make(chan result, 1)
	go func() {
		n, err := engine.Open(cfg)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-ctx.Done():
		log.Error("interrupted while opening the data directory: exiting", "dir", cfg.Dir)
		return nil, fmt.Errorf("interrupted while opening the data directory %s", cfg.Dir)
	}
}
