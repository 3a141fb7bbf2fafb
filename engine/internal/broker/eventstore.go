package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/route"
)

// MaxReadRecords bounds one event-store read.
const MaxReadRecords = 10_000

// ReadSpec is one event-store read (EventStoreService.Read): the records
// of one key, or those a query matches, in one partition. Limit: default
// and maximum MaxReadRecords.
type ReadSpec = route.ReadSpec

// ReadRecord is one record a read returns.
type ReadRecord = route.ReadRecord

// ReadResult is what a read returns: the partition's answer (the leader's,
// here or through the router) and where it came from.
type ReadResult struct {
	TopicID   uint64
	Partition uint32
	route.ReadAnswer
}

// Read serves an event-store read on the partition's leader (this node,
// or the leader through the router), so that what it returns includes
// every acknowledged append: a writer that loads, decides and appends
// with the version it loaded conflicts only with appends it could not
// have seen.
func (b *Broker) Read(ctx context.Context, topic string, spec ReadSpec) (ReadResult, error) {
	lt, err := b.anyTopic(topic)
	if err != nil {
		return ReadResult{}, err
	}
	n := lt.meta.Partitions
	switch {
	case !lt.meta.KeyIndex:
		return ReadResult{}, fmt.Errorf("topic %q: %w", topic, partition.ErrNoKeyIndex)
	case len(spec.Key) == 0 && len(spec.Query) == 0:
		return ReadResult{}, fmt.Errorf("%w: a read names a key or a query", ErrInvalid)
	case spec.HasPartition && spec.Partition >= n:
		return ReadResult{}, fmt.Errorf("%w: partition %d does not exist (topic %q has %d)", ErrInvalid, spec.Partition, topic, n)
	case !spec.HasPartition && len(spec.Key) > 0:
		spec.Partition = PartitionForKey(spec.Key, n)
	case !spec.HasPartition && n > 1:
		return ReadResult{}, fmt.Errorf("%w: a query reads one partition: name it (topic %q has %d)", ErrInvalid, topic, n)
	}
	for _, it := range spec.Query {
		if len(it.Tags) == 0 && len(it.Types) == 0 {
			return ReadResult{}, fmt.Errorf("%w: a query item names no tag and no type", ErrInvalid)
		}
	}
	if spec.FromVersion != nil && len(spec.Key) == 0 {
		return ReadResult{}, fmt.Errorf("%w: a start at a key version needs a key", ErrInvalid)
	}
	if spec.Limit <= 0 || spec.Limit > MaxReadRecords {
		spec.Limit = MaxReadRecords
	}
	p := spec.Partition
	var res ReadResult
	op := route.Op{Local: func() error {
		part := lt.parts[p]
		if part == nil {
			return b.noReplica(lt, p)
		}
		if part.Leader() != b.cfg.NodeID || !part.LeaderApplied() {
			return fmt.Errorf("%w: partition %d: node %d does not lead it", partition.ErrNotLeader, p, b.cfg.NodeID)
		}
		var err error
		res, err = readLocal(part, spec)
		return err
	}}
	if b.cfg.PeerClients != nil {
		op.Remote = func(ctx context.Context, node uint64, addr string, relay bool) error {
			out, err := b.cfg.PeerClients.Read(ctx, node, addr, topic, p, spec, relay)
			if err != nil {
				return b.lagging(lt, node, peerError(err, true))
			}
			res = ReadResult{ReadAnswer: out}
			return nil
		}
	}
	if err := b.route.Write(ctx, b.routed(lt, p, true), op); err != nil {
		return ReadResult{}, readError(topic, err)
	}
	res.TopicID, res.Partition = lt.meta.ID, p
	return res, nil
}

func readError(topic string, err error) error {
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrNoTopic) || errors.Is(err, partition.ErrNoKeyIndex) {
		return err
	}
	return fmt.Errorf("read %q: %w", topic, UnavailableUnlessTyped(err))
}

