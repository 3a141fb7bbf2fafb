// Package tier keeps sealed ranges of a partition's history as segment
// objects in an object store (tiered storage), and reads them back.
//
// A partition's history is otherwise kept on the local disk of every
// replica (RF copies), and only as far back as those disks allow. With a
// tier (`rewind serve --tier URL`, every member the same) and a topic's
// local retention, sealed ranges are kept once in the object store and the
// members keep only a recent window; replays read across the boundary as
// if the history were local. This package is the storage half: objects,
// stores and the cache. The partition package decides what moves and
// records it through raft (engine/internal/partition, "Tiered storage").
//
// # Segment objects
//
// A segment object holds the batches of offsets [Base, End) of one
// partition, back to back as they were stored locally, followed by an index
// of them and a fixed footer:
//
//	off        size     field
//	0          8        magic "RWSEG\x00\x00\x01"
//	8          ...      the batches (record format, package record), in
//	                    offset order; each keeps its own CRC-32C
//	idx        36 × n   one index entry per batch, big-endian:
//	                      base offset 8, span 4, append time 8 (as applied),
//	                      position in the object 8, length 4, CRC-32C of the
//	                      batch bytes 4
//	end - 48   48       footer, big-endian: index position 8, batch count 4,
//	                      base 8, end 8, first append time 8, last append
//	                      time 8, CRC-32C of the index and the footer's
//	                      first 44 bytes 4
//
// A reader fetches the footer and the index (one range read when the
// object's size and batch count are known, as the manifest records them),
// then the batches it needs; every piece is checked before it
// is used, so a corrupt or truncated object is reported, never delivered.
// Objects are immutable and uniquely named (Name): an upload that is
// repeated writes the same bytes under the same name.
//
// Names are topics/<topic id>/<partition>/<base>-<end>-<crc of the
// object>.seg, zero-padded so a partition's objects list in offset order
// (Prefix, Name).
//
// # Stores (store.go, s3.go)
//
// Open turns a --tier URL into a Store. file:///path writes a temporary
// file, syncs it in steps of 1 MiB (internal/atomicfile.WriteInSteps, so a
// raft log sync on the same disk waits behind one step at most), renames
// it and syncs the directory: a crash leaves no object or the whole one.
// s3://bucket/prefix?endpoint=&region=&path_style=&profile=&credentials=
// goes through the AWS SDK for Go v2: its default credential chain
// (environment, shared profile, web identity as EKS sets it up, container,
// instance role over IMDSv2), refreshed before it expires; the region and
// endpoint from the URL or AWS_REGION, AWS_DEFAULT_REGION and
// AWS_ENDPOINT_URL_S3; path-style requests to a custom endpoint and
// virtual-hosted ones to AWS unless path_style= says otherwise; retries
// with backoff on SlowDown, 5xx answers, timeouts and refused connections
// (6 attempts, AWS_MAX_ATTEMPTS overrides); each upload carries its
// Content-MD5 (NewS3Store). A missing object is ErrNotFound; the edge maps
// a corrupt or missing object to DataLoss and an unreachable store to
// Unavailable, and local reads go on either way.
//
// # The cluster marker (marker.go)
//
// A store belongs to one cluster. ClaimedStore reads the object CLUSTER
// at the top of the store (MarkerName, beside topics/) and writes it if it
// is absent, only if absent (If-None-Match: * on S3, a hard link on a file
// store); it holds the owner: "cluster <id>" for a cluster (the id derived
// from the initial members, which a joining node is told), or "node
// <random>" for a node running alone (LocalOwner, kept in its data
// directory). When it names another owner, Claim returns an
// *OtherClusterError naming the store and both owners, and the engine
// refuses to start; writes and deletions through the ClaimedStore go
// through only once the marker is checked, so a store unreachable at start
// delays uploads and deletions instead of keeping the node down.
//
// # Reading through the cache (cache.go)
//
// Reads go by aligned windows of about 1 MiB, checked batch by batch
// before anything is kept, in one Cache per node (`--tier-cache-mib`,
// least recently used out first, bounded in bytes), with the next window
// prefetched in the background (at most a few at once, dropped rather than
// queued). Opening a segment is one range read: the manifest row records
// the object's size and batch count, so the index and footer are the
// object's last 48 + 36 × count bytes. cache.go's comment has the details.
//
// # Goroutines
//
// Stores and Segment readers start none of their own (the S3 store's
// HTTP client keeps idle connections, as any does). A Cache owns its prefetches:
// it starts them, Close cancels them and waits for them.
//
// # Caller's duties
//
//  1. Open the store once per node and share one Cache among all
//     partitions; Close the cache at shutdown.
//  2. Write an object before recording it anywhere (the partition's
//     manifest row), so a crash leaves an orphan, never a dangling row.
//  3. Delete only objects no manifest row names, and only once older than
//     any upload that may still be in flight (the broker waits an hour):
//     an orphan may be a former leader's upload, or one racing a topic's
//     deletion.
//  4. Never share a store (or prefix) between clusters: topic ids collide.
//     Wrap the store in a ClaimedStore and Claim it at start: a second
//     cluster is then refused instead of deleting the first one's objects
//     (two clusters whose initial members are the same list have the same
//     id, and are not told apart).
package tier
