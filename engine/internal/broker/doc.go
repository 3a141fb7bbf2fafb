// Package broker is a Rewind node's core: it opens the store, runs the raft
// host with the metadata group and one group per partition, and offers the
// operations the API edge serves (topics, publish, subscribe, groups,
// plugins, cluster). It speaks Go types and sentinel errors; the api package
// maps them to Connect. It is also the one router of the node: every hop to
// another member (forwarding to a leader, relaying, leader hints, fetching
// from a leader, sending group calls to the coordinator) is decided here.
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
// # Publishing and routing (publish.go, cluster.go, idempotency.go)
//
// Publish validates every record first (sizes, names, partitions, keys),
// picks partitions (explicit, FNV-1a of the key, FNV-1a of the idempotency
// key, else sticky runs of 16 KiB), binds the idempotency keys of records
// routed away from their key's home partition (on that partition's leader,
// partition.Bind), then, per partition, onLeader:
//
//  1. this node leads it: append locally (partition.Append);
//  2. another member leads it and this node reaches it: forward the records
//     to it on the member path, marked forwarded (WithForwarded). The
//     forward ends when this node's raft stops seeing the target as leader,
//     or after Config.ForwardTimeout (5 s); its outcome is then unknown,
//     and the error names the new leader (waiting up to NewLeaderWait for
//     an election's winner) in a *LeaderHintError;
//  3. the leader is unknown or unreachable (no raft stream to it): relay
//     once through another member this node reaches, a replica of the
//     partition first, marked relayed (WithRelayed). A relayed request is
//     served, forwarded once, or refused at once: never waited on nor
//     relayed again;
//  4. nothing helps: wait, retrying with a 2 to 100 ms backoff, until the
//     partition has had no reachable leader for three election timeouts;
//     from then on its requests fail at once, with Unavailable and a hint
//     naming the last leader.
//
// A forwarded request reaching a node that does not lead the partition is
// refused with a *NotLeaderError (nothing stored), and the forwarder tries
// again where it points. A proposal refused or lost in a leader change is
// retried inside the broker until the request's deadline (Config.
// PublishTimeout, 30 s, when it has none) nears; a wait that ends with the
// outcome unknown is never retried here: the client retries with its
// idempotency keys. With PublishPartial each partition succeeds or fails
// on its own.
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
// from the leader. ServeFetch and ServeLocate answer other members'
// fetches, only for partitions this node leads and only once it has
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
//     and Open; in a cluster pass the transport, the Forwarder and the
//     Fetcher, which carry member calls.
//  2. Serve the API from the broker's methods; mark requests that arrive
//     on the member path from an authenticated member (WithForwarded,
//     WithRelayed) and never those from clients.
//  3. On shutdown: HandOff, Drain, stop the HTTP server, then Close. After
//     Failed closes, Close and exit the process.
package broker
