package raftlog

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/rewind-io/rewind/internal/failpoint"
)

var (
	// ErrStopped is returned once the host has stopped (Close, or a fatal
	// storage error, which Err reports).
	ErrStopped = errors.New("raftlog: host stopped")
	// ErrCorrupt marks state on disk that contradicts itself. The host refuses
	// to run a group on it.
	ErrCorrupt = errors.New("raftlog: corrupt state")
	// ErrNoGroup is returned for a group the host does not run.
	ErrNoGroup = errors.New("raftlog: no such group")
	// ErrGroupExists is returned by AddGroup for a group already running.
	ErrGroupExists = errors.New("raftlog: group already running")
	// ErrProposalDropped is passed to StateMachine.Dropped when raft refused
	// a proposal: no leader is known, this node is not the leader, or too
	// many uncommitted bytes are in flight.
	ErrProposalDropped = raft.ErrProposalDropped
)

// StateMachine is the application side of one raft group. The host calls
// every method from its loop goroutine, one group at a time, so an
// implementation needs no lock for state only these methods touch. None of
// the methods may call back into the Host synchronously (AddGroup,
// RemoveGroup); Wake is fine.
type StateMachine interface {
	// TakeProposals appends the group's queued proposals to dst and returns
	// it. It is called after Wake, at the start of the next pass.
	TakeProposals(dst [][]byte) [][]byte
	// Dropped hands back proposals raft refused, with the reason.
	Dropped(data [][]byte, err error)
	// Apply applies committed entries in index order. ents are the normal
	// entries that carry data (raft's empty entries and configuration changes
	// are not passed). Apply adds every write it needs to w, the batch that
	// also records the new applied index, so a crash either keeps both or
	// neither: apply is exactly-once. Apply must be deterministic: every
	// replica applies the same entries with the same result. An error stops
	// the group.
	Apply(w *pebble.Batch, ents []*pb.Entry) error
	// Durable is called after the writes of every Apply since the last call
	// are committed to Pebble and the entries they came from are durable.
	// This is where results become visible and proposers are answered.
	Durable()
	// LeaderChanged reports a new leader (0: none known) and term.
	LeaderChanged(leader, term uint64)
	// Stopped is called once when the group stops: with ErrStopped when the
	// host closes, or with the error that stopped the group.
	Stopped(err error)
}

// LogTruncator is implemented by a state machine that releases the front of
// its log (retention: the log is the data). After each Apply the host asks
// for the highest index no longer needed, and deletes every entry up to it
// (at most the applied index) with one range deletion, in the same batch as
// the apply.
type LogTruncator interface {
	TruncateLog() uint64
}

// commit commits b. Pebble treats a failed WAL write or fsync as fatal and
// reports it through its logger's Fatalf, which panics (see the store
// package); that panic is turned into the error that stops the host.
func commit(b *pebble.Batch, opts *pebble.WriteOptions) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store failed: %v", r)
		}
	}()
	return b.Commit(opts)
}

// Envelope is one raft message and the group it belongs to (raft's own
// message carries no group id).
type Envelope struct {
	Group uint64
	Msg   *pb.Message
}

// Transport delivers raft messages to other nodes. The host calls Send once
// per pass with the messages of every group, after the pass's writes are
// durable, so a transport can put everything bound for one node into one
// frame (which is how the heartbeats of many groups to one peer share a
// write). Send must not block and must not keep envs after it returns
// (the messages themselves it may keep); it may drop messages (raft
// retries; but a dropped MsgSnap stalls that follower until the transport
// calls ReportSnapshot with failed). A nil Transport drops every message,
// which is correct for groups whose only voter is this node.
type Transport interface {
	Send(envs []Envelope)
}

// AppliedTermer is implemented by a state machine that wants the term of
// the last entry each pass applied, raft's own empty and configuration
// entries included. Once a term-T entry is applied, no entry proposed under
// an earlier term that has not been applied yet can ever commit: a leader's
// first entry commits everything before it, and what it did not have is
// gone. A state machine uses that to fail, as definitely not stored,
// proposals a leader change lost (only those proposed as leader, see
// ProposalTermer; a proposal in flight when a snapshot is restored has an
// unknown outcome). Called before Durable.
type AppliedTermer interface {
	AppliedTerm(term uint64)
}

// ProposalTermer is implemented by a state machine that wants the term its
// proposals are appended at: Proposing is called right before
// TakeProposals, with the leader's term, or 0 when this node does not lead
// the group (its proposals are forwarded, and the leader they reach may
// append them under a later term, so no term is known). With AppliedTermer
// it tells when a proposal was lost.
type ProposalTermer interface {
	Proposing(term uint64)
}

// Snapshotter is implemented by a state machine whose group may truncate its
// log (LogTruncator) while other replicas need it. Raft snapshots carry no
// data of their own here: a replica whose next entry the leader no longer
// has jumps to the leader's first index, with the little state the state
// machine needs to continue applying from there.
type Snapshotter interface {
	// SnapshotData returns the state machine's state as of raft index
	// index (the last truncated entry), enough for a replica to apply the
	// entries after it with the same result as this one.
	SnapshotData(index uint64) ([]byte, error)
	// RestoreSnapshot replaces the state machine's state with data, as of
	// index, adding its writes to w (the batch that also installs the
	// snapshot). The group's log is empty after it.
	RestoreSnapshot(w *pebble.Batch, index uint64, data []byte) error
}

