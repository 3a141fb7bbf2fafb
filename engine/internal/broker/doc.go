// Package broker is a Rewind node's core: it opens the store, runs the raft
// host with the metadata group and one group per partition, and offers the
// operations the API edge serves (topics, publish, subscribe, groups,
// plugins, cluster). It speaks Go types and sentinel errors; the api package
// maps them to Connect. Where a request runs is package route's: every hop
// to another member (forwarding to a leader, relaying, leader hints,
// fetching from a leader) goes through its Router and Peers; the broker
// gives it each partition as this node sees it and the operation to run.
//
// # What it owns
//
// Open starts, and Close cancels and waits for: the raft host's loop
// (package raftlog), a watcher of the host's failure, the replay governor
// (package sched), reconcile (starts and stops partitions as the metadata
// group's catalog changes), housekeeping (every second on the partitions
// this node leads: retention, compaction, tier uploads and local
// truncation; every ten minutes tier garbage collection), member
// initialization, and maintain (every 200 ms: configurations follow the
// placement, leadership goes back to preferred replicas, a node low on disk
// hands its leaderships away). Requests run on their callers' goroutines;
// a publish spanning partitions appends to them in parallel and waits for
// all. Streams are counted, and Close waits up to 10 s for them to let go
// of the store.
//
// # Publishing and routing (publish.go, routing.go, idempotency.go)
//
// Publish validates every record first (sizes, names, partitions, keys),
// picks partitions (explicit, FNV-1a of the key, FNV-1a of the idempotency
// key, else sticky runs of 16 KiB), binds the idempotency keys of records
// routed away from their key's home partition (on that partition's leader,
// partition.Bind), then, per partition, hands route.Router.Write the
// partition as this node sees it (its replica, its replicas) and two
// functions: append here (partition.Append) and send to a member
// (route.Peers.Publish). The router's manual (engine/internal/route/doc.go,
// "Writes") has the steps: local, forward, relay once, wait; forwards cut
// short by a new raft leader or Config.ForwardTimeout, hints naming the
// winner (Config.NewLeaderWait); partitions stuck for three election
// timeouts failing at once. The broker's part:
//
//  1. a forwarded or relayed request (route.HopOf) arrives with its keys
//     bound: it is not bound again, and ServeBind serves a relayed binding
//     this node does not lead by routing it once more;
//  2. a member's refusal of the request itself (route.RefusedError) is
//     named in the broker's errors (peerError: ErrInvalid, ErrNoTopic,
//     ErrFailedPrecondition, a *ConflictError);
//  3. a local attempt that lost the leadership leaves no outcome: only the
//     attempt that succeeded may stand for the results.
//
// A proposal refused or lost in a leader change is retried until the
// request's deadline (Config.PublishTimeout, 30 s, when it has none)
// nears; a wait that ends with the outcome unknown is never retried here:
// the client retries with its idempotency keys. With PublishPartial each
// partition succeeds or fails on its own.
//
// Invariant: a publish is acknowledged only once its batch is committed on
// a quorum and applied on the leader.
//
// # Reading (reads.go, subscribe.go)
//
// readSources picks, per partition, what a stream reads: the local replica
// when this node leads it or the request asks for it (READ_FROM_LOCAL_
// REPLICA, or --follower-reads); by default on a follower,
// stream.CatchUpFrom(the local replica, the leader): the leader gives the
// bounds, the time watermark and the tail, the local replica the history it
// already holds; on a node without a replica, a remote.Source that fetches
// from the leader through route.Router.Read (one call at a time, the
// source retrying; a route.Link per partition remembers who led).
// ServeFetch and ServeLocate answer other members' fetches, only for partitions this node leads and only once it has
// applied an entry of its own term (a new leader may not yet have applied
// what its predecessor acknowledged). Catch-up fetches served to others
// take turns of the catch-up scheduler like local replays.
//
// # Groups (groups.go)
//
// One node coordinates subscriber groups: the node alone, or the metadata
// group's leader (coordinates); elsewhere group calls get a
// *NotCoordinatorError with its address. Commits and resets are partition
// commands proposed on the coordinator and forwarded to each partition's
// leader inside raft (partition groups run with proposal forwarding); a
// forwarded command whose leader changes fails at once with an unknown
// outcome rather than waiting out its deadline. When the coordinator loses
// the metadata leadership it ends its members' streams (package groups).
//
// # Failure
//
// A failed WAL write or fsync (or another fatal Pebble failure) stops the
// raft host; Failed is closed, Ready turns false, and the owner must exit:
// the node fails, the data does not. Drain refuses new requests and ends
// streams with Unavailable; HandOff gives the leadership of this node's
// groups to caught-up replicas before a graceful stop.
//
// # Caller's duties
//
//  1. Build a Config (the zero value of every field but Dir is a default)
//     and Open; in a cluster pass Cluster.InitialMembers, the raft transport's
//     configuration (Open builds the transport: serve Transport().Handler
//     and close it on shutdown) and the peer clients (route.NewPeers).
//  2. Serve the API from the broker's methods; mark requests that arrive
//     on the member path from an authenticated member (route.WithHop) and
//     never those from clients.
//  3. On shutdown: HandOff, Drain, stop the HTTP server, then Close. After
//     Failed closes, Close and exit the process.
package broker
