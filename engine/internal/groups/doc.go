// Package groups is the coordinator of server-managed subscriber groups.
//
// A member joins a group on a topic by opening a stream; the coordinator
// assigns it a share of the topic's partitions (engine/internal/assign:
// balanced, counts differing by at most one, and sticky) and steers its
// stream through a control channel (stream.Options.Control). A member
// leaves when its stream ends, and its partitions move to the others.
// Clients need no group protocol: a browser or a curl-like client is a full
// member, and a reset can steer live streams.
//
// # Where it runs
//
// One Coordinator per node, but only the coordinating node uses it: the
// node running alone, or in a cluster the metadata group's leader
// (broker.coordinates). Group calls on another node are refused with the
// coordinator's address, so a group's members meet on one node, where
// assignments and generations live. Its state is not replicated on its
// own: members are the streams open on this node, and everything durable
// (committed offsets, fences, reset epochs) is a row of each partition,
// written by a raft command in that partition's own log (partition.GroupOp,
// key 'c'). A new coordinator (after a leadership change or a restart)
// loads a group from those rows (loadLocked: the generation is the highest
// fence found, the epoch the highest epoch).
//
// # What one goroutine owns
//
// Nothing runs on its own: Join, Leave, Commit, Reset and Delete run on
// the caller's goroutine (a stream's, or an RPC's). Commit proposes to its
// partitions in parallel, one goroutine per partition, and waits for all.
// The lock order is Coordinator.mu, then group.mu. group.mu is held across
// raft commands, so a rebalance or a reset is serialized per group;
// Coordinator.mu never is.
//
// # A rebalance
//
// Every join and leave bumps the generation and, in this order:
//
//  1. tells the members losing partitions to stop reading them, and waits
//     up to Config.RevokeTimeout (2 s) for their streams to confirm (a
//     member blocked on a slow client may take longer; step 2 still
//     protects the commits);
//  2. raises the fence of every partition that changes owner to the new
//     generation, with a raft command in that partition's log;
//  3. sends every member its new assignment and generation, and starts the
//     gained partitions at the group's committed offset (clamped to the
//     stored range) or, with none, at the member's start policy
//     (JoinSpec.Start).
//
// # Generations and fencing
//
// A member commits with the generation of its latest assignment. At apply
// a commit whose generation is below the partition's fence is refused
// (FailedPrecondition at the edge) and changes nothing; otherwise it
// records the offset and raises the fence to its generation. Because fences
// and commits go through the same log, "the partition moved, then the old
// owner's late commit arrived" is decided identically on every replica. A
// generation the coordinator never issued is ErrUnknownGeneration, so a
// buggy client cannot fence everyone out. A commit past the end of this
// node's replica waits up to Config.CommitCatchUp (2 s) for the replica to
// reach it: the replica may be a follower trailing the leader the member
// read from.
//
// Invariant: a generation is never issued twice (a commit carries the
// generation but no member id). See "Known limits".
//
// # Reset (group replay)
//
// Reset computes a plan per partition (current committed offset, new
// offset, records to re-read, lag, whether the target was clamped to the
// stored range) for a Target: earliest, latest, an offset, a time, a
// message ID (a point in the total order of cursor), a duration ago, or a
// shift by ±N. A dry run returns only the plan. Executed, it bumps epoch
// and generation, writes each new offset with the new fence and epoch (one
// raft command per partition, in order), then gives every live member an
// assignment with the new generation and, for the partitions it owns, a
// seek: its stream drops the pending batch, moves the cursor, says
// replay_started{epoch, partition, from_offset} and continues, with no
// reconnect. Commits from before the reset carry the old generation and
// are fenced. A group with no committed offset and no member on the topic
// is ErrNoGroup unless the caller asks to create it.
//
// A reset can fail midway, after partitions before k were reset:
//
//  1. the partitions before k are at the new generation, so members are
//     still told it and seek on those partitions (else every commit of
//     theirs there would be fenced until the next rebalance);
//  2. partition k's outcome is unknown (a lost leader's successor may still
//     commit the command); its members read on where they were;
//  3. the error names the partitions reset and says to run the reset again,
//     which settles every partition.
//
// When the first partition fails nothing stored the new generation, and
// members are not told it: the coordinator may be failing because it lost
// the metadata leadership, and the next coordinator could issue the same
// number.
//
// # Delivery
//
// At-least-once: a member commits after it processed records, and a crash
// or a rebalance re-delivers what was processed but not committed. The Go
// client's graceful Close commits what it handed to the application before
// its stream ends (the stream's end is the member's leave, after which the
// commit would be fenced), and drops commits due for a partition when it
// sees replay_started, so it never undoes a reset.
//
// # Groups held by another protocol
//
// The Kafka listener runs Kafka's consumer group protocol itself and
// stores its commits here (Commit, at Generation). While a Kafka group has
// members it holds the name (Hold): Join of the name is refused with
// ErrHeld, a name with members cannot be held, and Live lists the
// holder's members (Outside) after this coordinator's. The counts of
// members and holds per name are under Coordinator.mu, so a Join and a
// Hold of one name never both succeed.
//
// # Caller's duties
//
//  1. Call Join with the topic's partitions and a start policy; the first
//     assignment is waiting in Member.Control when Join returns. Pass
//     Member.Control to the member's stream.
//  2. Call Leave when that stream ends, whatever ended it.
//  3. Route commits, resets, deletes and descriptions of a group to the
//     coordinating node only; call Forget when a topic is deleted and
//     CloseAll when this node stops coordinating (its members' streams end
//     with Unavailable, and they rejoin the new coordinator).
//
// # Known limits
//
//   - A generation handed out by an old coordinator without being stored in
//     any fence (a rebalance in which no partition changed owner, cut off
//     just then) can be issued again by the next one, which starts past the
//     fences its local replicas hold; stress runs found it. The fix is to
//     make generations unique by construction (the metadata raft term in
//     their high bits) and to fence every partition of a group on takeover.
//   - One node coordinates every group, so group members' streams all run
//     there; per-group coordinators chosen by hashing the group name are
//     the scaling step (docs/design.md §16).
//
// Tested by the datadriven rebalance scripts (testdata/), random histories
// of joins, leaves, commits and resets checked against ownership,
// generation and fencing invariants; in engine/internal/broker, a
// porcupine check that concurrent commits, resets and reads of one
// partition form a linearizable history of a fenced register.
package groups
