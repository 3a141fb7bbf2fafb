// Package raftlog runs many etcd raft groups on one node over one Pebble
// store. It knows nothing of topics or records: an entry is opaque bytes and
// a group's meaning lives in the StateMachine the caller plugs in.
//
// # Design
//
// One loop goroutine owns every raft.RawNode. Each pass of the loop:
//
//  1. runs queued operations (AddGroup, RemoveGroup) and ticks;
//  2. asks every woken group's StateMachine for its proposals
//     (TakeProposals) and proposes them, so a state machine can coalesce
//     everything queued since the last pass into one entry;
//  3. for every group with a Ready (it asks only the groups whose state
//     changed since the last pass: a message stepped, proposals taken, a
//     Ready left over; every group after a tick or an operation, so a
//     change nothing marked waits one tick at most): writes its entries and
//     HardState, and
//     applies its committed entries (StateMachine.Apply), all into the one
//     Pebble batch of the pass, which also records each group's new applied
//     index;
//  4. commits that batch with one WAL sync for all groups (no sync when no
//     group has new entries or votes: a commit index or apply rows lost in
//     a crash are rebuilt from the log);
//  5. calls StateMachine.Durable, sends messages, and advances each group.
//
// So N groups with traffic cost one fsync per pass, not N, and a crash
// between writing and applying can neither lose nor repeat an apply; and
// a pass costs the groups that have work, not the groups the node runs (a
// proposal beside 10,000 idle groups took 8–12 ms when every pass asked
// every group, 0.1–0.2 ms now: BenchmarkProposeBesideIdleGroups).
//
// # Storage
//
// The raft log is the only copy of an entry (see keys.go for the layout).
// Each group keeps its unapplied tail in memory, so applying and building
// MsgApp read no disk in the steady state. Snapshots carry metadata only:
// state machines rebuild from the log.
//
// # Failover
//
// Raft runs with CheckQuorum and PreVote: a follower that heard from its
// leader within the election timeout refuses to vote, so a lost leader alone
// would cost 1–2 election timeouts (10–20 ticks). A failure detector between
// members cuts that short (detector.go): every message received from a node
// is a sign of life, and a node that leads groups here and has sent nothing
// for Config.FailureDetectTicks of this host's ticks (default ElectionTicks/2)
// is taken for dead. Every local follower of a group it leads forgets it
// (RawNode.ForgetLeader) and campaigns after a stagger by its rank among the
// group's other voters, so a new leader is elected a tick or three after the
// window. It sends nothing of its own: a live leader heartbeats every group
// every tick anyway. Silence is counted in the detecting host's own ticks,
// so a stall of this node (a paused process, a slow disk, a starved CPU)
// never makes a peer look silent; a suspicion fires at most once per peer
// per window, and Host.DetectorStats counts them.
//
// Forgetting a leader that is only paused is safe because nothing here
// relies on a leader lease: raft's ReadOnlyLeaseBased is never set (raft
// ignores ForgetLeader under it), the host issues no ReadIndex, and no
// write is acknowledged without a quorum. A quorum must still agree to the
// new leader (a follower still hearing the old one refuses the pre-vote),
// and a paused leader that resumes meets the higher term and steps down;
// what it appended without a quorum is replaced, and its proposers learn
// it was lost (AppliedTermer). What a lease would have bought is a bound
// on stale reads: a leader cut off from the others keeps believing it
// leads until CheckQuorum deposes it (one to two election timeouts), and
// a caller that serves reads from "the leader's" applied entries can show
// a view missing what the new leader acknowledged meanwhile. That window
// existed before the detector (raft's randomised timeouts let followers
// elect within it too); the detector elects earlier inside it.
//
// # Caller's duties
//
//  1. Open the Pebble store and keep its keys starting with 'r' for the host.
//  2. Open a Host, Start it, then AddGroup for every group this node runs.
//  3. To propose, queue data in the state machine and call Wake; answer the
//     proposer from Durable once Apply has seen its entry.
//  4. Close the Host before the store.
package raftlog
