package raftlog

import "encoding/binary"

// Key layout. Everything this package stores lives under the one-byte
// prefix 'r' followed by the big-endian group id, so a group's whole state is
// one contiguous key range and ordered iteration is numeric iteration:
//
//	r <group:8> 'a'             applied index (8 bytes, big-endian)
//	r <group:8> 'c'             ConfState (protobuf)
//	r <group:8> 'e' <index:8>   log entry (see encodeEntry)
//	r <group:8> 'h'             HardState (protobuf)
//	r <group:8> 'k' <index:8>   ConfState in force from that index on
//	                            (protobuf; kept from the one in force at
//	                            the log's start, for snapshots)
//	r <group:8> 't'             truncated state: index (8) and term (8)
const (
	keyPrefix     = 'r'
	suffixApplied = 'a'
	suffixConf    = 'c'
	suffixEntry   = 'e'
	suffixHard    = 'h'
	suffixConfAt  = 'k'
	suffixTrunc   = 't'
)

func groupPrefix(group uint64) []byte {
	k := make([]byte, 9, 18)
	k[0] = keyPrefix
	binary.BigEndian.PutUint64(k[1:], group)
	return k
}

// groupSpan returns the [start, end) range holding all of group's keys.
func groupSpan(group uint64) (start, end []byte) {
	start = groupPrefix(group)
	end = groupPrefix(group + 1)
	if group == ^uint64(0) {
		end = []byte{keyPrefix + 1}
	}
	return start, end
}

func stateKey(group uint64, suffix byte) []byte {
	return append(groupPrefix(group), suffix)
}

func entryKey(group, index uint64) []byte {
	k := append(groupPrefix(group), suffixEntry)
	return binary.BigEndian.AppendUint64(k, index)
}

// entryKeyIndex returns the index of an entry key, or false if k is not one.
func entryKeyIndex(k []byte) (uint64, bool) {
	if len(k) != 18 || k[0] != keyPrefix || k[9] != suffixEntry {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[10:]), true
}

func confAtKey(group, index uint64) []byte {
	k := append(groupPrefix(group), suffixConfAt)
	return binary.BigEndian.AppendUint64(k, index)
}
