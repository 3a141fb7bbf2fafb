package stream

import "github.com/rewind-io/rewind/engine/internal/partition"

// Source is a partition as a stream reads it: the node's own replica
// (Local), or a replica on another node read through the cluster (package
// remote). Every method may be called from the stream's goroutine only,
// except Notify's channel sends.
type Source interface {
	// Bounds returns what may be read.
	Bounds() partition.State
	// TimeWatermark returns a time no later than the append time of any
	// record that becomes readable from now on.
	TimeWatermark() int64
	// Err returns why the source stopped for good, or nil.
	Err() error
	// Notify registers ch for a non-blocking send whenever Bounds or Err
	// may have changed. Call the returned func to stop.
	Notify(ch chan<- struct{}) (cancel func())
	// OpenReader returns a reader of the source's batches.
	OpenReader() BatchReader
}

// BatchReader reads a source's batches in offset order.
type BatchReader interface {
	// Read returns the batch holding offset from, which is below the
	// source's visible end. The batch is never modified.
	Read(from uint64) (*partition.Batch, error)
	Close()
}

// Local returns the source that reads p, a replica on this node.
func Local(p *partition.Partition) Source { return localSource{p} }

type localSource struct{ *partition.Partition }

func (l localSource) OpenReader() BatchReader { return localReader{l.NewReader()} }

type localReader struct{ *partition.Reader }

func (r localReader) Read(from uint64) (*partition.Batch, error) {
	b, _, err := r.Reader.Read(from)
	return b, err
}
