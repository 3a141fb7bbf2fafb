package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/route"
	"github.com/rewind-io/rewind/raftlog"
	"github.com/rewind-io/rewind/raftlog/transport"
)

// Routing is package route's (every hop to another member); this file is
// the broker's side of it: the partitions and members as the router sees
// them, the operations it runs, and the broker's names for its errors.

// ErrNotStored marks a failed publish that certainly stored nothing (the
// request was refused before it was queued, or raft discarded it), so
// retrying it cannot duplicate records.
var ErrNotStored = route.ErrNotStored

// NotLeaderError is the answer of a node that was asked (by another node)
// to serve a partition it does not lead (route.NotLeaderError).
type NotLeaderError = route.NotLeaderError

// LeaderHintError is the answer of a node that could not get a request to
// a partition's leader, naming the leader for the client
// (route.LeaderHintError).
type LeaderHintError = route.LeaderHintError

// notStored says a publish was given up before anything was stored
// (route.NotStored).
func notStored(last error) error { return route.NotStored(last) }

// notForwarded clears a forwarded request's hop (a record moved to the
// partition its key is bound to is sent on, once).
func notForwarded(ctx context.Context) context.Context {
	return route.WithHop(ctx, route.FromClient)
}

// forwarded reports whether another node sent the request here (forwarded
// or relayed): its keys are bound already.
func forwarded(ctx context.Context) bool { return route.HopOf(ctx) != route.FromClient }

// relayed reports whether another node relayed the request here.
func relayed(ctx context.Context) bool { return route.HopOf(ctx) == route.Relayed }

// book is the broker as the router's address book.
type book Broker

func (k *book) Addr(node uint64) (string, bool) { return (*Broker)(k).Addr(node) }

