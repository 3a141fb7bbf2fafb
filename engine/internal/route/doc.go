// Package route owns every hop from a node to another member: finding a
// partition's leader, following hints, relaying, telling "nothing was
// stored" from "outcome unknown", giving up on a stuck leader, and the
// peer clients that carry the calls. The broker decides what a request
// does; route decides where it runs. It imports no package above it (it
// sees the broker through Leadership and AddressBook, two small
// interfaces), and the broker implements nothing for the api edge: the
// publish path never climbs back up.
//
// # Pieces
//
//   - Router: the loop. Write (publishes, idempotency key bindings) and
//     Read (fetch and locate for a remote source) share its target
//     choice, its cut-short attempt and its hint learning; they differ in
//     who retries (Write retries inside until the deadline nears; Read
//     makes one call and its caller, package remote, retries).
//   - Op: one request as two functions, Local (on this node's replica,
//     which leads) and Remote (on another member, relay or not). The
//     broker builds them around partition.Append, partition.Bind,
//     ServeFetch and the Peers calls below.
//   - Peers: the Connect clients of the other members, one per address and
//     service: the member path (MemberPrefix) for forwarded publishes and
//     membership calls (with the caller's credentials), the peer
//     PartitionService for fetch, locate and bind. They turn answers into
//     this package's errors, once.
//   - Hops: WithHop/HopOf mark how a request reached this node (from a
//     client, forwarded, relayed). Only the member path marks a request;
//     api/member.go decides where hop headers are believed.
//
// # Writes (Router.Write)
//
// Per partition, in a loop until the request's deadline is almost over:
//
//  1. this node leads it (its replica's raft says so): Local. An error
//     that is partition.ErrNotLeader (the leadership moved) is tried
//     again where raft now points;
//  2. the request was forwarded here: refused with a *NotLeaderError
//     naming the leader this node sees (nothing stored); it never hops
//     twice;
//  3. another member leads it and this node's raft stream to it is up:
//     Remote to it, marked forwarded. The call ends when raft on this node
//     stops seeing it as the leader, or after Config.ForwardTimeout; a
//     call cut short has an unknown outcome (partition.ErrOutcomeUnknown)
//     unless it said nothing was stored. An answer that is ErrNotStored
//     (a *NotLeaderError) is retried: with a replica here where raft
//     points, without one where the refusal's hint points. Any other
//     answer, success or failure, is the outcome: a wait that ends with
//     the outcome unknown is never retried here (the client retries with
//     its idempotency keys). Its error names whom a client should try
//     (a *LeaderHintError): the election's winner, waited for up to
//     Config.NewLeaderWait when raft moved or when the connection to the
//     leader broke while raft still follows it (a dead leader, whom the
//     failure detector replaces within about half a second), else the
//     leader raft sees. A bind (an idempotency key's home partition)
//     whose call failed mid-way counts as not stored: a bind sent again
//     answers as the first, so it is retried like a refusal;
//  4. the leader is unknown or unreachable: relay once through a member
//     this node reaches (a replica first, never the leader nor the last
//     leader), marked relayed. A relayed request is served, forwarded
//     once, or refused at once: never waited on nor relayed again;
//  5. nothing helps: wait for raft's next leader or a 2 to 100 ms
//     backoff, and loop. Once a partition has had no leader this node
//     reaches for Config.NoLeaderWait (shared by all requests: stuck
//     since), its writes fail at once, not stored, with a hint naming the
//     last leader.
//
// Without a replica here (this node keeps none of the partition), the
// replicas are asked in order, the preferred leader first.
//
// # Reads (Router.Read)
//
// One call per Read, to the node a Link (kept by the reader across
// calls) points at: the leader the last node asked named (also one that
// names itself: a new leader that has not applied an entry of its term
// yet), else this replica's raft leader on even turns, else the replicas
// in turn; a failure without a hint moves the turn on, so a replica whose
// raft view is stale cannot pin a stream on a dead node. A call to the
// raft leader ends when raft sees another one; every call ends after its
// timeout, as Unavailable for the caller to retry.
//
// # Errors
//
// Errors carry their class, classified once here: ErrUnavailable (worth a
// retry later), ErrNotStored (nothing was stored: safe to retry even
// without idempotency keys), *NotLeaderError (both, with who leads),
// *LeaderHintError (for the client: where to go), partition.
// ErrOutcomeUnknown (a call cut short), and *RefusedError for a member's
// refusal of the request itself (invalid, topic not found, failed
// precondition, idempotency conflict), which the broker names in its own
// errors. The api edge maps them to Connect codes and the Rewind-Leader,
// Rewind-Leader-Address and Rewind-Not-Stored headers.
//
// # What it owns
//
// No goroutine beyond a call's own: Write and Read run on their callers'
// goroutines, and a call to a leader raft may replace gets one watcher
// goroutine that ends with the call. Peers' clients live as long as the
// Peers; the HTTP clients and their connections are the caller's.
//
// # Caller's duties
//
//  1. Build Peers (NewPeers) with this member's id, the cluster id, the
//     authenticated HTTP clients and the credentials carrier, and a Router
//     (New) with an AddressBook (nil: alone, never hop).
//  2. For each request, give the Part as this node has it now (its
//     replica, or nil; the replicas, preferred leader first) and an Op;
//     keep one Link per remotely read partition of a stream.
//  3. Mark requests that arrive on the member path from an authenticated
//     member (WithHop), never those from clients.
//  4. Map a *RefusedError to your own errors; the rest are classified.
//
// Tests: route_test.go drives the loop with fake replicas, a fake address
// book and scripted peers in synctest bubbles: no network, no sleeps, no
// dependence on the machine's speed.
package route
