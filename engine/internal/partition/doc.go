// Package partition is one partition of a topic: the raft state machine that
// turns committed record batches into offsets and indexes, the publish queue
// that coalesces concurrent appends into batches, and the readers that serve
// history from Pebble and the tail from the cache.
//
// # Offsets and time
//
// Offsets are assigned at apply: a batch's base offset is the partition's
// next offset when its entry is applied, so every replica agrees and a
// dropped proposal leaves no hole. The leader stamps each batch with its
// clock when it proposes it; apply takes max(that time, the previous
// batch's), so append times never decrease within a partition and a time
// seek is an exact lower bound. All records of a batch share its time.
//
// Invariants: offsets are dense and never reused (the end never moves
// back, even when retention empties the partition); the log start only
// moves forward; a batch is visible to readers only after its Pebble
// writes are committed and its entry is durable (Durable publishes it).
//
// # Concurrency
//
// Apply, Durable, TakeProposals and the other raftlog.StateMachine methods
// run on the raft host's loop goroutine and own the fields marked
// "loop-owned". Everything shared with publishers and readers is under mu.
// The partition starts no goroutine of its own: planning retention,
// compaction and uploads runs on the caller's (the broker's housekeeping),
// off the loop, and what it decides goes through the raft log as a command.
// Lock order: Partition.mu, then Cache.mu.
//
// # Entries
//
// Every entry starts with a kind byte: a record batch (behind a 9-byte
// envelope carrying the raft index its proposer had applied when it
// checked the batch's idempotency keys; kindBatchExt adds an extension
// with the append's conditions and the ghosts of records a rewrite
// dropped, conditions.go), a subscriber group command
// (groups.go), a retention truncate and a compaction (retention.go), an
// idempotency-key binding (bind.go) and a tier manifest row (tier.go). The
// keys each writes are listed in engine/internal/keys.
//
// # Publishing
//
// Enqueue queues an append (waiting while MaxPendingBytes, 64 MiB, are
// queued or in flight: backpressure) and wakes the host. At the start of
// the next pass TakeProposals drains the queue into as few batches as
// MaxBatchBytes (1 MiB) allows, so what arrived while the previous pass
// synced becomes one batch. An append's records land contiguously in
// request order. The append is answered at Durable, once its batch is
// committed and applied. A proposal lost in a leader change is detected by
// term (Proposing, AppliedTerm: once an entry of a later term is applied,
// an earlier-term proposal not applied before it can never commit) and
// fails with ErrLost, safe to retry; a wait that ends first is
// ErrOutcomeUnknown. A stopped partition fails everything queued.
//
// # Duplicates (dedupe.go, bind.go)
//
// An idempotency key is checked twice. By the proposer, on the loop: a key
// in the index within the window is answered as a duplicate and not
// proposed, and an append whose key is in a batch in flight waits for it.
// And at apply, authoritatively: a batch holding a stored key is skipped
// by every replica alike and its publisher told the outcome is unknown,
// so it retries and gets its answer from the proposer. The window is
// measured on append times, so every replica decides the same. The second
// lookup is skipped deterministically when every batch applied since the
// proposer's checked index came from the same proposer incarnation (the
// state records the last incarnation). Each applied batch deletes up to
// 256 expired rows, in expiry order.
//
// A key is unique within its topic: its home partition (FNV-1a of the key)
// holds its dedupe row. A record routed elsewhere is bound first (Bind: a
// kindBind entry in the home partition's log recording key → target and a
// payload hash); same contents go to the bound target, other contents are
// a conflict (ErrConflict). Binds and appends of the home partition are
// ordered by its log, so the first wins on every replica.
//
// # Key versions, conditions and tags (keyindex.go, conditions.go)
//
// Apply gives every keyed record its key version (its position in its
// key's history here: 0, 1, 2, ...) and writes the key index ('k': key,
// version -> offset), a versions row per batch ('v', attached to batches
// by every reader) and the tag index ('g': the rewind-tag and rewind-type
// headers). Rows are never renumbered: retention and compaction drop
// records, not versions. An append with conditions (EnqueueIf: key
// expectations, tag conditions) is proposed alone as one batch and taken
// or refused whole at apply, after the dedupe check, against the indexes
// as the entries before it left them, so every replica decides alike; a
// refusal is a *ConditionError. A batch rewritten by compaction or
// retention keeps its dropped records' keys and terms (ghosts), so a
// lagging replica that applies the rewritten entry indexes it the same.
// KeyHead, KeyEntries, KeyVersionAt and QueryOffsets read the indexes up
// to the visible end; KeyWindow and GapBatch build what a reader of one
// key delivers (package stream).
//
// # Reading (reader.go, cache.go)
//
// Reader.Read(offset) returns the batch holding offset: from the tail
// cache (store-wide, FIFO within a byte budget, fed at Durable) or from
// Pebble: SeekLT(offset+1) on the offset index, then the raft log at that
// index, both iterators moving forward in step, bounded by the visible end
// when opened. A batch read from disk is copied (the iterator reuses its
// memory); a cached one is shared. Below the local log start the reader
// goes to the tier manifest (tier.go). Every batch's CRC-32C is checked on
// every read from disk; a mismatch is DataLoss naming partition and offset,
// never delivered. A read that fails because retention removed its batch
// meanwhile is reported as below the log start.
//
// # Retention and compaction (retention.go)
//
// PlanRetention computes one offset X, exact to the record, the largest of
// what the limits ask for: records (end − max records), age (a time index
// seek of now − max age), bytes (the longest suffix whose payload sizes fit,
// walking the offset index rows' payload sums). Truncate proposes it. Apply,
// on every replica, range-deletes the offset index, the time index and the
// raft log below the batch holding X (raftlog's LogTruncator) and trims that
// batch's head in place, keeping the offsets of the rest; the log start
// becomes X. After a pass a partition holds exactly what its limits allow;
// between passes it may exceed them by what arrived meanwhile.
//
// PlanCompaction builds "key → latest offset" off the loop and lists, per
// batch, the records superseded by a later record of their key and the
// tombstones past their delete retention. Compact commands carry these drop
// lists (16 batches each); apply rewrites each batch's raft entry without
// them (record.Compact keeps offsets, span and append time). A plan made
// stale by retention or an earlier compaction is checked at apply (index
// row present, same raft index) and skipped the same way everywhere.
// Records without a key are never compacted away.
//
// # Tiered storage (tier.go, tierlag.go)
//
// UploadTier reads the next sealed range of whole batches (from the
// manifest's end, or the log start), writes it as a segment object
// (package tier), then proposes a kindTier command naming it. Apply writes
// a manifest row ('T' <group> <base>) and publishes it at Durable (Tiered).
// The object is written before the command, so a crash leaves an object no
// row names, never a row without its object; the same segment again
// changes nothing, one that does not continue the manifest is refused as
// stale. TruncateLocal removes local batches only where the manifest
// covers them and moves the local start, not the read start (the first
// readable offset, which Bounds reports as the log start), so cursors,
// message IDs, tokens and groups see one log. Total retention drops
// manifest rows wholly below its point first. CollectTierGarbage deletes
// objects under the partition's prefix that no row names, once older than
// its argument.
//
// # Snapshots (snapshot.go)
//
// The raft log is the partition log, so a snapshot carries no records:
// SnapshotData is the small state as of an index (the offset and
// append-time floor of the first retained batch, the dedupe and binding
// rows below it, the group rows, the tier manifest and read start), and
// RestoreSnapshot replaces the partition's rows with it. A lagging or new
// replica jumps there and receives the retained log.
//
// # Caller's duties
//
//  1. Open one Partition per partition replica on this node, with the
//     store, the host, the shared Cache (and tier store and cache), and
//     register it with the raft host as the group's StateMachine.
//  2. Publish with Enqueue (or Append, which also waits for the outcome);
//     only the leader proposes, so route publishes to it first.
//  3. Read with NewReader, one Reader per goroutine, and Close it; wait for
//     new records with Notify.
//  4. On the leader, plan off the loop and propose: PlanRetention then
//     Truncate, PlanCompaction then Compact, PlanLocal then UploadTier and
//     TruncateLocal.
//  5. Fail the partition (Fail) when its topic is deleted or the node
//     stops, so waiting publishers and readers end.
package partition