// Config configures a Host. The zero value of every field but NodeID and DB
// selects the default.
type Config struct {
	// NodeID is this node's raft id. Required, non-zero.
	NodeID uint64
	// DB is the node's store. Required. The host owns the keys starting with
	// 'r'; the caller must not write them.
	DB *pebble.DB
	// Logger; default: a null logger.
	Logger hclog.Logger
	// Transport; default nil (single-node groups only).
	Transport Transport
	// TickInterval is the raft tick. Default 100 ms.
	TickInterval time.Duration
	// ElectionTicks and HeartbeatTicks are in ticks. Defaults 10 and 1.
	ElectionTicks, HeartbeatTicks int
	// MaxSizePerMsg bounds one MsgApp. Default 1 MiB.
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds MsgApps in flight per follower. Default 256.
	MaxInflightMsgs int
	// MaxUncommittedBytes bounds a leader's uncommitted log tail; proposals
	// beyond it are dropped. Default 256 MiB.
	MaxUncommittedBytes uint64
	// MaxCommittedBytesPerReady bounds what one pass applies per group.
	// Default 64 MiB.
	MaxCommittedBytesPerReady uint64
	// EntryCacheBytes bounds each group's in-memory log tail. Default 32 MiB.
	EntryCacheBytes int64
	// FailureDetectTicks is how long, in ticks of this host, a node that
	// leads groups here may be silent (no message of any group) before
	// those groups' followers here forget it and campaign, instead of
	// waiting out the election timeout (see detector.go). Default
	// ElectionTicks/2 (5 ticks, 500 ms at the defaults); it must exceed
	// HeartbeatTicks and stay below ElectionTicks. Shorter fails over
	// sooner and elects needlessly when a leader's loop stalls that long
	// (a slow fsync on a loaded machine): availability, never safety.
	// Negative disables the detector.
	FailureDetectTicks int
}

// Validate reports every problem with c at once.
func (c *Config) Validate() error {
	var errs []error
	if c.NodeID == 0 {
		errs = append(errs, errors.New("raftlog: NodeID is required"))
	}
	if c.DB == nil {
		errs = append(errs, errors.New("raftlog: DB is required"))
	}
	if c.TickInterval < 0 {
		errs = append(errs, fmt.Errorf("raftlog: negative TickInterval %s", c.TickInterval))
	}
	if c.ElectionTicks < 0 || c.HeartbeatTicks < 0 {
		errs = append(errs, errors.New("raftlog: negative tick counts"))
	}
	if c.ElectionTicks != 0 && c.HeartbeatTicks != 0 && c.HeartbeatTicks >= c.ElectionTicks {
		errs = append(errs, fmt.Errorf("raftlog: HeartbeatTicks %d must be below ElectionTicks %d", c.HeartbeatTicks, c.ElectionTicks))
	}
	if d := c.withDefaults(); c.FailureDetectTicks > 0 && (d.FailureDetectTicks <= d.HeartbeatTicks || d.FailureDetectTicks >= d.ElectionTicks) {
		errs = append(errs, fmt.Errorf("raftlog: FailureDetectTicks %d must be above HeartbeatTicks %d and below ElectionTicks %d (negative disables it)",
			c.FailureDetectTicks, d.HeartbeatTicks, d.ElectionTicks))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = 256
	}
	if c.MaxUncommittedBytes == 0 {
		c.MaxUncommittedBytes = 256 << 20
	}
	if c.MaxCommittedBytesPerReady == 0 {
		c.MaxCommittedBytesPerReady = 64 << 20
	}
	if c.EntryCacheBytes == 0 {
		c.EntryCacheBytes = 32 << 20
	}
	if c.FailureDetectTicks == 0 {
		// Half the election timeout, and never where a healthy leader's
		// heartbeats could miss it; ElectionTicks too small for that
		// leaves failover to raft.
		c.FailureDetectTicks = c.ElectionTicks / 2
		if c.FailureDetectTicks <= c.HeartbeatTicks {
			c.FailureDetectTicks = -1
		}
	}
	return c
}

// GroupConfig names a group to run.
type GroupConfig struct {
	ID uint64
	// Voters is the initial configuration of a group that has no state yet.
	// It is ignored when the group already has state on disk. A replica
	// added to a running group (a conf change) starts with no voters: it
	// waits to hear from the leader.
	Voters []uint64
	// Join starts a group that has no state and no voters: the replica
	// was added by a conf change and learns its configuration from the
	// leader.
	Join bool
	// ForwardProposals lets a follower hand proposals to the leader inside
	// raft. Without it (the default) a follower's proposals are dropped
	// (StateMachine.Dropped with ErrProposalDropped), so the caller routes
	// them to the leader itself.
	ForwardProposals bool
	SM               StateMachine
	// Counters, when set, counts the group's leader changes, dropped
	// proposals and snapshots sent; many groups may share one (a node
	// sums its partitions' groups into one, metrics).
	Counters *Counters
}

