// Package offline reads the records a stopped node keeps, straight from its
// data directory: the store is opened read-only and each partition is read
// through the partition package's own reader (the offset index and the raft
// log, the code every read of history ends in), with no raft group, stream,
// cursor, scheduler or network involved.
//
// The scenario runner (`rewind scenario`, scenarios/runner) reads every
// replica back this way once its nodes are stopped, so that what it compares
// is what each node stored: a bug in the read path (streams, cursors, the
// API) shows in the checkers of reads and follows, never as lost data.
//
// The caller's duties:
//
//  1. stop the node first: its store is locked while it runs (Read fails
//     with an error naming the lock), and a store read while a process
//     writes it would be a moving target;
//  2. treat the result as the node's own view: a partition the node keeps
//     no replica of has no state and is left out; one whose records moved
//     to tiered storage is refused (Read reads only the local store).
//
// Read never writes to the directory (Pebble in read-only mode replays its
// write-ahead log in memory).
package offline

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// Record is one stored record. Its slices are its own.
type Record struct {
	Offset         uint64
	Key, Value     []byte
	IdempotencyKey string
	// AppendTime is the broker's append time, in Unix nanoseconds.
	AppendTime int64
	// KeyVersion is the record's version in its key's history (0 without
	// a key or a key index).
	KeyVersion uint64
}

// Partition is one partition as a node stores it.
type Partition struct {
	Topic     string
	Partition uint32
	// Start is the first offset held (retention may have removed earlier
	// ones), End one past the last.
	Start, End uint64
	Records    []Record
}

// ErrTiered is returned for a partition whose oldest records are in tiered
// storage, which Read does not reach.
var ErrTiered = errors.New("offline: records in tiered storage")

// Read opens the store in dir read-only and returns every partition of the
// named topics (all topics when none is named) that the node keeps, ordered
// by topic name and partition number.
func Read(dir string, topics ...string) (out []Partition, err error) {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quiet{}})
	if err != nil {
		return nil, fmt.Errorf("offline: open %s read-only: %w", dir, err)
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	ts, err := readTopics(db)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if len(topics) > 0 && !slices.Contains(topics, t.Name) {
			continue
		}
		for i, g := range t.Groups {
			p, ok, err := readPartition(db, t, uint32(i), g)
			if err != nil {
				return nil, fmt.Errorf("offline: topic %s partition %d: %w", t.Name, i, err)
			}
			if ok {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// readTopics reads the catalog rows, ordered by name.
func readTopics(db *pebble.DB) ([]*meta.Topic, error) {
	ts, err := meta.ReadTopics(db)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ts, func(a, b *meta.Topic) int { return cmp.Compare(a.Name, b.Name) })
	return ts, nil
}

// readPartition reads partition i (raft group g) of t; ok is false when the
// node keeps no state for it.
func readPartition(db *pebble.DB, t *meta.Topic, i uint32, g uint64) (Partition, bool, error) {
	out := Partition{Topic: t.Name, Partition: i}
	switch _, closer, err := db.Get(keys.PartitionStateKey(g)); {
	case errors.Is(err, pebble.ErrNotFound):
		return out, false, nil
	case err != nil:
		return out, false, err
	default:
		closer.Close()
	}
	p, err := partition.Open(partition.Config{Group: g, TopicID: t.ID, Index: i, DB: db, Cache: partition.NewCache(0)})
	if err != nil {
		return out, false, err
	}
	vis := p.Bounds()
	if len(p.Tiered()) > 0 {
		return out, false, ErrTiered
	}
	out.Start, out.End = vis.LogStart, vis.Next
	r := p.NewReader()
	defer r.Close()
	var rec record.Record
	for off := vis.LogStart; off < vis.Next; {
		b, _, err := r.Read(off)
		if err != nil {
			return out, false, err
		}
		it, vs := b.Records.Iter(), b.Versions()
		for it.Next(&rec) {
			o := b.Base + uint64(rec.OffsetDelta)
			if o < vis.LogStart {
				continue // the head of the first batch, removed by retention
			}
			x := Record{Offset: o, Key: slices.Clone(rec.Key), Value: slices.Clone(rec.Value),
				IdempotencyKey: string(rec.IdempotencyKey), AppendTime: b.AppendTime}
			if v, ok := lookupVersion(&vs, &rec); ok {
				x.KeyVersion = v
			}
			out.Records = append(out.Records, x)
		}
		if err := it.Err(); err != nil {
			return out, false, fmt.Errorf("offset %d: %w", b.Base, err)
		}
		off = b.End()
	}
	return out, true, nil
}

// lookupVersion is the key version of a keyed record (versions are looked
// up in offset order, for keyed records only, as streams do).
func lookupVersion(vs *partition.Versions, r *record.Record) (uint64, bool) {
	if len(r.Key) == 0 {
		return 0, false
	}
	return vs.Lookup(r.OffsetDelta)
}

// quiet is a pebble.Logger that drops what Pebble says while opening (the
// write-ahead logs it replays); a fatal report becomes a panic, which
// pebble.Open returns as its error only through its callers' recovery, so
// it is kept loud.
type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Errorf("offline: pebble: "+format, args...))
}
