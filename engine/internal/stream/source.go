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

// CatchUpFrom returns a source that reads what replica holds from replica,
// and everything else from leader: leader gives the bounds, the time
// watermark and the notifications, so the stream sees exactly what a
// stream reading leader alone would, while the history it catches up on is
// read from replica (a follower's replica on this node, which the leader's
// live path does not share). Every replica holds the same batches at the
// same offsets; a batch replica does not have yet, or fails to read, comes
// from leader.
func CatchUpFrom(replica, leader Source) Source { return tiered{replica, leader} }

type tiered struct{ replica, leader Source }

func (t tiered) Bounds() partition.State                   { return t.leader.Bounds() }
func (t tiered) TimeWatermark() int64                      { return t.leader.TimeWatermark() }
func (t tiered) Err() error                                { return t.leader.Err() }
func (t tiered) Notify(ch chan<- struct{}) (cancel func()) { return t.leader.Notify(ch) }
func (t tiered) OpenReader() BatchReader                   { return &tieredReader{t: t} }

// tieredReader opens each side's reader on first use.
type tieredReader struct {
	t    tiered
	r, l BatchReader
}

func (tr *tieredReader) Read(from uint64) (*partition.Batch, error) {
	if rb := tr.t.replica.Bounds(); from >= rb.LogStart && from < rb.Next && tr.t.replica.Err() == nil {
		if tr.r == nil {
			tr.r = tr.t.replica.OpenReader()
		}
		if b, err := tr.r.Read(from); err == nil {
			return b, nil
		}
		// Retention moved past it, or the replica stopped: the leader
		// decides.
	}
	if tr.l == nil {
		tr.l = tr.t.leader.OpenReader()
	}
	return tr.l.Read(from)
}

func (tr *tieredReader) Close() {
	if tr.r != nil {
		tr.r.Close()
	}
	if tr.l != nil {
		tr.l.Close()
	}
}
