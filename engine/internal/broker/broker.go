package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/groups"
	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/route"
	"github.com/rewind-io/rewind/engine/internal/sched"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/raftlog"
	"github.com/rewind-io/rewind/raftlog/transport"
	"github.com/rewind-io/rewind/sandbox"
)

var (
	// ErrNoTopic is returned for an unknown topic name or id.
	ErrNoTopic = errors.New("no such topic")
	// ErrTopicExists is returned when creating a topic whose name is taken.
	ErrTopicExists = errors.New("topic already exists")
	// ErrInvalid marks a request that can never succeed as given.
	ErrInvalid = errors.New("invalid request")
	// ErrTopicDeleted is what streams and publishes of a topic see once it
	// is deleted.
	ErrTopicDeleted = errors.New("topic was deleted")
	// ErrClosed is returned once the broker is closing.
	ErrClosed = errors.New("broker is shutting down")
	// ErrUnavailable marks a request that may succeed if retried later
	// (route.ErrUnavailable: the router classifies its hops with it).
	ErrUnavailable = route.ErrUnavailable
)

// Limits.
const (
	// MaxPartitions bounds one topic's partitions: each request on a topic
	// does some work per partition (a publish's gathering, a stream's
	// cursors, a rebalance's fences). What partitions cost a node is
	// bounded by the partition quotas instead (docs/operations.md).
	MaxPartitions         = 1024
	DefaultMaxRecordBytes = 1 << 20
	MaxMaxRecordBytes     = 16 << 20
	MaxRecordsPerPublish  = 100_000
	MaxIdempotencyKey     = 256
	// MaxHeaders bounds a record's headers, so that the framing beside
	// what MaxRecordBytes counts (a few bytes a header) stays small.
	MaxHeaders   = 1024
	MaxTopicName = 249
)

// Broker is one node. Its methods are safe for concurrent use.
type Broker struct {
	cfg    Config
	log    hclog.Logger
	db     *pebble.DB
	host   *raftlog.Host
	meta   *meta.Meta
	cache  *partition.Cache
	groups *groups.Coordinator
	// sandbox runs filter modules for streams and plugin tests.
	sandbox *sandbox.Runtime
	// sched paces catch-up reads against live work (stream.Options).
	sched *sched.Scheduler
	// timings times the publishes of every partition (metrics).
	timings partition.Timings
	// delivered counts the records streams sent (metrics).
	delivered atomic.Uint64
	// streamCounts counts open streams and the history they read;
	// metaRaft and partRaft the raft events of the metadata group and of
	// the partitions' groups (metrics.go).
	streamCounts       streamCounters
	metaRaft, partRaft raftlog.Counters

	mu struct {
		sync.Mutex
		topics map[uint64]*liveTopic // by topic id
		closed bool
	}
	changes struct {
		sync.Mutex
		list []meta.Change
	}
	// route takes requests to partitions' leaders (routing.go).
	route *route.Router
	// tr carries raft messages to the other members (nil alone); the
	// caller closes it (Transport).
	tr   *transport.Transport
	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
	// diskFull is set while free space is below MinFreeBytes, diskOut
	// while it is below outBytes or a write met ENOSPC
	// (housekeeping.go, "Disk space"). Invariant: diskOut implies diskFull.
	diskFull, diskOut atomic.Bool
	// running is set once Open has returned: a full disk stalls writes
	// from then on (waitForSpace) instead of failing Open.
	running atomic.Bool
	// reads counts reads served for and through other nodes (reads.go);
	// fetchGate bounds the fetches reading the store at once.
	reads     readCounters
	fetchGate chan struct{}
	// draining ends when the node drains: every stream ends with it.
	draining context.Context
	drain    context.CancelFunc
	// streams counts running Subscribe calls; Close waits for them so no
	// reader holds a store iterator when the store closes.
	streams   sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	// failed is closed when the raft host stopped on a storage error
	// (watchHost); watched ends with the watcher.
	failed, watched chan struct{}
	// fatal is closed when the store reported a fatal failure (a MANIFEST
	// write of a background flush, a failed commit: store.Config.OnFatal);
	// fatalErr, set before, says which. The goroutine that met it is
	// blocked for good, maybe holding Pebble's locks: nothing may use or
	// close the store after it.
	fatal    chan struct{}
	fatalErr atomic.Pointer[error]
}

