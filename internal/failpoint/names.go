// Package failpoint injects faults into a Rewind node for the chaos
// scenarios (`rewind scenario`, docs/scenarios.md): storage faults through a
// Pebble filesystem wrapper, a clock offset, and deliberate bugs that prove
// the scenario checkers catch what they claim to catch.
//
// Failpoints exist only in a binary built with the build tag `failpoints`
// (`go build -tags failpoints ./cmd/rewind`). In a normal build Available
// is false, every function here is a constant the compiler folds away
// (Enabled is false, FS returns its argument), and /debug/failpoints
// answers 404: the normal binary has none and pays nothing for them.
//
// In a tagged build, failpoints are set
//
//  1. at startup from the environment: REWIND_FAILPOINTS="name=value;name2"
//     (a name without a value is set to "on"); a bad list stops the process
//     with a message naming the known failpoints;
//  2. at run time over HTTP on the node's own port: GET /debug/failpoints
//     lists the active ones as JSON, POST or PUT with a form body
//     name=value sets one (several with several pairs), DELETE
//     /debug/failpoints?name=NAME (or /debug/failpoints/NAME) clears one,
//     DELETE without a name clears all;
//  3. in tests, with Set and Clear.
//
// Every failpoint is named by a constant below; Set refuses other names
// and values its failpoint cannot use. The registry is safe for concurrent
// use; Enabled costs one atomic load while no failpoint is active.
package failpoint

// Storage faults act through the filesystem wrapper FS applies to the
// node's Pebble store (fs.go). They act on the next operation after they
// are set; clearing one stops it.
const (
	// FsyncEIO makes every Sync, SyncData and SyncTo fail with EIO, as a
	// disk that lost a write does. Pebble treats a failed WAL sync as
	// fatal: the node stops serving (health NOT_SERVING) and must be
	// restarted.
	FsyncEIO = "fsync-eio"
	// ENOSPC makes every write fail with ENOSPC and the disk report no
	// free space (GetDiskUsage), as a full disk does: publishes are refused
	// with ResourceExhausted by the free-space check; a write that gets
	// through anyway (a follower applying) fails and stops the node.
	ENOSPC = "enospc"
	// ENOSPCWrites is ENOSPC, except that the disk reports free space
	// until a write has failed: the free-space check cannot refuse
	// publishes first, so a write is sure to meet the full disk and wait
	// (a test of that wait, which ENOSPC alone races against the check).
	ENOSPCWrites = "enospc-writes"
	// FsyncDelay delays every sync by its value, a Go duration (for
	// example "200ms"; "on" means 200 ms), then syncs: a slow disk.
	FsyncDelay = "fsync-delay"
	// TornWrite cuts the next write to a WAL file (*.log) short: half of
	// it reaches the file, then the process kills itself with SIGKILL, as
	// a crash in the middle of a write leaves the log. It fires once and
	// clears itself. Only the WAL is targeted: every other file Pebble
	// writes is synced before anything refers to it, so a torn write there
	// is invisible after a restart. With PowerLoss also set, the half is
	// held like any unsynced write and lost with it.
	TornWrite = "torn-write"
	// BitFlip flips one bit in the middle of the next block written to a
	// table (*.sst) after the write: Pebble's block checksum must catch it
	// when the block is read (a read fails with a corruption error; the
	// record is never delivered wrong). It fires once and clears itself.
	// Tables, not the WAL, because bit rot hits data at rest, which is in
	// tables; a flipped bit in the WAL's unsynced tail is what a torn
	// write already covers (Pebble reads it as the end of the log).
	BitFlip = "bitflip"
	// PowerLoss keeps every write in process memory until the file is
	// synced: reads through the store see the unsynced bytes, the disk
	// does not, so a `kill -9` drops exactly the file data a power cut
	// would. Directory operations (create, rename, remove, link) still go
	// to the disk at once, as if each were followed by a directory sync:
	// a power cut could also undo those, and Pebble syncs its directories
	// before relying on them, so this mode is milder there than a real
	// power cut. A graceful exit in this mode drops unsynced data too.
	// Clearing it writes what is held (without syncing) on the next write
	// or sync of each file.
	PowerLoss = "power-loss"
)

// ClockOffset shifts the broker clock (append times, group commit times,
// dedupe windows) by its value, a signed Go duration ("+5m", "-5m",
// "90s"). Append times stay non-decreasing per partition and time seeks
// exact whatever the clock does (package partition, "Offsets and time").
const ClockOffset = "clock-offset"

