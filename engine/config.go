package engine

import (
	"io"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/sched"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/internal/enginehook"
	"github.com/rewind-io/rewind/sandbox"
)

// Config configures a node. The zero value of every field but Dir selects
// its default.
//
// Settings are grouped by the part of the node that consumes them, as
// sub-structs that part owns and the engine passes on unchanged: each
// field's default is documented once, on the sub-struct's own field
// (StorageConfig, ClusterConfig, ReplayConfig and AuthFailureConfig name
// types of the engine's internal packages; sandbox.Limits is the
// sandbox's).
type Config struct {
	// Dir is the data directory; created if missing. Required.
	Dir string
	// NodeID is this node's id. Default 1.
	NodeID uint64
	// Logger is the root logger; default: none.
	Logger hclog.Logger

	// Storage sizes the node's caches and paces the housekeeping of its
	// store (retention, compaction, the free disk space check).
	Storage StorageConfig
	// Tier keeps history older than each topic's local retention in an
	// object store (docs/design.md §12, "Tiered storage").
	Tier TierConfig
	// Sandbox bounds WebAssembly filter and transform modules (memory,
	// fuel per call, module size, concurrent guest calls, ...); zero fields
	// take their defaults (sandbox.Limits, docs/design.md).
	Sandbox sandbox.Limits
	// MaxInlineModuleBytes bounds a module sent with a subscribe request
	// instead of being uploaded. Default 4 MiB.
	MaxInlineModuleBytes int
	// Replay paces catch-up reads (replays of history, and fetches of
	// history for streams on other nodes): Replay.Share is the share of
	// the node's processors they may use. Live publishes and deliveries
	// are never held back by it. See docs/design.md, "Live first".
	Replay ReplayConfig

	// Cluster makes the node a member of a new cluster (its zero value
	// runs the node alone).
	Cluster ClusterConfig
	// Join adds the node to a running cluster instead (not both).
	Join JoinConfig

	// Security protects the port and the traffic between members
	// (docs/security.md); its zero value serves plain HTTP/1.1 and h2c and
	// lets anyone who reaches the port speak as a member.
	Security SecurityConfig
	// Auth turns authentication and authorization on (auth.go,
	// docs/security.md).
	Auth AuthConfig
	// Telemetry turns OpenTelemetry tracing on (telemetry.go); its zero
	// value leaves it off.
	Telemetry TelemetryConfig

	// hooks are the test hooks (filesystem, clock, peer dialer, new
	// leader wait), set through internal/enginehook only.
	hooks enginehook.Hooks
}

func init() {
	enginehook.Register(func(cfg any) *enginehook.Hooks { return &cfg.(*Config).hooks })
}

// StorageConfig sizes a node's caches and paces the housekeeping of its
// store (Config.Storage); its fields and their defaults are documented on
// the type it names.
type StorageConfig = broker.StorageConfig

// ClusterConfig makes a node a member of a cluster (Config.Cluster); its
// fields and their defaults are documented on the type it names.
type ClusterConfig = broker.ClusterConfig

// ReplayConfig paces catch-up reads against live work (Config.Replay);
// its fields and their defaults are documented on the type it names.
type ReplayConfig = sched.Config

// TierCacheConfig bounds the memory that keeps recently read parts of
// tiered history (TierConfig.Cache); its fields and their defaults are
// documented on the type it names.
type TierCacheConfig = tier.CacheConfig

// TierConfig configures tiered storage.
type TierConfig struct {
	// URL is the object store: file:///path or
	// s3://bucket/prefix?endpoint=URL&region=R&path_style=B&profile=P
	// (credentials from the AWS default chain; tier.NewS3Store). Open
	// claims it for the cluster (tier.ClaimedStore) and refuses to start
	// when another cluster has. Empty: no tiering; topics cannot set local
	// retention limits.
	URL string
	// Cache keeps recently read parts of tiered history (windows of
	// batches, segment indexes), shared by the node's partitions.
	Cache TierCacheConfig
}

// JoinConfig adds a node to a running cluster.
type JoinConfig struct {
	// Through are members (host:port) any of which may add the node. Asking
	// again after a restart is fine: a member that asks again with the same
	// address is let in. Empty: the node does not join.
	Through []string
	// Advertise is the address peers and clients dial for this node.
	// Required to join.
	Advertise string
	// Token is the bearer token (cluster admin) the node presents to join
	// a cluster with auth on.
	Token string
}

// SecurityConfig protects a node's port and the traffic between members
// (docs/security.md).
type SecurityConfig struct {
	// TLSCertFile and TLSKeyFile make the port speak TLS only (ALPN h2 and
	// http/1.1: Connect, gRPC and gRPC-web), with this certificate, loaded
	// again when the files change; serve with Node.TLSConfig.
	// TLSClientCAFile also requires every client to present a certificate
	// signed by one of its CAs (tlsconf.PrincipalFromCert names its
	// holder).
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
}

// AuthConfig turns authentication and authorization on.
type AuthConfig struct {
	// Enabled: every public call needs a bearer token or a verified client
	// certificate, and the rights the ACLs give it.
	Enabled bool
	// AuditLog receives the audit log's JSON lines; default: the logger.
	AuditLog io.Writer
	// RecheckInterval is how often open streams' tokens and rights are
	// checked again. Default 1 s.
	RecheckInterval time.Duration
	// Failures limits failed authentications by source (issue 24; the
	// HTTP server's own limits are HTTPConfig, httpserver.go).
	Failures AuthFailureConfig
}