// Counters count raft events of the groups that share them. The host's
// loop adds to them; anyone may read them at any time.
type Counters struct {
	// LeaderChanges counts the times a group learned of a new leader
	// (a change to "no leader" is not counted).
	LeaderChanges atomic.Uint64
	// ProposalsDropped counts proposals raft refused (no leader it could
	// forward to, a leadership transfer in progress, the uncommitted tail
	// over MaxUncommittedBytes); their proposers were told (Dropped).
	ProposalsDropped atomic.Uint64
	// SnapshotsSent counts the snapshots this node, leading, sent to a
	// replica too far behind for the log (a new or long-cut-off replica).
	SnapshotsSent atomic.Uint64
}

// Status is a snapshot of one group, refreshed after every pass that
// touched it.
type Status struct {
	ID      uint64
	Leader  uint64 // 0 if unknown
	Term    uint64
	Commit  uint64
	Applied uint64
	Last    uint64
	// First is the first index still in the log.
	First uint64
	// Leading is set when this node is the leader; Match then holds how
	// far each voter's log is known to match the leader's.
	Leading bool
	Match   map[uint64]uint64
	// Voters is the group's current configuration (the incoming one
	// during a joint change); VotersOutgoing is set during a joint change.
	Voters, VotersOutgoing, Learners []uint64
	// Err is set when the group stopped because of an error.
	Err error
}

// Host runs many raft groups on one node over one Pebble store. One loop
// goroutine drives every group: each pass gathers the Ready of all groups,
// writes all of them to Pebble, syncs the WAL once, then sends messages and
// acknowledges. Host methods are safe for concurrent use.
type Host struct {
	cfg Config
	db  *pebble.DB
	log hclog.Logger

	mu struct {
		sync.Mutex
		ops    []func()
		wakes  map[uint64]struct{}
		inbox  []Envelope
		status map[uint64]Status
		err    error // why the host stopped, if it did
		closed bool
	}
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	// idle is set while the loop waits for work; kickedAt is when the
	// first poke of an idle spell came (Unix nanoseconds, 0: none), so the
	// loop can count how long it took to run (wakes).
	idle     atomic.Bool
	kickedAt atomic.Int64
	wakes    Histogram
	syncs    Histogram

	// Owned by the loop goroutine.
	groups   map[uint64]*group
	proposed [][]byte
	outbox   []Envelope
	// order lists the running groups by id, so every pass visits them in
	// the same order (deterministic tests, reproducible message order).
	order []uint64
	// dirty lists the groups whose raft state changed since the last pass
	// (a message stepped, proposals taken, a Ready left over): a pass asks
	// only them for a Ready, not every group, which costs a node with
	// thousands of partitions on every publish. allDirty (a tick, an
	// operation) makes the next pass visit every group, so a change that
	// marked nothing waits at most one tick.
	dirty    []*group
	allDirty bool
	// wanting lists the groups with wantPropose set (proposals queued).
	wanting []*group
	// opErr is a store failure an operation met (RemoveGroup's commit):
	// it stops the host like a failed pass.
	opErr error
	// detect is the failure detector's state (detector.go); det its
	// counters, which anyone may read.
	detect detector
	det    detectorCounters
}

type group struct {
	id     uint64
	rn     *raft.RawNode
	st     *storage
	sm     StateMachine
	leader uint64
	// applied is set when the last pass applied entries (Durable is due).
	applied bool
	// wantPropose is set by Wake and cleared when proposals are taken.
	wantPropose bool
	// dirty: the group is on Host.dirty.
	dirty bool
	// recovered is closed once the group has applied every entry that was
	// committed when it started (startCommit).
	recovered   chan struct{}
	startCommit uint64
	stopped     bool
	// counters is GroupConfig.Counters, or a private one.
	counters *Counters
	// campaignAt is the detector's tick at which the group campaigns,
	// having forgotten a silent leader (0: none scheduled).
	campaignAt uint64
}

// Open returns a host over cfg.DB with no groups running. Call Start to run
// its loop, then AddGroup.
func Open(cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if failpoint.Enabled(failpoint.BugSlowElections) {
		// An injected bug: slow failover. The detector is how failover
		// starts now; the election timeout is slowed in AddGroup.
		cfg.FailureDetectTicks = -1
	}
	h := &Host{
		cfg:    cfg,
		db:     cfg.DB,
		log:    cfg.Logger,
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		groups: make(map[uint64]*group),
	}
	h.mu.wakes = make(map[uint64]struct{})
	h.mu.status = make(map[uint64]Status)
	h.detect.heard = make(map[uint64]uint64)
	h.detect.suspected = make(map[uint64]uint64)
	h.detect.acted = make(map[uint64]bool)
	return h, nil
}

// Start runs the host loop until Close.
func (h *Host) Start() { go h.run() }

// Close stops the loop, tells every group's state machine it stopped, and
// waits. It returns the error that had stopped the host, if any.
func (h *Host) Close() error {
	h.mu.Lock()
	if !h.mu.closed {
		h.mu.closed = true
		close(h.stop)
	}
	h.mu.Unlock()
	<-h.done
	return h.Err()
}

