// Package transport carries raft messages between the nodes of a cluster
// for a raftlog.Host, over RaftService (rewind.internal.v1) on Connect and
// unencrypted HTTP/2.
//
// # Sending
//
// Send never blocks. It splits the host's messages by destination node and
// appends them to that node's bounded queue (QueueMessages, QueueBytes).
// One goroutine per peer keeps one long-lived client stream open to it and
// writes everything queued since its last write as one SendRequest frame,
// so the heartbeats of every group bound for one node share one write.
// What does not fit is dropped and raft retries: a slow or dead peer costs
// its own queue, never the caller or the other peers.
//
// A stream opens with a frame without messages, which returns once the
// connection is up and lets the receiver check the ids before any message
// travels. When a stream fails (the peer is down, refuses a frame, or a
// write stalls for WriteTimeout) the transport reports the node
// unreachable, drops what was queued, and reconnects with capped
// exponential backoff (MinBackoff doubling to MaxBackoff, back to
// MinBackoff after a stream that lived longer than MaxBackoff), resolving
// the peer's address again (Config.Resolve). Until a new stream is open
// every message to that node is dropped rather than buffered. Reconnecting
// waits for demand: a node nobody sends to any more is not redialled
// (RemovePeer also stops its goroutine). MsgSnap messages are reported to
// Config.SnapshotStatus: as failed when dropped or lost with a stream, as
// finished once written.
//
// # Receiving
//
// Handler serves RaftService. Every frame must name this node's cluster and
// node id (FailedPrecondition otherwise, so a node started with the wrong
// peers never mixes two clusters' logs) and come from a node
// Config.Allowed accepts (PermissionDenied), and pass Config.Authorize
// (the engine's check that the sender is the member the request
// authenticated as), all before any message is decoded. Its messages are decoded, all
// of them or none (InvalidArgument), and handed to Config.Deliver as one
// batch.
//
// # Caller's duties
//
//  1. Build the Transport before the Host (its Deliver calls the host's
//     Deliver through a variable set once the host is open), and pass it as
//     the host's raftlog.Config.Transport.
//  2. Mount Handler on the node's HTTP server, which must speak h2c.
//  3. On shutdown, Close the Host, then the Transport (which ends inbound
//     streams too), then shut the HTTP server down.
package transport
