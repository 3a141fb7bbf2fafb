package broker

import (
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/route"
	"github.com/rewind-io/rewind/engine/internal/sched"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/internal/failpoint"
	"github.com/rewind-io/rewind/raftlog/transport"
	"github.com/rewind-io/rewind/sandbox"
)

// Config configures a broker. The zero value of every field but Dir selects
// its default.
//
// The settings a user chooses come in sub-structs that package engine
// passes through as they are (engine.Config has the same fields under the
// same names): Storage, Cluster, Sandbox, Replay. The rest is wiring the
// engine builds (the transport, the peers' clients, the tier store) and
// knobs only tests turn.
type Config struct {
	// Dir is the data directory. Required.
	Dir string
	// NodeID is this node's id. Default 1.
	NodeID uint64
	// Logger is the root logger. Default: none.
	Logger hclog.Logger
	// Storage sizes the node's caches and paces its housekeeping.
	Storage StorageConfig
	// Cluster makes the node a member of a cluster.
	Cluster ClusterConfig
	// Sandbox bounds WebAssembly filter and transform modules (memory,
	// fuel per call, module size, concurrent guest calls, ...); zero
	// fields take the sandbox's defaults (sandbox.Limits, docs/design.md).
	Sandbox sandbox.Limits
	// MaxInlineModuleBytes bounds a module sent with a subscribe request
	// instead of being uploaded. Default 4 MiB.
	MaxInlineModuleBytes int
	// Replay paces catch-up reads (replays of history, and fetches of
	// history for streams on other nodes) so that live publishes and
	// deliveries keep their latency: Replay.Share is the share of the
	// processors they may use. Zero fields take package sched's defaults.
	// See docs/design.md, "Live first".
	Replay sched.Config

	// FS is the filesystem under Dir. Default: the OS.
	FS vfs.FS
	// Clock is the broker clock (append times). Default time.Now.
	Clock func() time.Time
	// NewLeaderWait bounds how long a forward cut short by an election
	// waits for its winner, to name it in the leader hint instead of the
	// old leader (likely dead or paused). Default half an election
	// timeout.
	NewLeaderWait time.Duration
	// FreeBytes reports the free space of the data directory. Default:
	// the filesystem's (vfs.FS.GetDiskUsage). Tests replace it.
	FreeBytes func() (uint64, error)
	// PublishTimeout bounds a publish whose request carries no deadline.
	// Default 30 s.
	PublishTimeout time.Duration
	// CommitCatchUp bounds how long a group commit past the end of this
	// node's replica waits for it to catch up (groups.Config). Default
	// 2 s.
	CommitCatchUp time.Duration
	// ForwardTimeout bounds one request forwarded to a partition's leader
	// (a publish, a key binding); one cut short fails with Unavailable and
	// a leader hint, its outcome unknown. Default 5 s.
	ForwardTimeout time.Duration

	// Transport configures the raft transport between members (package
	// raftlog/transport), which Open builds when Cluster.InitialMembers
	// is set. Open sets its ClusterID, NodeID, Resolve (the members'
	// addresses, with PeerScheme), Deliver, Unreachable, SnapshotStatus
	// and Allowed (current members only) to the broker's own; the rest
	// (Authorize, HTTPClient, Dial, Logger, limits) is the caller's.
	Transport transport.Config
	// PeerScheme is the URL scheme the transport dials members with:
	// "http" (h2c, the default) or "https" (peer TLS).
	PeerScheme string
	// PeerClients are the clients of the other members (package route): every
	// publish, key binding and read this node sends to a partition's
	// leader goes through them. Nil: the node never hops (alone, or a
	// test's cluster that only replicates).
	PeerClients *route.Peers
	// Tier is the object store of tiered storage (engine/internal/tier);
	// nil: topics cannot set local retention limits.
	Tier tier.Store
	// TierCache keeps recently read parts of Tier's segments for every
	// partition. Default: one with tier.NewCache's defaults.
	TierCache *tier.Cache
	// Joined: the node was added to a running cluster (AddNode); its
	// metadata group starts empty and learns everything from the leader.
	Joined bool
}

// StorageConfig sizes a node's caches and paces the housekeeping of its
// store. Zero fields take their defaults. Package engine re-exports it as
// engine.StorageConfig.
type StorageConfig struct {
	// TailCacheBytes bounds the in-memory cache of recent batches that live
	// subscribers read from. Default 256 MiB.
	TailCacheBytes int64
	// StoreCacheBytes sizes Pebble's block cache. Default 256 MiB.
	StoreCacheBytes int64
	// MinFreeBytes: below this much free space on the data directory's
	// filesystem publishes fail with ResourceExhausted, the node hands
	// its partitions' leadership away and stops replicating new records;
	// below 16 MiB (or a quarter of it) it takes no raft message at all;
	// reads go on (disk.go, "Disk space"). Default store.ReserveBytes: 2 × the WAL
	// file size (110 % of the memtable size, preallocated) + the memtable
	// size, 204.8 MiB; never under 64 MiB. Negative disables the guard.
	MinFreeBytes int64
	// HousekeepingInterval is how often retention limits are checked.
	// Default 1 s.
	HousekeepingInterval time.Duration
	// CompactionInterval is how often a compacted topic's partition with
	// new records is compacted. Default 30 s.
	CompactionInterval time.Duration
}

