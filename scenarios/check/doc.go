// Package check judges a scenario run's history (scenarios/history): each
// checker is a pure function from a *history.History to a Verdict saying
// which of Rewind's promises held and, for each that did not, the records
// and publishes involved. Nothing here talks to a server or reads a clock,
// so a verdict can be recomputed from a saved history, and the tests prove
// each checker on synthetic histories: a valid one passes, and a copy
// corrupted in each way the checker guards against fails.
//
// # Using it
//
//  1. Record the run in a history.History, following the conventions
//     below (they are the contract: a runner that breaks one gets false
//     violations or weaker checks).
//  2. Call All for every verdict, in a fixed order, and Summary for the
//     figures of the report's table.
//  3. The run failed if any verdict is not OK. A verdict with Skipped set
//     is OK and says why it judged nothing (for example, no reads were
//     recorded); the report should show it.
//
// Checkers are safe to call from several goroutines on one history as
// long as nobody modifies it (and the topics' filter predicates are safe
// to call concurrently). A verdict keeps the first MaxViolations
// violations; Stats["violations"] counts all of them.
//
// # The checkers
//
// All runs them in this order; each function's comment lists its Stats.
//
//   - Log: what the replicas hold against what publishers were told. An
//     acknowledged record is on every replica once, at the offset its
//     acknowledgement named; a failed publish is nowhere; an unknown
//     outcome is stored at most once; offsets are dense and replicas agree.
//   - Appends: the conditional appends of the bank workload against each
//     key's final history. Versions are dense from 0, each accepted append
//     became the version after the one it expected (no two claimed the
//     same: no lost update), nothing acknowledged is lost, nothing refused
//     is stored, refusals name real versions, no account goes below 0, and
//     every replica agrees on the versions. Skipped without conditional
//     appends.
//   - Reads: every unfiltered replay returned exactly the records its start
//     and (exclusive) stop name, in order.
//   - Follows: every live follower saw each record once, in order, across
//     reconnects and resumes from its tokens.
//   - Groups: no commit accepted from a fenced generation, no commit moving
//     back except by a reset, every committed offset delivered, a reset
//     re-read exactly from its target.
//   - Filters: a filtered replay returned exactly the records of the
//     unfiltered range that the filter's predicate accepts (a transformed
//     one, what the transform makes of them).
//   - RaftSafety: at most one leader per raft group and term.
//   - Gauntlet: every malformed request got a client error from a node that
//     stayed up.
//   - Liveness: each partition's failover time in each fault (the longest
//     it went without an acknowledged publish), recovery after each fault
//     and publish p99 during and after it, against the scenario's bounds;
//     skipped when no bounds are set (the runner's --skip-bounds), since
//     they depend on the machine's speed.
//
// # The reference
//
// Replays and followers are compared with one replica per partition, its
// reference: the replica with the highest End, then the lowest Start, then
// the lowest node ID, cut at its first gap. The Log checker compares every
// other replica with it, so a reference that is wrong is reported there.
// Records are equal when their Offset, Key, Value, IdemKey and AppendTime
// (the same instant, to the nanosecond) are; the runner must fill all of
// them, from the record as the server returns it.
//
// Retention: records below the reference's Start may have been removed
// after a replay or a group member read them. Such records are checked
// against the acknowledgements (a record at an acknowledged offset must
// carry that publish's value and idempotency key) and against the
// publishes (its value must have been attempted), and counted in the
// verdict's Stats["unverified"]. An acknowledged record is not required on
// a replica whose Start is past its offset (Stats["retention_exempt"]).
// Compaction is not supported: a compacted topic has gaps in its offsets,
// which the Log checker reports; scenarios use topics with the delete
// policy only.
//
// # Replay positions
//
// A Read names its start (From) and stop (To) as the Go client does; the
// checkers resolve them against the reference exactly as the broker does
// (docs/design.md §7):
//
//   - From AtOffset N, or AtMessageID with Offset N (a message ID of the
//     read's own partition): the first record is offset N.
//   - From Earliest: the log start when the read began, which is the
//     reference's Start or, if retention has moved since, below it.
//   - From AtTime T: the first record whose AppendTime is at or after T. A
//     T after every record starts at the end and then skips later records
//     stamped before T.
//   - From LastN N: offset max(log start, end − N), where end is the
//     partition's end when the stream started: at least EndAtStart. A read
//     to the end then holds at least N records, fewer only when it began
//     at the log start (more when a publish landed between the broker's
//     reading of the end for the start and for the stop).
//
// Stops are exclusive (half-open ranges), so one range's stop is the next
// one's start:
//
//   - To AtOffset S, or AtMessageID with Offset S: every offset below S, none
//     at or after it. A stop beyond the end waits for the records, so the
//     read holds all of them up to S (or up to the reference's end).
//   - To AtTime T: every record appended before T, none at or after T.
//   - To None (the client's "end"): up to the end when the stream started.
//     The runner sets EndAtStart to the partition's end offset read just
//     before starting the replay (never later than the stream's own start),
//     and the read must reach at least EndAtStart; it may go further, but
//     only with the reference's records.
//
// Earliest and LastN cannot stop a replay, and None cannot start one: such
// a read is counted in Stats["unjudged"] and not judged. A read with Err
// set is judged as a prefix: what it got must be where the full read
// would have started and in order, but it may stop anywhere. A live
// follower (Follow) is judged like a failed read from offset From: a
// contiguous run of the reference's records beginning exactly at From,
// each once, across its reconnects.
//
// A filtered read (Read.Filter set) is judged by Filters, not Reads: it
// must equal the topic's predicate (history.Topic.Filters) applied to the
// reference over the same range. A time or offset bound on it is still
// judged on the records, but for LastN only the records from the first
// one returned are judged (which records the broker skipped before it is
// unknown without the stream's end).
//
// # Groups
//
// Group events are taken in the order of their times: At, except that a
// commit (Committed or CommitRefused) is placed at Sent when the runner
// recorded it. Events with equal times keep the history's order. The
// runner must set Generation on every event (Delivered: the generation of
// the assignment being read; Reset and Seeked: the generation the reset
// created) and should set Sent on commits: without it a commit answered
// late looks sent after the rebalance that fenced it.
//
// Resets are placed by generation, not by time: the reset of generation G
// starts an era of the partition, and every event of a generation at or
// above G (below the next reset's) belongs to it, whenever it was
// recorded. The members hear of a reset before the runner gets its
// answer, so they may read and commit from the target before the Reset
// event's At. Within an era commits never move back and the first
// delivery is the target; its fence is raised at the Reset's At (a commit
// from an older generation sent after the answer must be refused). A
// reset whose answer never came is a ResetUnknown: a later Seeked at a
// generation no Reset names, or an assignment below the last commit at a
// generation newer than the era's commits, is taken for its outcome, once
// per ResetUnknown; a Seeked no reset
// explains is a violation. A reset of unknown generation (0) is placed at
// its At, so a delivery from before the member's seek that is recorded
// after it is taken for the first delivery after the reset.
//
// # Liveness
//
// A fault's failover time on a partition of the first topic is the longest
// gap between the End of two consecutive acknowledged publishes of that
// partition, over the window from the fault's Start (the first gap starts
// there) to the first acknowledgement at or after its End. It is what a
// publisher of the partition waited, and it is bounded by its maximum over
// every fault and partition. A fault's recovery is the time from its End to
// the End of the first acknowledged publish (any partition) ending at or
// after it. Publish latency is End − Start of acknowledged publishes,
// grouped by Start into the fault ([Start, End)) and the window of the
// same length after it. Percentiles are nearest-rank. The figures are
// reported in Stats even when the scenario sets no bounds (the verdict is
// then OK and Skipped says so).
package check