// readLocal serves spec from the local replica part.
func readLocal(part *partition.Partition, spec ReadSpec) (ReadResult, error) {
	vis := part.Bounds()
	var res ReadResult
	if vis.Next > 0 {
		res.Position, res.HasPosition = vis.Next-1, true
	}
	if spec.FromTime != nil {
		// A time is the offset of the first record appended at or after
		// it (going backward: the one before).
		off, err := part.SeekTime(*spec.FromTime)
		if err != nil {
			return res, err
		}
		switch {
		case !spec.Backward:
			spec.FromOffset = &off
		case off == 0:
			return res, nil
		default:
			off--
			spec.FromOffset = &off
		}
	}
	var offs []uint64
	var vers []uint64 // key reads: the versions of offs, from the index
	if len(spec.Key) > 0 {
		head, ok, err := part.KeyHead(spec.Key)
		if err != nil {
			return res, err
		}
		if !ok {
			return res, nil
		}
		res.Head, res.HasHead = head.Version, true
		if first, err := part.KeyEntries(spec.Key, 0, 1); err != nil {
			return res, err
		} else if len(first) > 0 {
			res.Earliest, res.HasEarliest = first[0].Version, true
		}
		// The versions to read: [lo, hi] in the key's history.
		lo, hi := uint64(0), head.Version
		switch {
		case spec.FromVersion != nil && spec.Backward:
			hi = min(*spec.FromVersion, hi)
		case spec.FromVersion != nil:
			lo = *spec.FromVersion
		case spec.FromOffset != nil:
			v, found, err := part.KeyVersionAt(spec.Key, *spec.FromOffset)
			if err != nil {
				return res, err
			}
			switch {
			case spec.Backward && !found:
			case spec.Backward:
				// At or before the offset: the version found is at or
				// after it.
				e, err := part.KeyEntries(spec.Key, v, 1)
				if err != nil {
					return res, err
				}
				if len(e) == 0 || e[0].Offset > *spec.FromOffset {
					if v == 0 {
						return res, nil
					}
					v--
				}
				hi = v
			case !found:
				return res, nil
			default:
				lo = v
			}
		}
		if lo > hi {
			return res, nil
		}
		var es []partition.KeyEntry
		switch {
		case spec.Last > 0 || spec.Backward:
			n := uint64(spec.Limit)
			if spec.Last > 0 {
				n = min(n, spec.Last)
			}
			from := lo
			if hi-lo+1 > n {
				from = hi - n + 1
				res.More = spec.Backward && spec.Last == 0
			}
			es, err = part.KeyEntries(spec.Key, from, int(hi-from+1))
		default:
			es, err = part.KeyEntries(spec.Key, lo, spec.Limit+1)
			if len(es) > spec.Limit {
				es, res.More = es[:spec.Limit], true
			}
		}
		if err != nil {
			return res, err
		}
		for _, e := range es {
			if e.Version <= hi {
				offs, vers = append(offs, e.Offset), append(vers, e.Version)
			}
		}
	} else {
		after := int64(partition.NoPosition)
		if spec.FromOffset != nil && !spec.Backward && *spec.FromOffset > 0 {
			after = int64(*spec.FromOffset) - 1
		}
		end := vis.Next
		if spec.FromOffset != nil && spec.Backward {
			end = min(end, *spec.FromOffset+1)
		}
		n := spec.Limit
		if spec.Last > 0 {
			n = min(n, int(min(spec.Last, uint64(MaxReadRecords))))
		}
		var all []uint64
		var err error
		if spec.Last > 0 || spec.Backward {
			// The newest n (one more to tell whether more precede them),
			// read backward: the work follows n, not the matches.
			all, err = part.QueryLast(spec.Query, end, n+1)
			if err == nil && len(all) > n {
				res.More = spec.Backward && spec.Last == 0
				all = all[len(all)-n:]
			}
		} else {
			all, err = part.QueryOffsets(spec.Query, after, end, n+1)
			if len(all) > n {
				all, res.More = all[:n], true
			}
		}
		if err != nil {
			return res, err
		}
		offs = all
	}
	recs, err := recordsAt(part, offs, vers, spec.Key)
	if err != nil {
		return res, err
	}
	if spec.Backward {
		slices.Reverse(recs)
	}
	res.Records = recs
	return res, nil
}

// recordsAt reads the records at offs (ascending) through one reader. A
// record that compaction removed is left out. Key reads give key and the
// versions (vers) the index holds; otherwise versions come from each
// batch's versions row.
func recordsAt(part *partition.Partition, offs, vers []uint64, key []byte) ([]ReadRecord, error) {
	r := part.NewReader()
	defer r.Close()
	var out []ReadRecord
	var b *partition.Batch
	for i, off := range offs {
		if b == nil || off >= b.End() || off < b.Base {
			nb, _, err := r.Read(off)
			if errors.Is(err, partition.ErrBelowStart) {
				continue
			}
			if err != nil {
				return nil, err
			}
			b = nb
		}
		it := b.Records.Iter()
		it.SeekDelta(uint32(off - b.Base)) // skip the batch's other records undecoded
		var rec record.Record
		if it.Next(&rec) && b.Base+uint64(rec.OffsetDelta) == off && (key == nil || string(rec.Key) == string(key)) {
			rr := ReadRecord{Record: rec, Offset: off, AppendTime: b.AppendTime}
			if vers != nil {
				rr.Version, rr.HasVersion = vers[i], true
			} else if len(rec.Key) > 0 {
				vs := b.Versions()
				rr.Version, rr.HasVersion = vs.Lookup(rec.OffsetDelta)
			}
			out = append(out, rr)
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