// Done is closed once the host's loop has stopped: after Close, or at once
// when a fatal storage error stopped it (Err then says which). A node
// watches it to stop serving: every group is stopped, and none restarts
// without reopening the store.
func (h *Host) Done() <-chan struct{} { return h.done }

// Err returns the fatal error that stopped the host, or nil.
func (h *Host) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.err
}

// Wake tells the host that group id has proposals to take. It never blocks.
func (h *Host) Wake(id uint64) {
	h.mu.Lock()
	h.mu.wakes[id] = struct{}{}
	h.mu.Unlock()
	h.poke()
}

func (h *Host) poke() {
	if h.idle.Load() && h.kickedAt.Load() == 0 {
		h.kickedAt.CompareAndSwap(0, time.Now().UnixNano())
	}
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Status returns the latest snapshot of group id.
func (h *Host) Status(id uint64) (Status, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.mu.status[id]
	return s, ok
}

// do runs fn on the loop goroutine and waits for it.
func (h *Host) do(fn func() error) error {
	res := make(chan error, 1)
	h.mu.Lock()
	if h.mu.closed || h.mu.err != nil {
		err := h.mu.err
		h.mu.Unlock()
		return errors.Join(ErrStopped, err)
	}
	h.mu.ops = append(h.mu.ops, func() { res <- fn() })
	h.mu.Unlock()
	h.poke()
	select {
	case err := <-res:
		return err
	case <-h.done:
		select {
		case err := <-res:
			return err
		default:
			return errors.Join(ErrStopped, h.Err())
		}
	}
}

// AddGroup starts running a group: it loads its state, or bootstraps it with
// gc.Voters if it has none. A group whose only voter is this node campaigns
// at once, so it can take proposals after its first pass. AddGroup returns
// once the group has applied every entry that was committed before it
// started, so what the state machine shows readers never grows history that
// was already there.
func (h *Host) AddGroup(gc GroupConfig) error {
	return h.AddGroups([]GroupConfig{gc})[0]
}

// AddGroups is AddGroup for many groups at once, with an error (or nil)
// per group, in order: they are added in one step of the loop, so their
// first passes (a sole voter's election, the backlog's apply) are shared,
// one write and one fsync for all of them. A node restarting with 1,000
// partitions added them one by one, a pass and an fsync each, every pass
// over every group added so far.
func (h *Host) AddGroups(gcs []GroupConfig) []error {
	errs := make([]error, len(gcs))
	recovered := make([]chan struct{}, len(gcs))
	err := h.do(func() error {
		for i, gc := range gcs {
			if gc.ID == 0 || gc.SM == nil {
				errs[i] = errors.New("raftlog: AddGroup needs an ID and a state machine")
				continue
			}
			g, err := h.addGroup(gc)
			if g != nil {
				recovered[i] = g.recovered
			}
			errs[i] = err
		}
		return nil
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, ch := range recovered {
		if errs[i] != nil || ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-h.done:
			errs[i] = errors.Join(ErrStopped, h.Err())
		}
	}
	return errs
}

func (h *Host) addGroup(gc GroupConfig) (*group, error) {
	if _, ok := h.groups[gc.ID]; ok {
		return nil, fmt.Errorf("%w: %d", ErrGroupExists, gc.ID)
	}
	st, exists, err := openStorage(h.db, gc.ID)
	if err != nil {
		return nil, err
	}
	if !exists && gc.Join {
		// Added by a conf change: raft learns the configuration from the
		// leader's first message (a snapshot, or the log from index 1).
	} else if !exists {
		if len(gc.Voters) == 0 {
			return nil, fmt.Errorf("raftlog: group %d has no state and no voters to bootstrap", gc.ID)
		}
		b := h.db.NewBatch()
		if err := st.bootstrap(b, gc.Voters); err != nil {
			b.Close()
			return nil, err
		}
		if err := b.Commit(pebble.Sync); err != nil {
			b.Close()
			return nil, fmt.Errorf("raftlog: bootstrap group %d: %w", gc.ID, err)
		}
		b.Close()
	}
	election := h.cfg.ElectionTicks
	if failpoint.Enabled(failpoint.BugSlowElections) {
		election *= failpoint.SlowElectionsFactor // an injected bug: slow failover
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        h.cfg.NodeID,
		ElectionTick:              election,
		HeartbeatTick:             h.cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   st.applied,
		MaxSizePerMsg:             h.cfg.MaxSizePerMsg,
		MaxCommittedSizePerReady:  h.cfg.MaxCommittedBytesPerReady,
		MaxUncommittedEntriesSize: h.cfg.MaxUncommittedBytes,
		MaxInflightMsgs:           h.cfg.MaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		// A leader removed from the group (or demoted) steps down, rather
		// than leading a group it is no longer a member of.
		StepDownOnRemoval:         true,
		DisableProposalForwarding: !gc.ForwardProposals,
		Logger:                    newRaftLogger(h.log.Named("raft").With("group", gc.ID)),
	})
	if err != nil {
		return nil, fmt.Errorf("raftlog: group %d: %w", gc.ID, err)
	}
	g := &group{
		id: gc.ID, rn: rn, st: st, sm: gc.SM,
		recovered: make(chan struct{}), startCommit: st.hard.GetCommit(),
		counters: gc.Counters,
	}
	if g.counters == nil {
		g.counters = new(Counters)
	}
	if sn, ok := gc.SM.(Snapshotter); ok {
		st.snapData = sn.SnapshotData
	}
	h.groups[gc.ID] = g
	i, _ := slices.BinarySearch(h.order, gc.ID)
	h.order = slices.Insert(h.order, i, gc.ID)
	if v := st.conf.GetVoters(); len(v) == 1 && v[0] == h.cfg.NodeID {
		// A sole voter commits its whole log as soon as it wins (its
		// election entry commits everything before it), so recovery waits
		// for all of it: entries written but not yet committed at a crash
		// (never acknowledged) are applied before readers look.
		g.startCommit = st.last
		if err := rn.Campaign(); err != nil {
			return g, fmt.Errorf("raftlog: group %d campaign: %w", gc.ID, err)
		}
	}
	h.setStatus(g, nil)
	h.checkRecovered(g)
	h.log.Debug("group added", "group", gc.ID, "applied", st.applied, "last", st.last, "new", !exists)
	return g, nil
}

// checkRecovered closes g.recovered once its startup backlog is applied (or
// the group stopped: then nothing more will be applied).
func (h *Host) checkRecovered(g *group) {
	select {
	case <-g.recovered:
		return
	default:
	}
	if g.stopped || g.st.applied >= g.startCommit {
		close(g.recovered)
	}
}

// RemoveGroup stops group id if it runs and deletes all of its raft state
// (its log included) with one range deletion. It is not an error for the
// group to be stopped already or not to exist. The state machine's own keys
// are the caller's to delete.
func (h *Host) RemoveGroup(id uint64) error {
	return h.do(func() error {
		if g, ok := h.groups[id]; ok {
			delete(h.groups, id)
			if i, found := slices.BinarySearch(h.order, id); found {
				h.order = slices.Delete(h.order, i, i+1)
			}
			h.mu.Lock()
			delete(h.mu.status, id)
			h.mu.Unlock()
			if !g.stopped {
				g.stopped = true
				g.sm.Stopped(ErrStopped)
			}
		}
		start, end := groupSpan(id)
		// Through commit, so that a failed WAL write stops the host, as in
		// a pass, instead of panicking on the loop (the batch is left to
		// the collector then: Pebble may still hold it).
		b := h.db.NewBatch()
		if err := b.DeleteRange(start, end, nil); err != nil {
			return fmt.Errorf("raftlog: remove group %d: %w", id, err)
		}
		if err := commit(b, pebble.Sync); err != nil {
			h.opErr = fmt.Errorf("raftlog: remove group %d: %w", id, err)
			return h.opErr
		}
		return b.Close()
	})
}

func (h *Host) run() {
	defer close(h.done)
	ticker := time.NewTicker(h.cfg.TickInterval)
	defer ticker.Stop()
	for {
		h.idle.Store(true)
		select {
		case <-h.stop:
			h.shutdown(nil)
			return
		case <-ticker.C:
			h.tick()
		case <-h.kick:
		}
		h.idle.Store(false)
		if t := h.kickedAt.Swap(0); t != 0 {
			h.wakes.Add(time.Duration(time.Now().UnixNano() - t))
		}
		if err := h.iterate(); err != nil {
			h.log.Error("host stopped", "error", err)
			h.shutdown(err)
			return
		}
	}
}

// tick advances every group's logical clock by one tick.
func (h *Host) tick() {
	h.allDirty = true
	h.detectTick()
	for _, id := range h.order {
		if g := h.groups[id]; !g.stopped {
			g.rn.Tick()
		}
	}
}

// iterate runs queued operations, steps received messages, takes proposals
// and runs passes until nothing is left to do. An error means the store
// failed.
func (h *Host) iterate() error {
	for {
		h.runOps()
		if h.opErr != nil {
			return h.opErr
		}
		h.stepInbox()
		h.detectRun()
		h.takeProposals()
		more, err := h.pass()
		if err != nil {
			return err
		}
		if !more && !h.pending() {
			return nil
		}
	}
}

// pending reports whether ops or wakes arrived while the last pass ran.
func (h *Host) pending() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.mu.ops) > 0 || len(h.mu.wakes) > 0 || len(h.mu.inbox) > 0
}