// ClusterConfig makes a node a member of a cluster (cluster.go); its zero
// value runs the node alone. Zero fields take their defaults. Package
// engine re-exports it as engine.ClusterConfig.
type ClusterConfig struct {
	// InitialMembers are every member's id and the address peers and
	// clients reach it at (this node included): the same map on every
	// node of a new cluster (--initial-cluster). Nil runs the node alone.
	InitialMembers map[uint64]string
	// ID names the cluster (engine.ClusterIDOf derives one from
	// InitialMembers). A data directory of another cluster is refused,
	// and so are raft messages from one.
	ID uint64
	// DefaultReplicationFactor is used for topics created without one,
	// capped at the number of members. Default 3.
	DefaultReplicationFactor uint32
	// TickInterval is the raft tick. Default 100 ms.
	TickInterval time.Duration
	// ElectionTicks is the raft election timeout in ticks. Default 10.
	ElectionTicks int
	// FailureDetectTicks is how many ticks a member that leads
	// partitions may send this node nothing before this node's replicas
	// of those partitions forget it and elect another leader
	// (raftlog.Config.FailureDetectTicks). Default ElectionTicks/2: a
	// dead or paused leader is replaced after about that plus a tick or
	// three, instead of 1-2 election timeouts. Negative: off.
	FailureDetectTicks int
	// LeaderBalanceInterval is how often a leader hands partitions back to
	// their preferred replica. Default 5 s; negative: never.
	LeaderBalanceInterval time.Duration
	// FollowerReads serves streams from this node's replicas (fetch from
	// follower) unless a request asks for the leader; by default each
	// partition is read from its leader.
	FollowerReads bool
}

// Validate reports every problem with c at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("broker: Dir is required"))
	}
	if c.Storage.TailCacheBytes < 0 || c.Storage.StoreCacheBytes < 0 {
		errs = append(errs, errors.New("broker: negative cache size"))
	}
	if c.PublishTimeout < 0 || c.Cluster.TickInterval < 0 || c.ForwardTimeout < 0 || c.Cluster.ElectionTicks < 0 || c.NewLeaderWait < 0 {
		errs = append(errs, errors.New("broker: negative duration"))
	}
	if c.MaxInlineModuleBytes < 0 {
		errs = append(errs, errors.New("broker: negative MaxInlineModuleBytes"))
	}
	if err := c.Sandbox.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Replay.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.NodeID == 0 {
		c.NodeID = 1
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Storage.TailCacheBytes == 0 {
		c.Storage.TailCacheBytes = 256 << 20
	}
	if c.Tier != nil && c.TierCache == nil {
		c.TierCache = tier.NewCache(tier.CacheConfig{})
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	c.Clock = failpoint.Clock(c.Clock) // clock-offset, in a failpoints build
	if c.ForwardTimeout == 0 {
		c.ForwardTimeout = 5 * time.Second
	}
	if c.Cluster.TickInterval == 0 {
		c.Cluster.TickInterval = 100 * time.Millisecond // raftlog's default
	}
	if c.Cluster.ElectionTicks == 0 {
		c.Cluster.ElectionTicks = 10 // raftlog's default
	}
	if c.NewLeaderWait == 0 {
		c.NewLeaderWait = time.Duration(c.Cluster.ElectionTicks) * c.Cluster.TickInterval / 2
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 30 * time.Second
	}
	if c.Storage.HousekeepingInterval == 0 {
		c.Storage.HousekeepingInterval = time.Second
	}
	if c.Storage.CompactionInterval == 0 {
		c.Storage.CompactionInterval = 30 * time.Second
	}
	if c.Storage.MinFreeBytes == 0 {
		c.Storage.MinFreeBytes = store.ReserveBytes(0)
	}
	if c.MaxInlineModuleBytes == 0 {
		c.MaxInlineModuleBytes = 4 << 20
	}
	if c.Cluster.DefaultReplicationFactor == 0 {
		c.Cluster.DefaultReplicationFactor = 3
	}
	if c.Cluster.LeaderBalanceInterval == 0 {
		c.Cluster.LeaderBalanceInterval = 5 * time.Second
	}
	if c.FreeBytes == nil {
		fs, dir := failpoint.FS(c.FS), c.Dir // enospc, in a failpoints build
		c.FreeBytes = func() (uint64, error) {
			u, err := fs.GetDiskUsage(dir)
			return u.AvailBytes, err
		}
	}
	return c
}