// Injected bugs: each breaks one guarantee on purpose, at the point in the
// real code path where the guarantee is kept, so that a test can show the
// checker for that guarantee fails.
const (
	// BugAckBeforeFsync commits raft's log without fsync (raftlog): a
	// publish is acknowledged once a quorum has its entry written but not
	// durable, so a power loss on a quorum loses acknowledged records.
	BugAckBeforeFsync = "bug-ack-before-fsync"
	// BugSkipDedupe makes the leader ignore idempotency keys when it
	// proposes (partition): a resend is stored again, at a new offset.
	BugSkipDedupe = "bug-skip-dedupe"
	// BugSkipConditions makes apply accept every conditional append
	// without checking its conditions (partition): two writers that
	// loaded the same version both append, one update is lost.
	BugSkipConditions = "bug-skip-conditions"
	// BugDeliverTwice makes each stream deliver the first record of its
	// first records event twice (stream): the record is repeated at the
	// end of that event, as a redelivery after a reconnect would.
	BugDeliverTwice = "bug-deliver-twice"
	// BugSwapRecords makes each stream deliver the first two records of
	// its first records event with two or more records in swapped order
	// (stream).
	BugSwapRecords = "bug-swap-records"
	// BugAcceptFencedCommit makes a partition accept a group commit from a
	// generation older than its fence (partition).
	BugAcceptFencedCommit = "bug-accept-fenced-commit"
	// BugSkipReplayedRecord makes a stream that is replaying history (its
	// cursor not caught up) skip one record in a thousand, those at
	// offsets 17, 1017, 2017, … (stream): a read-path bug, the data on
	// disk intact.
	BugSkipReplayedRecord = "bug-skip-replayed-record"
	// BugSkipApplyDedupe leaves out the apply-time idempotency re-check
	// (partition): a resend that reaches a new leader while the first
	// attempt's entry is still uncommitted in the old term's log is
	// proposed again (the leader's check cannot see that entry) and both
	// are stored.
	BugSkipApplyDedupe = "bug-skip-apply-dedupe"
	// BugFollowerNoFsync makes a node skip the fsync of a raft pass in
	// which it leads none of the groups whose new entries it writes
	// (raftlog): a follower acknowledges entries it has not made durable,
	// so a power loss of the followers can lose records a quorum
	// acknowledged.
	BugFollowerNoFsync = "bug-follower-no-fsync"
	// BugSlowElections multiplies the raft election timeout by
	// SlowElectionsFactor and turns the failure detector off (raftlog):
	// every failover takes that much longer.
	BugSlowElections = "bug-slow-elections"
)

// SlowElectionsFactor is how much BugSlowElections slows elections.
const SlowElectionsFactor = 5

// ResetFail makes a group reset fail on one partition, its value (a
// partition number), before the reset's command for that partition is
// proposed, as a reset whose partition leader is lost fails: the
// partitions before it in the reset are reset, it and the ones after it
// are not (engine/internal/groups).
const ResetFail = "reset-fail"

// Pause points hold the goroutine that reaches them at one step of the
// tiered storage mover (engine/internal/partition/tier.go), so that a test
// or a scenario can crash the node, or change the partition's leader,
// exactly there. While one is set, the first goroutine to reach it waits
// until it is cleared; others pass (a pause holds one mover, not every
// node of an in-process cluster). Reached tells when a goroutine waits. In
// the order the mover takes the steps:
const (
	// TierUploaded: the segment object is written to the store, its
	// kindTier command not yet proposed.
	TierUploaded = "tier-uploaded"
	// TierRecording: the kindTier command is committed in the raft log and
	// being applied here (inside Apply: the raft loop of the node is held,
	// nothing of this pass is durable yet).
	TierRecording = "tier-recording"
	// TierRecorded: the kindTier command is applied here and its proposer
	// answered (what apply wrote may still be unsynced: the raft log has
	// the command); the local truncate not yet proposed.
	TierRecorded = "tier-recorded"
	// TierTruncatingLocal: the local truncate is committed and being
	// applied here (inside Apply, as TierRecording).
	TierTruncatingLocal = "tier-truncating-local"
	// TierTruncatedLocal: the local truncate is applied here and its
	// proposer answered (as TierRecorded).
	TierTruncatedLocal = "tier-truncated-local"
)

// EnvVar is the environment variable read at startup in a tagged build.
const EnvVar = "REWIND_FAILPOINTS"

// Path is where a tagged node serves Handler.
const Path = "/debug/failpoints"

// Names lists every failpoint, sorted.
func Names() []string {
	return []string{
		BitFlip, BugAcceptFencedCommit, BugAckBeforeFsync, BugDeliverTwice, BugFollowerNoFsync, BugSkipApplyDedupe, BugSkipConditions,
		BugSkipDedupe, BugSkipReplayedRecord, BugSlowElections, BugSwapRecords,
		ClockOffset, ENOSPC, ENOSPCWrites, FsyncDelay, FsyncEIO, PowerLoss, ResetFail, TierRecorded, TierRecording, TierTruncatedLocal,
		TierTruncatingLocal, TierUploaded, TornWrite,
	}
}