// Deliver hands the host messages received from other nodes. It never
// blocks: they are stepped on the loop at its next pass. Messages for a
// group this node does not run are dropped (raft retries; the group may be
// about to start).
func (h *Host) Deliver(envs []Envelope) {
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return
	}
	if len(h.mu.inbox)+len(envs) > maxInbox {
		// The loop is behind (a flood, or a stalled disk): drop rather
		// than grow without bound; raft resends what matters.
		h.mu.Unlock()
		h.log.Warn("inbound raft messages dropped: the host is behind", "messages", len(envs))
		return
	}
	h.mu.inbox = append(h.mu.inbox, envs...)
	h.mu.Unlock()
	h.poke()
}

// maxInbox bounds the messages received and not yet stepped.
const maxInbox = 1 << 16

func (h *Host) stepInbox() {
	h.mu.Lock()
	inbox := h.mu.inbox
	h.mu.inbox = nil
	h.mu.Unlock()
	for _, env := range inbox {
		if env.Msg != nil {
			h.hear(env.Msg.GetFrom())
		}
		g, ok := h.groups[env.Group]
		if !ok || g.stopped || env.Msg == nil {
			continue
		}
		h.touch(g)
		h.guard(g, func() error {
			// Errors here are raft refusing a message (a local message
			// type, a step from an unknown peer): not fatal.
			if err := g.rn.Step(env.Msg); err != nil {
				h.log.Trace("step refused", "group", g.id, "type", env.Msg.GetType(), "from", env.Msg.GetFrom(), "error", err)
			}
			return nil
		})
	}
}

