// Package keys is the engine's key layout in the node's Pebble store. Every
// key starts with a one-byte prefix; ids and offsets follow big-endian so
// that ordered iteration is numeric iteration. The raft host owns prefix
// 'r' (see raftlog); the engine owns the rest:
//
//	'm' 'f'                               store format marker (version)
//	'm' 'n'                               node identity: node id, cluster id
//	'm' 't' <topic id:8>                  topic record
//	'm' 's'                               metadata state (id counters)
//	'm' 'x' <group:8>                     partition group awaiting deletion
//	'm' 'w' ...                           the plugin registry (see package plugins)
//	'm' 'a'                               authorization state (see package auth)
//	'o' <group:8> <base offset:8>         offset index: one row per batch
//	't' <group:8> <append time:8> <base offset:8>   time index: one row per batch
//	'p' <group:8>                         partition applied state
//	'd' <group:8> <idempotency key>       dedupe index: offset, time, payload hash
//	'e' <group:8> <append time:8> <idempotency key>  dedupe expiry order
//	'c' <group:8> <subscriber group name> a subscriber group's commit and fence
//	'T' <group:8> <base offset:8>         tiered storage manifest: one row per segment object
//	'k' <group:8> <len:4> <key> <version:8>  key index: the offset of a key's version
//	'v' <group:8> <base offset:8>         key versions of a batch's keyed records
//	'g' <group:8> <len:4> <term> <offset:8>  tag index: a record carrying a tag (or type)
//
// The key and tag indexes put a 4-byte length before the variable part, so
// the rows of one key (or tag) are a contiguous span no other key's rows
// fall into, sorted by version (or offset).
//
// Append times are stored with the sign bit flipped so that negative times
// (before 1970) still sort first.
package keys

import "encoding/binary"

// Prefixes.
const (
	Meta      = 'm'
	Offset    = 'o'
	Time      = 't'
	Partition = 'p'
	Dedupe    = 'd'
	Expiry    = 'e'
	Commit    = 'c'
	Tier      = 'T'
	KeyIndex  = 'k'
	Versions  = 'v'
	TagIndex  = 'g'
)

// PartitionRows are the prefixes of a partition's rows (its applied state
// aside): what deleting a partition, or replacing it by a snapshot, clears.
var PartitionRows = []byte{Offset, Time, Dedupe, Expiry, Commit, Tier, KeyIndex, Versions, TagIndex}

// FormatKey holds the store format version.
var FormatKey = []byte{Meta, 'f'}

// PluginPrefix is the plugin registry's key prefix.
var PluginPrefix = []byte{Meta, 'w'}

// MetaStateKey holds the metadata state machine's counters.
var MetaStateKey = []byte{Meta, 's'}

// AuthStateKey holds the authorization state: tokens (hashes), ACL rules,
// the resume token key.
var AuthStateKey = []byte{Meta, 'a'}

// TopicKey is the key of a topic record.
func TopicKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{Meta, 't'}, id) }

// TopicSpan is the range of all topic records.
func TopicSpan() (start, end []byte) { return []byte{Meta, 't'}, []byte{Meta, 't' + 1} }

// DeletionKey marks a partition group whose data must still be deleted.
func DeletionKey(group uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{Meta, 'x'}, group)
}

// DeletionSpan is the range of all deletion markers.
func DeletionSpan() (start, end []byte) { return []byte{Meta, 'x'}, []byte{Meta, 'x' + 1} }

// DeletionGroup decodes a deletion marker key.
func DeletionGroup(k []byte) (uint64, bool) {
	if len(k) != 10 || k[0] != Meta || k[1] != 'x' {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[2:]), true
}

func groupKey(prefix byte, group uint64) []byte {
	k := make([]byte, 9, 25)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], group)
	return k
}

// OffsetKey is the offset index row of the batch starting at base.
func OffsetKey(group, base uint64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(Offset, group), base)
}

// OffsetKeyBase decodes the base offset of an offset index key.
func OffsetKeyBase(k []byte) (uint64, bool) {
	if len(k) != 17 || k[0] != Offset {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[9:]), true
}

// TimeKey is the time index row of the batch starting at base.
func TimeKey(group uint64, appendTime int64, base uint64) []byte {
	k := binary.BigEndian.AppendUint64(groupKey(Time, group), uint64(appendTime)^1<<63)
	return binary.BigEndian.AppendUint64(k, base)
}

// TimeSeekKey is the smallest time index key with append time >= t.
func TimeSeekKey(group uint64, t int64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(Time, group), uint64(t)^1<<63)
}

// TimeKeyBase decodes the base offset of a time index key.
func TimeKeyBase(k []byte) (uint64, bool) {
	if len(k) != 25 || k[0] != Time {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[17:]), true
}

