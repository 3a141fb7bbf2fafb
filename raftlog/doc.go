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
//  3. for every group with a Ready: writes its entries and HardState, and
//     applies its committed entries (StateMachine.Apply), all into the one
//     Pebble batch of the pass, which also records each group's new applied
//     index;
//  4. commits that batch with one WAL sync for all groups (no sync when no
//     group has new entries or votes: a commit index or apply rows lost in
//     a crash are rebuilt from the log);
//  5. calls StateMachine.Durable, sends messages, and advances each group.
//
// So N groups with traffic cost one fsync per pass, not N, and a crash
// between writing and applying can neither lose nor repeat an apply.
//
// # Storage
//
// The raft log is the only copy of an entry (see keys.go for the layout).
// Each group keeps its unapplied tail in memory, so applying and building
// MsgApp read no disk in the steady state. Snapshots carry metadata only:
// state machines rebuild from the log.
//
// # Caller's duties
//
//  1. Open the Pebble store and keep its keys starting with 'r' for the host.
//  2. Open a Host, Start it, then AddGroup for every group this node runs.
//  3. To propose, queue data in the state machine and call Wake; answer the
//     proposer from Durable once Apply has seen its entry.
//  4. Close the Host before the store.
package raftlog