// ReportUnreachable tells every group that node could not be reached, so
// their leaders stop streaming entries to it optimistically. Never blocks.
func (h *Host) ReportUnreachable(node uint64) {
	h.async(func() {
		for _, id := range h.order {
			if g := h.groups[id]; !g.stopped {
				g.rn.ReportUnreachable(node)
			}
		}
	})
}

// ReportSnapshot tells group's leader whether the snapshot it sent to node
// arrived.
func (h *Host) ReportSnapshot(group, node uint64, failed bool) {
	h.async(func() {
		if g, ok := h.groups[group]; ok && !g.stopped {
			st := raft.SnapshotFinish
			if failed {
				st = raft.SnapshotFailure
			}
			g.rn.ReportSnapshot(node, st)
		}
	})
}

// TransferLeader asks group's leader (this node) to hand leadership to
// node. It returns at once; the transfer may fail silently (the target is
// behind, or a vote goes elsewhere), so callers watch Status.
func (h *Host) TransferLeader(group, node uint64) error {
	return h.do(func() error {
		g, ok := h.groups[group]
		if !ok || g.stopped {
			return fmt.Errorf("%w: %d", ErrNoGroup, group)
		}
		g.rn.TransferLeader(node)
		return nil
	})
}

// ProposeConfChange proposes a configuration change of group (this node
// must lead it). It returns once proposed; the change takes effect when it
// is applied, which Status shows.
func (h *Host) ProposeConfChange(group uint64, cc *pb.ConfChangeV2) error {
	return h.do(func() error {
		g, ok := h.groups[group]
		if !ok || g.stopped {
			return fmt.Errorf("%w: %d", ErrNoGroup, group)
		}
		if g.rn.BasicStatus().RaftState != raft.StateLeader {
			return fmt.Errorf("%w: group %d: not the leader", ErrProposalDropped, group)
		}
		return g.rn.ProposeConfChange(cc)
	})
}

// async queues fn to run on the loop without waiting for it.
func (h *Host) async(fn func()) {
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return
	}
	h.mu.ops = append(h.mu.ops, fn)
	h.mu.Unlock()
	h.poke()
}

func (h *Host) runOps() {
	h.mu.Lock()
	ops := h.mu.ops
	h.mu.ops = nil
	h.mu.Unlock()
	if len(ops) > 0 {
		h.allDirty = true // operations reach groups in many ways
	}
	for _, op := range ops {
		op()
	}
}

// touch marks g as changed: the next pass asks it for a Ready.
func (h *Host) touch(g *group) {
	if !g.dirty {
		g.dirty = true
		h.dirty = append(h.dirty, g)
	}
}

// takeDirty returns the groups the pass must ask for a Ready, in id order
// (all of them after a tick or an operation), and clears the marks.
func (h *Host) takeDirty() []*group {
	for _, g := range h.dirty {
		g.dirty = false
	}
	if h.allDirty {
		h.allDirty = false
		h.dirty = h.dirty[:0]
		all := make([]*group, 0, len(h.order))
		for _, id := range h.order {
			all = append(all, h.groups[id])
		}
		return all
	}
	list := slices.Clone(h.dirty)
	h.dirty = h.dirty[:0]
	slices.SortFunc(list, func(a, b *group) int { return cmp.Compare(a.id, b.id) })
	return list
}

func (h *Host) takeProposals() {
	h.mu.Lock()
	for id := range h.mu.wakes {
		if g, ok := h.groups[id]; ok && !g.wantPropose {
			g.wantPropose = true
			h.wanting = append(h.wanting, g)
		}
	}
	clear(h.mu.wakes)
	h.mu.Unlock()
	if len(h.wanting) == 0 {
		return
	}
	slices.SortFunc(h.wanting, func(a, b *group) int { return cmp.Compare(a.id, b.id) })
	wanting := h.wanting
	h.wanting = nil
	for _, g := range wanting {
		if h.groups[g.id] != g || !g.wantPropose || g.stopped {
			continue // removed, taken, or stopped
		}
		// A group without a known leader keeps its proposals queued in its
		// state machine until one is elected, rather than having raft drop
		// them. So does a group whose leader changed in a message stepped
		// since the last pass, until the pass tells its state machine
		// (LeaderChanged): proposals are only taken under the leader and
		// term it knows, else one forwarded to a newer leader would land
		// in a term its proposer never saw, and AppliedTerm would
		// wrongly call it lost.
		if g.leader == 0 || g.rn.BasicStatus().Lead != g.leader {
			h.wanting = append(h.wanting, g) // still wants: a later pass
			continue
		}
		g.wantPropose = false
		h.touch(g)
		h.guard(g, func() error {
			if pt, ok := g.sm.(ProposalTermer); ok {
				// A follower's proposals are forwarded: the leader they
				// reach may append them under a later term.
				var term uint64
				if bs := g.rn.BasicStatus(); bs.RaftState == raft.StateLeader {
					term = bs.GetTerm()
				}
				pt.Proposing(term)
			}
			h.proposed = g.sm.TakeProposals(h.proposed[:0])
			var dropped [][]byte
			var dropErr error
			for _, data := range h.proposed {
				if err := g.rn.Propose(data); err != nil {
					dropped, dropErr = append(dropped, data), err
				}
			}
			clear(h.proposed)
			if len(dropped) > 0 {
				g.counters.ProposalsDropped.Add(uint64(len(dropped)))
				g.sm.Dropped(dropped, dropErr)
			}
			return nil
		})
	}
}

