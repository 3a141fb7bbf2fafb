// Package kafka serves the Kafka wire protocol on a listener of its own,
// so that existing Kafka producers and consumers read and write a
// Rewind node's topics unchanged (docs/kafka.md). It is an edge, like
// package api: it decodes requests, calls the broker in process
// (publish, subscribe, topics) and maps the broker's errors to Kafka
// error codes in one table (errors.go). Its only state beyond a
// connection's buffers is the consumer groups' membership (groups.go).
//
// # What is served
//
// ApiVersions, Metadata, Produce, Fetch, ListOffsets,
// OffsetForLeaderEpoch (epochs.go), CreateTopics, DeleteTopics,
// DescribeConfigs (read-only, configs.go), DescribeCluster (cluster.go)
// and the classic consumer group APIs (FindCoordinator, JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
// ListGroups, DescribeGroups, DeleteGroups), at the versions versions.go
// lists with the reason for each range. Nothing else is advertised: a
// client that needs idempotence (InitProducerId), KIP-848's consumer
// protocol or transactions finds them missing in ApiVersions and says so
// itself. Requests and responses are
// franz-go's kmsg types (generated from Kafka's schemas, every version,
// flexible versions and tagged fields); only the framing (frame.go) and
// the record-batch payloads (batch.go in, encode.go out) are ours.
//
// # How a connection is served
//
// One goroutine per connection reads a size-prefixed frame, decodes it,
// serves it, and writes its response before reading the next, as Kafka's
// own broker does: a producer's pipelined batches to a partition are
// appended in the order it sent them. A size prefix below a header or
// above Config.MaxRequestBytes, a header or body that does not decode,
// an API or version not served (ApiVersions aside, which answers
// UNSUPPORTED_VERSION at v0 so the client can retry at a version it
// knows) closes the connection: a client cannot resynchronize a stream
// whose framing it got wrong. The ApiVersions response header is always
// v0; others are v1 for flexible versions.
//
// # Semantics
//
//   - Kafka offsets are Rewind offsets, dense, from 0.
//   - Produce takes exactly one v2 record batch per partition (Produce
//     v3+), checks its CRC32C, decompresses gzip, snappy (raw or the Java
//     client's xerial framing), lz4 or zstd up to Config.MaxBatchBytes
//     (a batch that would expand past it is refused with
//     MESSAGE_TOO_LARGE, decompression stopping at the limit), and
//     publishes its records, keys, values and headers byte for byte, the
//     producer's timestamps as event times. Every acks level is
//     acknowledged once the records are committed on a raft majority.
//   - Timestamps are LogAppendTime: the leader's append time. Fetch marks
//     every batch so (attribute bit 3, MaxTimestamp, CRC recomputed) and
//     Produce returns it; ListOffsets by time is Rewind's exact time
//     index.
//   - Every partition has one leader epoch, 0 (epochs.go): Metadata,
//     ListOffsets and fetched batches carry it, and OffsetForLeaderEpoch
//     answers that it ends at the log end offset.
//   - Fetch reads each partition with a stream (broker.Subscribe) from
//     the fetch offset: history, then the live tail, so a long poll waits
//     on the tail's notifications and never polls the store.
//   - Metadata names this node as the leader of every partition: any node
//     serves any partition, and the broker routes each request to the
//     partition's raft leader inside the cluster.
//
// # Consumer groups
//
// groups.go runs Kafka's classic group protocol in memory, one
// coordinator per listener under one mutex: members, generations, the
// join and sync phases, session timers (time.AfterFunc) and rebalance
// timeouts, with Kafka's error codes. A JoinGroup or a follower's
// SyncGroup waits on a channel of its member until the rebalance answers
// it (or Close). Everything durable is Rewind's: a Kafka group is the
// Rewind group of the same name, its commits are groups.Coordinator
// commits, and OffsetFetch, ListGroups, DescribeGroups and DeleteGroups
// read and delete Rewind's rows. The two meet in two places:
//
//   - broker.HoldGroup reserves the name while the Kafka group has
//     members: Rewind subscribers cannot join it then, and a name with
//     Rewind subscribers refuses Kafka joins (INCONSISTENT_GROUP_PROTOCOL).
//     The hold lists the Kafka members (coordinator.outside) for Rewind's
//     DescribeGroup and ListGroups; that callback takes the mutex, so the
//     listener asks Rewind for generations with broker.GroupGeneration,
//     which never calls it.
//   - Commits carry the group's Rewind generation on the topic as it was
//     when the Kafka group last became Stable (broker.GroupGeneration), so
//     the partitions' fences refuse a commit from before a reset
//     (ILLEGAL_GENERATION); a heartbeat that finds the Rewind generation
//     moved makes the members rejoin (REBALANCE_IN_PROGRESS, or removal
//     for cooperative-sticky groups, whose members keep their positions
//     across a rebalance) so they fetch the new offsets.
//
// Request fields of type []byte alias the connection's frame buffer:
// member metadata and assignments kept past a request are copies.
//
// # Caller's duties
//
//  1. Build a Config (zero values are defaults) and New with the node's
//     broker and the listener's address.
//  2. Run Serve on a goroutine; it owns the listener.
//  3. On shutdown, after the broker drains (its streams end), Close:
//     it ends requests in flight, closes connections and waits for them.
//
// Authentication is not built (no SASL, no TLS): engine.Node.Serve
// refuses the listener on a node with authentication on, and `rewind
// serve` refuses it on a non-loopback address without --insecure.
package kafka