func (k *book) Members() []uint64 {
	nodes := k.meta.Nodes()
	ids := make([]uint64, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	return ids
}

func (k *book) Reachable(node uint64) bool { return k.tr == nil || k.tr.Reachable(node) }

// newTransport builds the raft transport between members from
// Config.Transport, wired to this broker. Its callbacks need no reference
// to anything built later: the transport calls Resolve, Unreachable and
// SnapshotStatus only for messages the host sends, so after Open has set
// b.host and b.meta and added the metadata group, and Deliver and Allowed
// only for inbound streams, which reach it once the caller serves its
// Handler, after Open returns.
func (b *Broker) newTransport() (*transport.Transport, error) {
	tc := b.cfg.Transport
	tc.ClusterID, tc.NodeID = b.cfg.Cluster.ID, b.cfg.NodeID
	if tc.Logger == nil {
		tc.Logger = b.log.Named("transport")
	}
	tc.Resolve = func(n uint64) (string, bool) {
		addr, ok := b.Addr(n)
		if ok && b.cfg.PeerScheme != "" && b.cfg.PeerScheme != "http" {
			addr = b.cfg.PeerScheme + "://" + addr
		}
		return addr, ok
	}
	tc.Deliver = func(envs []raftlog.Envelope) { b.host.Deliver(b.admit(envs)) }
	tc.Unreachable = func(n uint64) { b.host.ReportUnreachable(n) }
	tc.SnapshotStatus = func(g, n uint64, failed bool) { b.host.ReportSnapshot(g, n, failed) }
	tc.Allowed = b.IsMember
	return transport.New(tc)
}

// Transport returns the raft transport between members (nil alone): the
// caller serves its Handler, reads its Stats, and closes it after Close
// (or before Drain, to end the raft streams first).
func (b *Broker) Transport() *transport.Transport { return b.tr }

func (b *Broker) closeTransport() {
	if b.tr != nil {
		b.tr.Close()
	}
}

// newRouter returns the router of a broker configured by cfg: without
// peers it never hops.
func (b *Broker) newRouter() *route.Router {
	rc := route.Config{
		Self: b.cfg.NodeID, ForwardTimeout: b.cfg.ForwardTimeout, NewLeaderWait: b.cfg.NewLeaderWait,
		NoLeaderWait: b.noLeaderWait(), Logger: b.log.Named("route"),
	}
	if b.clustered() {
		rc.Book = (*book)(b)
	}
	return route.New(rc)
}

// noLeaderWait is how long a partition may have no leader this node
// reaches before its requests fail at once: three election timeouts. A
// dead leader is replaced within two (and the transport finds it
// unreachable at once, so failing then would fail every publish of an
// election); a leader that stays unreachable longer is cut off from this
// node only (PreVote and CheckQuorum keep it leading the others).
func (b *Broker) noLeaderWait() time.Duration {
	return 3 * time.Duration(b.cfg.Cluster.ElectionTicks) * b.cfg.Cluster.TickInterval
}

// routed returns partition p of lt as the router sees it. A read skips a
// local replica that failed (its leader view is stale).
func (b *Broker) routed(lt *liveTopic, p uint32, read bool) route.Part {
	rp := route.Part{Topic: lt.meta.Name, Index: p, Replicas: lt.meta.ReplicasOf(int(p))}
	if int(p) < len(lt.meta.Groups) {
		rp.Group = lt.meta.Groups[p]
	}
	if part := lt.parts[p]; part != nil && (!read || part.Err() == nil) {
		rp.Local = part
	}
	return rp
}

// noReplica is a local attempt on a partition without a replica here.
func (b *Broker) noReplica(lt *liveTopic, p uint32) error {
	return fmt.Errorf("%w: %w: partition %d of %q has no replica on node %d", partition.ErrNotLeader, ErrNotStored, p, lt.meta.Name, b.cfg.NodeID)
}

// publishPartition publishes one partition's records: on this node if it
// leads the partition, else on the leader (route.Router.Write).
func (b *Broker) publishPartition(ctx context.Context, lt *liveTopic, p uint32, recs []record.Record, conds *partition.Conditions) (a *partition.Append, res []PublishResult, err error) {
	// The router may try here, lose the leadership (ErrNotLeader) and then
	// forward: only the attempt that succeeded may leave its outcome, or
	// the failed local Append (no offsets) would stand for the leader's
	// results.
	op := route.Op{Local: func() error {
		a, res = nil, nil
		part := lt.parts[p]
		if part == nil {
			return b.noReplica(lt, p)
		}
		ap, err := part.EnqueueIf(ctx, recs, conds)
		if err == nil {
			err = ap.Wait(ctx)
		}
		if err == nil || !errors.Is(err, partition.ErrNotLeader) {
			a = ap // its conflict or dedupe outcome, or its offsets
		}
		return err
	}}
	if b.cfg.PeerClients != nil {
		op.Remote = func(ctx context.Context, node uint64, addr string, relay bool) error {
			a, res = nil, nil
			out, err := b.cfg.PeerClients.Publish(ctx, node, addr, lt.meta.Name, p, recs, conds, relay)
			if err != nil {
				return b.lagging(lt, node, peerError(err, false))
			}
			res = make([]PublishResult, len(out))
			for i, o := range out {
				res[i] = PublishResult{Partition: o.Partition, Offset: o.Offset, AppendTime: o.AppendTime, Duplicate: o.Duplicate,
					KeyVersion: o.KeyVersion, HasKeyVersion: o.HasKeyVersion}
			}
			return nil
		}
	}
	err = b.route.Write(ctx, b.routed(lt, p, false), op)
	return a, res, err
}

// lagging turns a member's "no such topic" into a refusal that stored
// nothing, to retry, while this node still knows the topic: the member has
// not applied its creation yet (a topic just created, its partition
// leaders behind the metadata leader on a busy machine).
func (b *Broker) lagging(lt *liveTopic, node uint64, err error) error {
	if !errors.Is(err, ErrNoTopic) {
		return err
	}
	if t, ok := b.meta.Topic(lt.meta.Name); !ok || t.ID != lt.meta.ID {
		return err
	}
	return route.NotStored(fmt.Errorf("node %d does not know topic %q yet: %w", node, lt.meta.Name, err))
}

// peerError names a member's refusal (a *route.RefusedError) in the
// broker's errors; other errors are already classified. A read's (or a
// binding's) NotFound means the topic was deleted.
func peerError(err error, read bool) error {
	var re *route.RefusedError
	if !errors.As(err, &re) {
		return err
	}
	switch re.Refusal {
	case route.RefusedConflict:
		c := re.Conflict
		return &ConflictError{Index: c.Index, Key: c.Key, Partition: c.Partition, Offset: c.Offset, OffsetUnknown: c.OffsetUnknown}
	case route.RefusedCondition:
		return re.Condition
	case route.RefusedInvalid:
		return fmt.Errorf("%w: %s", ErrInvalid, re.Msg)
	case route.RefusedNotFound:
		if read {
			return fmt.Errorf("%w: %w: %s", ErrNoTopic, ErrTopicDeleted, re.Msg)
		}
		return fmt.Errorf("%w: %s", ErrNoTopic, re.Msg)
	case route.RefusedPrecondition:
		return fmt.Errorf("%w: node %d: %s", ErrFailedPrecondition, re.Node, re.Msg)
	}
	return err
}