// guard runs fn for group g; an error or a panic (raft panics on storage
// errors it cannot handle) stops that group alone.
func (h *Host) guard(g *group, fn func() error) {
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("raftlog: group %d: panic: %v", g.id, r)
			}
		}()
		return fn()
	}()
	if err != nil {
		h.stopGroup(g, err)
	}
}

func (h *Host) stopGroup(g *group, err error) {
	if g.stopped {
		return
	}
	g.stopped = true
	h.log.Error("group stopped", "group", g.id, "error", err)
	h.setStatus(g, err)
	h.checkRecovered(g)
	g.sm.Stopped(err)
}

// pass persists and applies the Ready of every group that has one, in one
// Pebble batch committed with one WAL sync. It reports whether some group
// has more to do. An error means the store failed and the host must stop.
//
// A group that fails while its Ready is written (a raft panic, an apply
// error) stops alone; what it already wrote stays in the batch, which is
// safe: entries are written before the HardState that could commit them,
// and apply rows without the applied index that covers them are rewritten
// identically when the group is next opened.
func (h *Host) pass() (more bool, err error) {
	var readies []*group
	var rds []raft.Ready
	mustSync := false
	b := h.db.NewBatch()
	defer b.Close()
	for _, g := range h.takeDirty() {
		if g.stopped || h.groups[g.id] != g || !g.rn.HasReady() {
			continue
		}
		var rd raft.Ready
		h.guard(g, func() error {
			rd = g.rn.Ready()
			return h.persist(g, b, rd)
		})
		if g.stopped {
			continue
		}
		// Only new entries, votes and snapshots must be synced before
		// answering: a commit index and apply rows lost in a crash are
		// rebuilt from the log. (Raft's MustSync leaves snapshots out, but
		// the follower acknowledges the snapshot's index; losing it would
		// leave the follower's log behind what the leader counts on.)
		mustSync = mustSync || rd.MustSync || !raft.IsEmptySnap(rd.Snapshot)
		readies = append(readies, g)
		rds = append(rds, rd)
	}
	if len(readies) == 0 {
		return false, nil
	}
	if failpoint.Enabled(failpoint.BugFollowerNoFsync) && !slices.ContainsFunc(readies, func(g *group) bool {
		return g.leader == h.cfg.NodeID && len(rds[slices.Index(readies, g)].Entries) > 0
	}) {
		mustSync = false // an injected bug: a follower acknowledges entries it has not synced
	}
	opts := pebble.NoSync
	if mustSync && !failpoint.Enabled(failpoint.BugAckBeforeFsync) {
		opts = pebble.Sync
	}
	start := time.Now()
	err = commit(b, opts)
	if mustSync {
		h.syncs.Add(time.Since(start))
	}
	if err != nil {
		// No retry of a failed write or fsync: what it covered is unknown.
		return false, fmt.Errorf("raftlog: commit pass: %w", err)
	}
	for i, g := range readies {
		rd := rds[i]
		h.guard(g, func() error {
			h.setStatus(g, nil)
			if g.applied {
				g.applied = false
				g.sm.Durable()
			}
			for _, m := range rd.Messages {
				if m.GetType() == pb.MsgSnap {
					g.counters.SnapshotsSent.Add(1)
				}
				h.outbox = append(h.outbox, Envelope{Group: g.id, Msg: m})
			}
			if rd.SoftState != nil && rd.SoftState.Lead != g.leader {
				if rd.SoftState.Lead != 0 {
					g.counters.LeaderChanges.Add(1)
				}
				g.leader = rd.SoftState.Lead
				g.sm.LeaderChanged(g.leader, g.rn.BasicStatus().GetTerm())
				if g.leader != 0 && g.wantPropose {
					more = true
				}
			}
			g.rn.Advance(rd)
			g.st.trimCacheTo(h.cacheFloor(g), h.cfg.EntryCacheBytes)
			h.setStatus(g, nil)
			h.checkRecovered(g)
			if g.rn.HasReady() {
				more = true
				h.touch(g)
			}
			return nil
		})
	}
	if len(h.outbox) > 0 {
		if h.cfg.Transport != nil {
			h.cfg.Transport.Send(h.outbox)
		}
		clear(h.outbox)
		h.outbox = h.outbox[:0]
	}
	return more, nil
}