// PartitionStateKey holds a partition's applied state.
func PartitionStateKey(group uint64) []byte { return groupKey(Partition, group) }

// GroupSpan returns the [start, end) range of group's rows under prefix.
func GroupSpan(prefix byte, group uint64) (start, end []byte) {
	start = groupKey(prefix, group)
	if group == ^uint64(0) {
		return start, []byte{prefix + 1}
	}
	return start, groupKey(prefix, group+1)
}

// DedupeKey is the dedupe index row of an idempotency key.
func DedupeKey(group uint64, idem []byte) []byte { return append(groupKey(Dedupe, group), idem...) }

// ExpiryKey orders dedupe rows by the append time of their record.
func ExpiryKey(group uint64, appendTime int64, idem []byte) []byte {
	k := binary.BigEndian.AppendUint64(groupKey(Expiry, group), uint64(appendTime)^1<<63)
	return append(k, idem...)
}

// ExpirySeekKey is the smallest expiry key with append time >= t.
func ExpirySeekKey(group uint64, t int64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(Expiry, group), uint64(t)^1<<63)
}

// ExpiryKeyParts decodes an expiry key.
func ExpiryKeyParts(k []byte) (appendTime int64, idem []byte, ok bool) {
	if len(k) < 17 || k[0] != Expiry {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(k[9:]) ^ 1<<63), k[17:], true
}

// TierKey is the manifest row of the tiered segment starting at base.
func TierKey(group, base uint64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(Tier, group), base)
}

// CommitKey is the row of a subscriber group's state in one partition.
func CommitKey(group uint64, name string) []byte { return append(groupKey(Commit, group), name...) }

// CommitKeyName decodes the subscriber group name of a commit key.
func CommitKeyName(k []byte) (string, bool) {
	if len(k) < 10 || k[0] != Commit {
		return "", false
	}
	return string(k[9:]), true
}

// IdentityKey holds the node's identity (its id and its cluster's id),
// written the first time the store is opened.
var IdentityKey = []byte{Meta, 'n'}

// appendTermPrefix appends prefix, group, the term's length and the term:
// the start of the rows of one key (or tag).
func appendTermPrefix(dst []byte, prefix byte, group uint64, term []byte) []byte {
	dst = append(dst, prefix)
	dst = binary.BigEndian.AppendUint64(dst, group)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(term)))
	return append(dst, term...)
}

// termRowNumber returns the number (a version, an offset) that ends a row
// of the key or tag index of prefix.
func termRowNumber(k []byte, prefix byte) (uint64, bool) {
	if len(k) < 21 || k[0] != prefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[len(k)-8:]), true
}

// KeyVersionKey is the key index row of version v of key.
func KeyVersionKey(group uint64, key []byte, v uint64) []byte {
	return AppendKeyVersionKey(nil, group, key, v)
}

// AppendKeyVersionKey appends KeyVersionKey(group, key, v) to dst.
func AppendKeyVersionKey(dst []byte, group uint64, key []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(appendTermPrefix(dst, KeyIndex, group, key), v)
}

// KeySpan is the span of key's rows in the key index.
func KeySpan(group uint64, key []byte) (start, end []byte) {
	return appendTermPrefix(nil, KeyIndex, group, key), KeyVersionKey(group, key, ^uint64(0))
}

// KeyVersionOf returns the version a key index row names.
func KeyVersionOf(k []byte) (uint64, bool) { return termRowNumber(k, KeyIndex) }

// VersionsKey is the row of the key versions of the batch at base.
func VersionsKey(group, base uint64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(Versions, group), base)
}

// VersionsKeyBase returns the base offset a versions row names.
func VersionsKeyBase(k []byte) (uint64, bool) {
	if len(k) != 17 || k[0] != Versions {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[9:]), true
}

// TagKey is the tag index row of a record at offset carrying term.
func TagKey(group uint64, term []byte, offset uint64) []byte {
	return AppendTagKey(nil, group, term, offset)
}

// AppendTagKey appends TagKey(group, term, offset) to dst.
func AppendTagKey(dst []byte, group uint64, term []byte, offset uint64) []byte {
	return binary.BigEndian.AppendUint64(appendTermPrefix(dst, TagIndex, group, term), offset)
}

// TagSpan is the span of term's rows in the tag index.
func TagSpan(group uint64, term []byte) (start, end []byte) {
	return appendTermPrefix(nil, TagIndex, group, term), TagKey(group, term, ^uint64(0))
}

// TagKeyOffset returns the offset a tag index row names.
func TagKeyOffset(k []byte) (uint64, bool) { return termRowNumber(k, TagIndex) }