// liveTopic is a topic whose partitions run on this node.
type liveTopic struct {
	meta  *meta.Topic
	parts []*partition.Partition
	// spread places keyless records (publish.go); shared by the copies
	// a reassignment makes.
	spread *spreader
	// counters is shared by every copy of the topic's liveTopic.
	counters *topicCounters
}

// Open opens the store in cfg.Dir and starts the node.
func Open(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	b := &Broker{
		cfg:   cfg,
		log:   cfg.Logger,
		cache: partition.NewCache(cfg.Storage.TailCacheBytes),
		groups: groups.New(groups.Config{
			Now: func() int64 { return cfg.Clock().UnixNano() }, Logger: cfg.Logger.Named("groups"), CommitCatchUp: cfg.CommitCatchUp,
		}),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		failed:    make(chan struct{}),
		watched:   make(chan struct{}),
		fatal:     make(chan struct{}),
		fetchGate: make(chan struct{}, maxServingFetches),
	}
	b.route = b.newRouter()
	var err error
	if b.sched, err = sched.New(cfg.Replay, nil); err != nil {
		return nil, err
	}
	b.draining, b.drain = context.WithCancel(context.Background())
	b.mu.topics = make(map[uint64]*liveTopic)
	db, err := store.Open(store.Config{Dir: cfg.Dir, FS: cfg.FS, CacheBytes: cfg.Storage.StoreCacheBytes, Logger: cfg.Logger,
		OnFatal: b.storeFailed, OnDiskFull: b.waitForSpace})
	if err != nil {
		return nil, err
	}
	b.db = db
	cacheDir := ""
	if cfg.FS == vfs.Default {
		cacheDir = filepath.Join(cfg.Dir, "wasm-cache")
	}
	b.sandbox, err = sandbox.New(context.Background(), sandbox.Config{
		CacheDir: cacheDir, Limits: cfg.Sandbox, Logger: cfg.Logger.Named("sandbox"),
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := checkIdentity(db, cfg); err != nil {
		_ = b.sandbox.Close(context.Background())
		db.Close()
		return nil, err
	}
	var rt raftlog.Transport // nil alone: a nil *transport.Transport is not
	if b.clustered() {
		if b.tr, err = b.newTransport(); err != nil {
			_ = b.sandbox.Close(context.Background())
			db.Close()
			return nil, err
		}
		rt = b.tr
	}
	host, err := raftlog.Open(raftlog.Config{
		NodeID: cfg.NodeID, DB: db, Logger: cfg.Logger.Named("raftlog"), TickInterval: cfg.Cluster.TickInterval,
		Transport: rt, ElectionTicks: cfg.Cluster.ElectionTicks, FailureDetectTicks: cfg.Cluster.FailureDetectTicks,
	})
	if err != nil {
		b.closeTransport()
		_ = b.sandbox.Close(context.Background())
		db.Close()
		return nil, err
	}
	b.host = host
	host.Start()
	go b.watchHost()
	fail := func(err error) (*Broker, error) {
		host.Close()
		b.closeTransport()
		<-b.watched
		_ = b.sandbox.Close(context.Background())
		db.Close()
		return nil, err
	}
	m, err := meta.Open(meta.Config{
		DB: db, Host: host, OnChange: b.onMetaChange, Logger: cfg.Logger.Named("meta"),
		DefaultReplicas: cfg.Cluster.DefaultReplicationFactor,
	})
	if err != nil {
		return fail(err)
	}
	b.meta = m
	mg := raftlog.GroupConfig{ID: meta.GroupID, Voters: b.initialVoters(), SM: m, ForwardProposals: true, Counters: &b.metaRaft}
	if cfg.Joined {
		mg.Voters, mg.Join = nil, true
	}
	if err := host.AddGroup(mg); err != nil {
		return fail(fmt.Errorf("broker: start metadata group: %w", err))
	}
	if err := b.startTopics(m.Topics()); err != nil {
		return fail(err)
	}
	if err := b.finishDeletions(); err != nil {
		return fail(err)
	}
	b.wg.Add(5)
	go func() {
		// Close drains first: the governor stops with the streams.
		defer b.wg.Done()
		sched.Governor{
			Delays:   []sched.Delays{{Buckets: raftlog.DelayBuckets, Read: b.host.WakeDelays().Counts}},
			Activity: []func() uint64{b.host.SyncDelays().Count},
		}.Run(b.draining, b.sched)
	}()
	go b.reconcile()
	go b.housekeeping()
	go b.initMembers()
	go b.maintain()
	b.checkDisk()
	b.running.Store(true)
	b.log.Info("broker open", "dir", cfg.Dir, "topics", len(m.Topics()))
	return b, nil
}

// Drain starts shutting down: new requests are refused and running streams
// end (with Unavailable) at their next step. It does not wait.
func (b *Broker) Drain() {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return
	}
	b.mu.closed = true
	// A copy: reconcile may still add a topic to the map after the lock
	// is let go (the race detector saw Drain iterate while it did).
	topics := make([]*liveTopic, 0, len(b.mu.topics))
	for _, lt := range b.mu.topics {
		topics = append(topics, lt)
	}
	b.mu.Unlock()
	b.drain() // streams end, relayed ones too
	for _, lt := range topics {
		for _, p := range lt.hosted() {
			p.Fail(ErrClosed)
		}
	}
}

// Close drains the node, waits (up to 10 s) for streams to let go of the
// store, stops the raft host (failing publishes in flight) and closes the
// store. After a fatal store failure it only drains and returns that
// failure: the goroutine Pebble failed on may hold the locks that closing
// the host or the store would wait for, for ever, and the owner is about
// to exit anyway (every acknowledged write was synced before it was
// acknowledged).
func (b *Broker) Close() error {
	b.Drain()
	if err := b.storeFatal(); err != nil {
		return err
	}
	b.closeOnce.Do(func() {
		close(b.stop)
		b.wg.Wait()
		done := make(chan struct{})
		go func() { b.streams.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			b.log.Warn("streams still running at shutdown (clients not reading?)")
		}
		hostErr := b.host.Close()
		<-b.watched
		b.closeErr = errors.Join(hostErr, b.sandbox.Close(context.Background()))
		if err := b.storeFatal(); err != nil {
			// A write that waited for space failed when Close ended the
			// wait (waitForSpace): the store must not be closed.
			b.closeErr = errors.Join(b.closeErr, err)
			return
		}
		b.closeErr = errors.Join(b.closeErr, b.db.Close())
	})
	return b.closeErr
}

// watchHost closes b.failed if the raft host stops on its own: the store
// failed (a WAL write or fsync, a disk gone or read-only; ENOSPC waits for
// space instead, disk.go). Pebble
// treats such an error as fatal, and a node can neither acknowledge
// another write nor tell which of its last writes are on disk, so it
// stops serving (Ready) and its owner exits: the node fails, the data
// never does (docs/design.md, "Failure behaviour").
func (b *Broker) watchHost() {
	defer close(b.watched)
	select {
	case <-b.host.Done():
	case <-b.fatal:
	}
	if err := b.Err(); err != nil {
		b.log.Error("storage failed: this node stops serving and must be restarted", "error", err)
		close(b.failed)
	}
}

// storeFailed is the store's OnFatal: Pebble failed in a way it cannot go
// on from (it would have panicked, killing the process with a stack trace
// instead of the reason), so the node fails the way it does when a WAL
// write fails.
func (b *Broker) storeFailed(err error) {
	b.fatalErr.Store(&err)
	close(b.fatal)
}

// storeFatal returns the store's fatal failure, or nil.
func (b *Broker) storeFatal() error {
	if p := b.fatalErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Failed is closed when the node's store failed and its raft groups
// stopped; Err says why. The node serves nothing reliably after that:
// close it, and restart the process once the disk is healthy.
func (b *Broker) Failed() <-chan struct{} { return b.failed }

// Err returns the storage error that stopped the node, or nil.
func (b *Broker) Err() error {
	if err := b.storeFatal(); err != nil {
		return err
	}
	return b.host.Err()
}

// Draining is closed once the node starts shutting down.
func (b *Broker) Draining() <-chan struct{} { return b.draining.Done() }

// ErrNotReady marks a node that should get no traffic: it is shutting
// down, its store failed, or it knows no leader of the metadata group.
var ErrNotReady = errors.New("node not ready")

// ErrNoMetaLeader says that the node knows no leader of the metadata
// group: it is cut off from a majority of the members, or they are still
// electing one. Topics cannot be created or changed and groups are not
// coordinated until one is known.
var ErrNoMetaLeader = errors.New("no leader of the metadata group is known")

// Ready returns nil while the node serves, else why not (an ErrNotReady).
// Ready means:
//
//  1. the store is recovered: Open returned, so every raft group replayed
//     its log (a node is not served before), and no WAL write or fsync
//     failed since (Err);
//  2. the node is not draining (Drain, then Close);
//  3. the metadata group has a known leader (this node or another).
//
// Health checks (/readyz, gRPC health) report it. It takes no lock held
// across I/O and is cheap enough for a probe every second.
func (b *Broker) Ready() error {
	if err := b.Err(); err != nil {
		return fmt.Errorf("%w: storage failed: %w", ErrNotReady, err)
	}
	if err := b.open(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	if st, ok := b.host.Status(meta.GroupID); !ok || st.Leader == 0 {
		return fmt.Errorf("%w: %w", ErrNotReady, ErrNoMetaLeader)
	}
	return nil
}

// open returns ErrClosed once the broker is closing.
func (b *Broker) open() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return ErrClosed
	}
	return nil
}

// Now returns the broker clock in Unix nanoseconds.
func (b *Broker) Now() int64 { return b.cfg.Clock().UnixNano() }

// onMetaChange runs on the raft loop: queue the change for reconcile.
func (b *Broker) onMetaChange(cs []meta.Change) {
	b.changes.Lock()
	b.changes.list = append(b.changes.list, cs...)
	b.changes.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// reconcile makes the partitions running on this node follow the catalog.
func (b *Broker) reconcile() {
	defer b.wg.Done()
	for {
		select {
		case <-b.stop:
			return
		case <-b.wake:
		}
		b.changes.Lock()
		list := b.changes.list
		b.changes.list = nil
		b.changes.Unlock()
		for _, c := range list {
			var err error
			switch {
			case c.Created != nil:
				err = b.startTopic(c.Created)
			case c.Deleted != nil:
				err = b.removeTopic(c.Deleted)
			case c.Altered != nil:
				b.applyPolicy(c.Altered)
			case c.Reassigned != nil:
				err = b.reassign(c.Reassigned)
			case c.Grown != nil:
				err = b.growTopic(c.Grown)
			}
			if err != nil {
				b.log.Error("reconcile topic", "error", err)
			}
		}
	}
}

// startTopic opens and starts the partitions of t this node keeps a
// replica of, if they do not run yet.
func (b *Broker) startTopic(t *meta.Topic) error {
	return b.startTopics([]*meta.Topic{t})
}

// startTopics is startTopic for many topics: their raft groups start
// together (raftlog.Host.AddGroups), which is what makes a restart with
// many partitions quick.
func (b *Broker) startTopics(ts []*meta.Topic) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	var lts []*liveTopic
	var pending []pendingGroup
	for _, t := range ts {
		if _, ok := b.mu.topics[t.ID]; ok {
			continue
		}
		lt := &liveTopic{meta: t, counters: new(topicCounters), spread: newSpreader(t.Partitions)}
		p, err := b.openReplicas(lt, 0, len(t.Groups), true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lts, pending = append(lts, lt), append(pending, p...)
	}
	// A topic runs once every replica of it here has started; one that
	// failed is not registered, so that a later start (reconcile) tries
	// it again.
	failed, err := b.startGroups(pending)
	for _, lt := range lts {
		if !failed[lt] {
			b.mu.topics[lt.meta.ID] = lt
		}
	}
	return errors.Join(append(errs, err)...)
}

// pendingGroup is the raft group of a replica opened but not started yet:
// partition part of lt.
type pendingGroup struct {
	lt   *liveTopic
	part int
	gc   raftlog.GroupConfig
}

// openReplicas opens partitions lo up to hi of lt's topic that this node
// keeps a replica of and appends each to lt.parts (nil: another node's, or
// one that failed to open); it returns their raft groups, for startGroups.
// With all, the first failure stops it.
func (b *Broker) openReplicas(lt *liveTopic, lo, hi int, all bool) ([]pendingGroup, error) {
	t := lt.meta
	var errs []error
	var pending []pendingGroup
	for i := lo; i < hi; i++ {
		voters := t.ReplicasOf(i)
		if voters == nil {
			voters = []uint64{b.cfg.NodeID}
		}
		if !slices.Contains(voters, b.cfg.NodeID) {
			lt.parts = append(lt.parts, nil) // another node's: publishes are forwarded
			continue
		}
		p, gc, err := b.openPartition(t, i, voters, false)
		if err != nil {
			if all {
				return nil, err
			}
			errs = append(errs, err)
		} else {
			pending = append(pending, pendingGroup{lt: lt, part: i, gc: gc})
		}
		lt.parts = append(lt.parts, p) // nil on error: served by the other replicas
	}
	return pending, errors.Join(errs...)
}

// startGroups starts the raft groups together (raftlog.Host.AddGroups:
// their first passes are shared, which is what makes a restart with many
// partitions quick). A group that fails to start leaves its partition nil
// in its topic; failed holds the topics that had one.
func (b *Broker) startGroups(pending []pendingGroup) (failed map[*liveTopic]bool, err error) {
	gcs := make([]raftlog.GroupConfig, len(pending))
	for k, p := range pending {
		gcs[k] = p.gc
	}
	var errs []error
	for k, err := range b.host.AddGroups(gcs) {
		if err != nil && !errors.Is(err, raftlog.ErrGroupExists) {
			p := pending[k]
			errs = append(errs, fmt.Errorf("broker: topic %q partition %d: %w", p.lt.meta.Name, p.part, err))
			p.lt.parts[p.part] = nil
			if failed == nil {
				failed = map[*liveTopic]bool{}
			}
			failed[p.lt] = true
		}
	}
	return failed, errors.Join(errs...)
}

// openPartition opens partition i of t and returns it with the
// configuration of its raft group, for the caller to start (AddGroups): a
// new group starts with voters, or, when join is set, empty, waiting for
// the leader to send it a snapshot and the log (a replica added later).
func (b *Broker) openPartition(t *meta.Topic, i int, voters []uint64, join bool) (*partition.Partition, raftlog.GroupConfig, error) {
	g := t.Groups[i]
	p, err := partition.Open(partition.Config{
		Group: g, TopicID: t.ID, Index: uint32(i), DB: b.db, Host: b.host, Cache: b.cache,
		Now: b.Now, Logger: b.log.Named("partition").With("topic", t.Name, "partition", i),
		DedupeWindow: time.Duration(t.DedupeWindowNanos), KeyIndex: t.KeyIndex, Policy: policyOf(t), DiskFull: &b.diskFull,
		Timings: &b.timings, Tier: b.cfg.Tier, TierCache: b.cfg.TierCache, Background: b.backgroundTurn,
	})
	if err != nil {
		return nil, raftlog.GroupConfig{}, fmt.Errorf("broker: topic %q: %w", t.Name, err)
	}
	// Proposals are forwarded inside raft: publishes are routed to the
	// leader anyway, but subscriber group commits are proposed where the
	// group's coordinator runs.
	gc := raftlog.GroupConfig{ID: g, Voters: voters, SM: p, ForwardProposals: true, Counters: &b.partRaft}
	if join {
		gc.Voters, gc.Join = nil, true
	}
	return p, gc, nil
}

// reassign follows new replica sets of t's partitions: a partition that now
// has a replica here starts empty and is caught up by its leader. Replicas
// this node no longer keeps are removed by maintain once the partition's
// raft configuration excludes this node.
func (b *Broker) reassign(t *meta.Topic) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	old, ok := b.mu.topics[t.ID]
	if !ok {
		return nil
	}
	lt := &liveTopic{meta: t, parts: slices.Clone(old.parts), counters: old.counters, spread: old.spread}
	var errs []error
	if len(t.Groups) > len(old.parts) {
		// The topic grew and this node failed to start the new partitions
		// (growTopic logged why): they stay without a replica here.
		errs = append(errs, fmt.Errorf("broker: topic %q: %d partitions, %d running", t.Name, len(t.Groups), len(old.parts)))
		lt.parts = append(lt.parts, make([]*partition.Partition, len(t.Groups)-len(old.parts))...)
		lt.spread = old.spread.grown(t.Partitions)
	}
	var pending []pendingGroup
	for i := range old.parts {
		if lt.parts[i] != nil || !slices.Contains(t.ReplicasOf(i), b.cfg.NodeID) {
			continue
		}
		p, gc, err := b.openPartition(t, i, nil, true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pending = append(pending, pendingGroup{lt: lt, part: i, gc: gc})
		lt.parts[i] = p
	}
	_, err := b.startGroups(pending)
	b.mu.topics[t.ID] = lt
	return errors.Join(append(errs, err)...)
}

// removeTopic stops t's partitions and deletes their data.
func (b *Broker) removeTopic(t *meta.Topic) error {
	b.mu.Lock()
	lt := b.mu.topics[t.ID]
	delete(b.mu.topics, t.ID)
	b.mu.Unlock()
	if lt != nil {
		for _, p := range lt.hosted() {
			p.Fail(fmt.Errorf("%w: %q", ErrTopicDeleted, t.Name))
		}
	}
	b.groups.Forget(t.ID)
	var errs []error
	for _, g := range t.Groups {
		errs = append(errs, b.deleteGroup(g))
	}
	return errors.Join(errs...)
}

// deleteGroup removes a partition group's raft state, its rows and its
// deletion marker.
func (b *Broker) deleteGroup(g uint64) error {
	if err := b.host.RemoveGroup(g); err != nil {
		return err
	}
	b.cache.Drop(g)
	batch := b.db.NewBatch()
	defer batch.Close()
	for _, prefix := range keys.PartitionRows {
		s, e := keys.GroupSpan(prefix, g)
		if err := batch.DeleteRange(s, e, nil); err != nil {
			return err
		}
	}
	if err := batch.Delete(keys.PartitionStateKey(g), nil); err != nil {
		return err
	}
	if err := batch.Delete(keys.DeletionKey(g), nil); err != nil {
		return err
	}
	return store.Commit(batch, pebble.Sync)
}

// finishDeletions completes deletions a crash interrupted.
func (b *Broker) finishDeletions() error {
	s, e := keys.DeletionSpan()
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: s, UpperBound: e})
	if err != nil {
		return err
	}
	var groups []uint64
	for valid := it.First(); valid; valid = it.Next() {
		if g, ok := keys.DeletionGroup(it.Key()); ok {
			groups = append(groups, g)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	for _, g := range groups {
		if err := b.deleteGroup(g); err != nil {
			return fmt.Errorf("broker: finish deleting group %d: %w", g, err)
		}
	}
	return nil
}

// topic returns the live topic named name, which must have every partition
// on this node (reads and groups are served from the local replicas).
func (b *Broker) topic(name string) (*liveTopic, error) {
	lt, err := b.anyTopic(name)
	if err != nil {
		return nil, err
	}
	if !lt.hostsAll() {
		return nil, fmt.Errorf("%w: topic %q has partitions with no replica on node %d: connect to one of nodes %v",
			ErrUnavailable, name, b.cfg.NodeID, lt.replicaNodes())
	}
	return lt, nil
}

// anyTopic returns the live topic named name; some of its partitions may
// have no replica here (nil parts).
func (b *Broker) anyTopic(name string) (*liveTopic, error) {
	t, ok := b.meta.Topic(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, echo.Quote(name))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return nil, ErrClosed
	}
	lt, ok := b.mu.topics[t.ID]
	if !ok {
		// Created but its partitions are still starting (reconcile).
		return nil, fmt.Errorf("%w: topic %q is starting", ErrUnavailable, name)
	}
	return lt, nil
}

// backgroundTurn waits for a catch-up turn of the node's scheduler for a
// slice of a partition's background work (partition.Config.Background),
// and returns its end.
func (b *Broker) backgroundTurn(ctx context.Context) (func(), error) {
	t, err := b.sched.CatchUp(ctx)
	if err != nil {
		return nil, err
	}
	return t.End, nil
}