// persist writes one Ready into b and applies its committed entries.
func (h *Host) persist(g *group, b *pebble.Batch, rd raft.Ready) error {
	if !raft.IsEmptySnap(rd.Snapshot) {
		sn, ok := g.sm.(Snapshotter)
		if !ok {
			return fmt.Errorf("raftlog: group %d: received a snapshot its state machine cannot restore", g.id)
		}
		if err := g.st.installSnapshot(b, rd.Snapshot); err != nil {
			return err
		}
		idx := rd.Snapshot.GetMetadata().GetIndex()
		if err := sn.RestoreSnapshot(b, idx, rd.Snapshot.GetData()); err != nil {
			return fmt.Errorf("raftlog: group %d restore snapshot at %d: %w", g.id, idx, err)
		}
		g.applied = true
		h.log.Debug("installed snapshot", "group", g.id, "index", idx) // per group: routine, like raft's own messages
	}
	if err := g.st.append(b, rd.Entries); err != nil {
		return err
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := g.st.setHardState(b, rd.HardState); err != nil {
			return err
		}
	}
	if len(rd.CommittedEntries) == 0 {
		return nil
	}
	var normal []*pb.Entry
	for _, e := range rd.CommittedEntries {
		switch e.GetType() {
		case pb.EntryNormal:
			if len(e.GetData()) > 0 {
				normal = append(normal, e)
			}
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			cc, err := decodeConfChange(e)
			if err != nil {
				return err
			}
			if err := g.st.setConf(b, e.GetIndex(), g.rn.ApplyConfChange(cc)); err != nil {
				return err
			}
		}
	}
	if len(normal) > 0 {
		if err := g.sm.Apply(b, normal); err != nil {
			return fmt.Errorf("raftlog: group %d apply: %w", g.id, err)
		}
	}
	g.applied = true
	lastEnt := rd.CommittedEntries[len(rd.CommittedEntries)-1]
	applied := lastEnt.GetIndex()
	if at, ok := g.sm.(AppliedTermer); ok {
		at.AppliedTerm(lastEnt.GetTerm())
	}
	if lt, ok := g.sm.(LogTruncator); ok {
		if idx := min(lt.TruncateLog(), applied); idx > g.st.truncIndex {
			if err := g.st.truncatePrefix(b, idx); err != nil {
				return fmt.Errorf("raftlog: group %d truncate log: %w", g.id, err)
			}
		}
	}
	return g.st.setApplied(b, applied)
}

func decodeConfChange(e *pb.Entry) (pb.ConfChangeI, error) {
	if e.GetType() == pb.EntryConfChange {
		var cc pb.ConfChange
		if err := unmarshal(e.GetData(), &cc); err != nil {
			return nil, err
		}
		return &cc, nil
	}
	var cc pb.ConfChangeV2
	if err := unmarshal(e.GetData(), &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// cacheFloor is the highest index the group's entry cache may drop: applied
// entries that no follower still needs.
func (h *Host) cacheFloor(g *group) uint64 {
	floor := g.st.applied
	if g.rn.BasicStatus().RaftState == raft.StateLeader {
		g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id != h.cfg.NodeID && pr.Match < floor {
				floor = pr.Match
			}
		})
	}
	return floor
}

func (h *Host) setStatus(g *group, err error) {
	bs := g.rn.BasicStatus()
	s := Status{
		ID: g.id, Leader: bs.Lead, Term: bs.GetTerm(), Commit: bs.GetCommit(),
		Applied: g.st.applied, Last: g.st.last, First: g.st.truncIndex + 1, Err: err,
		Leading: bs.RaftState == raft.StateLeader,
		Voters:  append([]uint64(nil), g.st.conf.GetVoters()...), VotersOutgoing: append([]uint64(nil), g.st.conf.GetVotersOutgoing()...),
		Learners: append([]uint64(nil), g.st.conf.GetLearners()...),
	}
	if s.Leading {
		s.Match = make(map[uint64]uint64)
		g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { s.Match[id] = pr.Match })
	}
	h.mu.Lock()
	if old, ok := h.mu.status[g.id]; ok && old.Err != nil {
		s.Err = old.Err
	}
	h.mu.status[g.id] = s
	h.mu.Unlock()
}

// shutdown stops every group; err is the fatal error, if any.
func (h *Host) shutdown(err error) {
	h.mu.Lock()
	if err != nil && h.mu.err == nil {
		h.mu.err = err
	}
	h.mu.closed = true
	ops := h.mu.ops
	h.mu.ops = nil
	if err != nil {
		// Status must not go on saying this node leads: callers that
		// watch it (leadership hand-off, health) would wait on groups
		// that will never move again.
		for id, s := range h.mu.status {
			s.Leading, s.Match = false, nil
			if s.Err == nil {
				s.Err = err
			}
			h.mu.status[id] = s
		}
	}
	h.mu.Unlock()
	// Ops still queued get the stop error through do's done path.
	_ = ops
	stopErr := ErrStopped
	if err != nil {
		stopErr = errors.Join(ErrStopped, err)
	}
	for _, g := range h.groups {
		if !g.stopped {
			g.stopped = true
			g.sm.Stopped(stopErr)
		}
	}
}
