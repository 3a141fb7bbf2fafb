package broker

import (
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/raftlog"
)

// Disk space. A node must not die of a full disk: it stops taking data
// before the disk fills, keeps serving reads, and takes data again by
// itself once space returns. Three levels, from the free space of the data
// directory's filesystem (Config.FreeBytes, checked every housekeeping
// interval and at Open):
//
//  1. Below Storage.MinFreeBytes (diskFull; default store.ReserveBytes,
//     204.8 MiB: the room Pebble's own background writes need, two
//     preallocated WAL files and a memtable flush): publishes and the
//     other appends to the partitions it leads are refused with
//     ResourceExhausted (partition.ErrDiskFull); it hands their
//     leadership to other replicas (cluster.go, follow); as a follower it
//     stops taking partition entries (admit drops the raft messages that
//     carry them, so it falls behind and catches up later, as a replica
//     that was cut off does; so it applies a lowered retention only once
//     space is back); housekeeping only enforces retention on what it
//     still leads (tiered uploads and key compaction write). The metadata
//     group, votes and heartbeats go on: they write little.
//  2. Below 16 MiB (outBytes; a quarter of MinFreeBytes if less), or once
//     a write met ENOSPC (diskOut): any write may fail, so the node takes
//     no raft message at all and housekeeping proposes nothing. Its raft groups see it as cut
//     off (PreVote and CheckQuorum mean that writes nothing here); it
//     still serves reads.
//  3. A write that meets ENOSPC anyway (something the levels above did
//     not stop: a flush, a compaction, an entry committed before) waits in
//     waitForSpace, with every other write of the store, until space is
//     back, instead of failing the store; it is then retried. Reads go on
//     meanwhile. Close ends the wait: the write then fails, which is a
//     storage failure (the process exits 1, as before issue 27).
//
// Space back above each level undoes it: writes are accepted again, the
// node catches up, and leader balancing gives it its partitions back.
// MinFreeBytes negative disables all three.

// DiskFull reports whether publishes are refused for lack of disk space.
func (b *Broker) DiskFull() bool { return b.diskFull.Load() }

// outBytes is the free space below which the disk is out (diskOut): 16
// MiB, or a quarter of MinFreeBytes if that is less. Enough for a long
// while of the metadata group's entries and raft's hard state, and far
// below any disk a guard that high is meant for, so the node keeps
// learning the catalog while it is only low.
func (b *Broker) outBytes() uint64 {
	return uint64(min(b.cfg.Storage.MinFreeBytes/4, 16<<20))
}

// checkDisk sets or clears the disk levels from the free space.
func (b *Broker) checkDisk() {
	min := b.cfg.Storage.MinFreeBytes
	if min < 0 {
		return
	}
	free, err := b.cfg.FreeBytes()
	if err != nil {
		return // unknown: do not block publishes on a failed probe
	}
	full, out := free < uint64(min), free < b.outBytes()
	// Full before out when setting, out before full when clearing
	// (diskOut implies diskFull).
	wasFull := full
	if full {
		wasFull = b.diskFull.Swap(true)
	}
	wasOut := b.diskOut.Swap(out)
	if !full {
		wasFull = b.diskFull.Swap(false)
	}
	if wasFull != full {
		if full {
			b.log.Error("disk almost full: refusing publishes, handing leadership away, not replicating new records", "free-bytes", free, "min-free-bytes", min)
		} else {
			b.log.Info("disk space back: accepting publishes", "free-bytes", free)
		}
	}
	if wasOut != out {
		if out {
			b.log.Error("disk almost out of space: taking no raft messages, reads go on", "free-bytes", free, "min-free-bytes", min)
		} else {
			b.log.Info("disk space back: taking raft messages again", "free-bytes", free)
		}
	}
}

// spacePoll is how often waitForSpace looks at the free space (a statfs).
const spacePoll = 100 * time.Millisecond

// waitForSpace is the store's OnDiskFull: a write met ENOSPC. Once the
// node runs it marks the disk out and waits, holding every write of the
// store, until the free space is back over the diskOut level or the node
// closes; the write is then retried (and fails, if there still is no
// space). While Open runs it returns at once: the write fails, and Open
// with it.
func (b *Broker) waitForSpace() {
	if !b.running.Load() || b.cfg.Storage.MinFreeBytes < 0 {
		return
	}
	b.diskFull.Store(true)
	b.diskOut.Store(true)
	floor := b.outBytes()
	b.log.Error("disk full: a write met ENOSPC and waits for space, reads go on", "resume-at-free-bytes", floor)
	tick := time.NewTicker(spacePoll)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			b.log.Error("disk full: closing while a write waits for space; it fails")
			return
		case <-tick.C:
		}
		if free, err := b.cfg.FreeBytes(); err == nil && free >= floor {
			b.log.Info("disk space back: the write that waited for it goes on", "free-bytes", free)
			return
		}
	}
}

// admit returns what of envs, raft messages from other members, the node
// acts on: all of them while its disk has room; below MinFreeBytes no
// partition entries (MsgApp with entries, MsgSnap); below the diskOut
// level nothing. Raft takes a dropped message as lost on the way: the
// leader resends once the node answers again.
func (b *Broker) admit(envs []raftlog.Envelope) []raftlog.Envelope {
	if !b.diskFull.Load() {
		return envs
	}
	if b.diskOut.Load() {
		return nil
	}
	out := make([]raftlog.Envelope, 0, len(envs))
	for _, e := range envs {
		if e.Group != meta.GroupID && carriesEntries(e.Msg) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// carriesEntries reports whether m would make a follower store entries.
func carriesEntries(m *pb.Message) bool {
	switch m.GetType() {
	case pb.MessageType_MsgApp:
		return len(m.GetEntries()) > 0
	case pb.MessageType_MsgSnap:
		return true
	}
	return false
}
