package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/stream"
)

// SubscribeParams is a resolved subscribe request.
type SubscribeParams struct {
	Topic string
	// Partitions to read; empty means all (with Key: the key's).
	Partitions []uint32
	// Key, when set, delivers only the records of this key.
	Key     []byte
	Start   cursor.Start
	Stop    cursor.Stop
	Options stream.Options
	// Group, when set, joins this subscriber group (Start is then where
	// partitions without a committed offset start).
	Group      string
	ClientName string
	// RecordStart, for a group member, commits its start at the end of a
	// partition without a committed offset for the group before the member
	// reads it (groups.JoinSpec.RecordStart). Package api sets it with
	// authorization on.
	RecordStart bool
	// Filter, when set, runs a WebAssembly module over the stream.
	Filter *FilterSpec
	// ReadFrom chooses the replicas the stream reads (reads.go).
	ReadFrom ReadFrom
}

// Subscribe serves one stream until it ends (nil after its end event), ctx
// ends, or it fails.
func (b *Broker) Subscribe(ctx context.Context, sp SubscribeParams, sink stream.Sink) error {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.streams.Add(1)
	b.mu.Unlock()
	defer b.streams.Done()
	// Every stream, and the remote reads behind it (package remote), ends
	// when the node drains.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.draining, cancel)()
	lt, err := b.anyTopic(sp.Topic)
	if err != nil {
		return err
	}
	if sp.Filter != nil {
		f, release, err := b.filter(ctx, sp.Filter)
		if err != nil {
			return err
		}
		defer release()
		sp.Options.Filter = f
	}
	sp.Options.Sched = b.sched
	sp.Options.Delivered = &b.delivered
	sp.Options.Counts = &lt.counters.delivered
	sp.Options.ReplayBytes = &b.streamCounts.replayBytes
	open := &b.streamCounts.open[kindOf(&sp)]
	open.Add(1)
	defer open.Add(-1)
	if sp.Group != "" {
		if lt, err = b.topic(sp.Topic); err != nil {
			return err
		}
		return b.subscribeGroup(ctx, lt, sp, sink)
	}
	n := uint32(len(lt.parts))
	sel := slices.Clone(sp.Partitions)
	if len(sel) == 0 && len(sp.Key) > 0 && sp.Start.Kind != cursor.FromToken {
		sel = []uint32{PartitionForKey(sp.Key, n)}
	}
	sp.Options.Key = sp.Key
	if len(sel) == 0 {
		if sp.Start.Kind == cursor.FromToken {
			for _, p := range sp.Start.Token.Positions {
				sel = append(sel, p.Partition)
			}
		} else {
			for p := range n {
				sel = append(sel, p)
			}
		}
	}
	slices.Sort(sel)
	sel = slices.Compact(sel)
	for _, p := range sel {
		if p >= n {
			return fmt.Errorf("%w: partition %d does not exist (topic %q has %d)", ErrInvalid, p, sp.Topic, n)
		}
	}
	parts, logs, err := b.readSources(ctx, lt, sel, sp.ReadFrom)
	if err != nil {
		return b.streamError(err)
	}
	cursors, err := cursor.Resolve(lt.meta.ID, logs, sel, sp.Start, sp.Stop, b.Now())
	if err != nil {
		return b.streamError(err)
	}
	if len(sp.Key) > 0 && lt.meta.KeyIndex {
		// Through the key index of this node's replica, where it has one;
		// a partition read remotely is filtered by the stream (Options.Key).
		for i, p := range sel {
			if part := lt.parts[p]; part != nil {
				parts[i] = stream.KeyOf(parts[i], part, sp.Key)
			}
		}
	}
	if sp.Options.Now == nil {
		sp.Options.Now = b.cfg.Clock
	}
	return b.streamError(stream.Run(ctx, lt.meta.ID, parts, cursors, sp.Options, sink))
}

// streamError classifies why a stream ended.
func (b *Broker) streamError(err error) error {
	if err != nil && b.draining.Err() != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	if errors.Is(err, ErrTopicDeleted) {
		return fmt.Errorf("%w: %w", ErrNoTopic, err)
	}
	if errors.Is(err, stream.ErrStalled) && !errors.Is(err, partition.ErrCorrupt) {
		return unavailable(err)
	}
	return err
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
