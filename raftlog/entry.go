package raftlog

import (
	"encoding/binary"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// An entry is stored as
//
//	type (1 byte) | term (uvarint) | data
//
// The index is in the key. This keeps the stored bytes of a record batch
// exactly the batch itself plus a few bytes, with no protobuf framing to undo
// on the read path.

// decodeEntryHeader splits a stored entry value into its type, term and data.
// data aliases v.
func decodeEntryHeader(v []byte) (typ pb.EntryType, term uint64, data []byte, err error) {
	if len(v) < 2 {
		return 0, 0, nil, fmt.Errorf("%w: entry value of %d bytes", ErrCorrupt, len(v))
	}
	typ = pb.EntryType(v[0])
	if typ > pb.EntryConfChangeV2 {
		return 0, 0, nil, fmt.Errorf("%w: entry type %d", ErrCorrupt, v[0])
	}
	term, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return 0, 0, nil, fmt.Errorf("%w: entry term", ErrCorrupt)
	}
	return typ, term, v[1+n:], nil
}

// decodeEntry builds an owned entry from a stored value (the data is copied).
func decodeEntry(index uint64, v []byte) (*pb.Entry, error) {
	typ, term, data, err := decodeEntryHeader(v)
	if err != nil {
		return nil, fmt.Errorf("index %d: %w", index, err)
	}
	e := &pb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(term), Type: typ.Enum()}
	if len(data) > 0 {
		e.Data = append([]byte(nil), data...)
	}
	return e, nil
}

// entrySize is what an entry costs in the caches: its data plus a fixed
// overhead for the struct.
func entrySize(e *pb.Entry) int64 { return int64(len(e.GetData())) + 64 }
