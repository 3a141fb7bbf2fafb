package partition

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rewind-io/rewind/engine/internal/keys"
	"github.com/rewind-io/rewind/internal/failpoint"
)

// Subscriber group state, kept in the partition's own raft group so that a
// group's committed offset is replicated, and fenced, together with the
// records it points into.
//
// Each group has one row per partition: the committed offset, a fence
// (the lowest assignment generation still allowed to commit) and the reset
// epoch. All changes are raft commands applied in log order, so a commit
// and the fence that invalidates it are ordered the same way on every
// replica: a zombie's commit that arrives after its partition moved is
// rejected at apply, never half-accepted.

// ErrFenced is returned for a commit whose generation is older than the
// partition's fence for the group.
var ErrFenced = errors.New("partition: commit from a stale generation")

// FencedError says which generation is current.
type FencedError struct {
	Group      string
	Generation uint64 // the commit's
	Fence      uint64 // the lowest generation accepted
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("group %q: commit from generation %d, but generation %d is current", e.Group, e.Generation, e.Fence)
}

// Is makes a FencedError an ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// GroupOpKind is what a group command does.
type GroupOpKind string

// Group commands.
const (
	// OpCommit records Offset if Generation >= the fence (and raises the
	// fence to Generation).
	OpCommit GroupOpKind = "commit"
	// OpFence raises the fence to Generation: commits of older generations
	// are rejected from now on.
	OpFence GroupOpKind = "fence"
	// OpReset sets Offset and Epoch and raises the fence to Generation.
	OpReset GroupOpKind = "reset"
	// OpDelete removes the group's row.
	OpDelete GroupOpKind = "delete"
)

// GroupOp is one group command.
type GroupOp struct {
	Kind       GroupOpKind `json:"kind"`
	Group      string      `json:"group"`
	Generation uint64      `json:"gen,omitempty"`
	Offset     uint64      `json:"offset,omitempty"`
	Epoch      uint64      `json:"epoch,omitempty"`
	Time       int64       `json:"time,omitempty"` // proposer's clock, kept as the commit time
}

// GroupState is a group's row in one partition.
type GroupState struct {
	Committed  bool   `json:"committed"`
	Offset     uint64 `json:"offset"`
	Fence      uint64 `json:"fence"`
	Epoch      uint64 `json:"epoch"`
	CommitTime int64  `json:"time"`
}

// pendingOp is a queued or in-flight group command.
type pendingOp struct {
	kind    byte   // entry kind: kindGroup, kindTruncate, kindCompact
	payload []byte // JSON
	state   GroupState
	err     error
	done    chan struct{}
	term    uint64 // the raft term it was proposed at (0: not yet, or forwarded)
	// forwardedTo is the leader a follower forwarded it to (0: proposed
	// as leader, or not yet).
	forwardedTo uint64
}

// groupEntry is a group command as a raft entry: kind, proposal id, JSON.
// commandEntry is a command as a raft entry: kind, proposal id, JSON.
func commandEntry(kind byte, id uint64, payload []byte) []byte {
	e := make([]byte, 9, 9+len(payload))
	e[0] = kind
	binary.LittleEndian.PutUint64(e[1:], id)
	return append(e, payload...)
}

// command proposes a command entry and waits until it is applied.
func (p *Partition) command(ctx context.Context, kind byte, v any) (GroupState, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return GroupState{}, err
	}
	po := &pendingOp{kind: kind, payload: js, done: make(chan struct{})}
	p.mu.Lock()
	if err := p.mu.err; err != nil {
		p.mu.Unlock()
		return GroupState{}, err
	}
	p.mu.ops = append(p.mu.ops, po)
	p.mu.Unlock()
	p.cfg.Host.Wake(p.cfg.Group)
	select {
	case <-po.done:
		return po.state, po.err
	case <-ctx.Done():
		return GroupState{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// GroupCommand proposes a group command and waits until it is applied. It returns
// the group's state after it (a rejected commit: the state unchanged and a
// *FencedError).
func (p *Partition) GroupCommand(ctx context.Context, op GroupOp) (GroupState, error) {
	if op.Group == "" {
		return GroupState{}, errors.New("partition: group command without a group")
	}
	return p.command(ctx, kindGroup, op)
}

// proposeOps encodes queued group commands.
func (p *Partition) proposeOps(dst [][]byte, ops []*pendingOp) [][]byte {
	for _, po := range ops {
		p.nextID++
		po.term = p.proposingTerm
		if po.term == 0 {
			po.forwardedTo = p.raftLeader
		}
		p.opFlights[p.nextID] = po
		dst = append(dst, commandEntry(po.kind, p.nextID, po.payload))
	}
	return dst
}

// groupState reads a group's row: this pass's uncommitted writes first.
func (p *Partition) groupState(name string) (GroupState, bool, error) {
	if st, ok := p.passGroups[name]; ok {
		return st.state, st.exists, nil
	}
	return p.readGroupState(name)
}

func (p *Partition) readGroupState(name string) (GroupState, bool, error) {
	v, closer, err := p.cfg.DB.Get(keys.CommitKey(p.cfg.Group, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return GroupState{}, false, nil
	}
	if err != nil {
		return GroupState{}, false, err
	}
	defer closer.Close()
	var st GroupState
	if err := json.Unmarshal(v, &st); err != nil {
		return GroupState{}, false, fmt.Errorf("partition %d: %w: group row: %v", p.cfg.Index, ErrCorrupt, err)
	}
	return st, true, nil
}

type passGroup struct {
	state  GroupState
	exists bool
}

// applyCommand applies one command entry (group, truncate or compact).
func (p *Partition) applyCommand(w *pebble.Batch, data []byte) error {
	if len(data) < 9 {
		return fmt.Errorf("partition %d: %w: command of %d bytes", p.cfg.Index, ErrCorrupt, len(data))
	}
	id := binary.LittleEndian.Uint64(data[1:])
	var opErr error
	var err error
	switch data[0] {
	case kindTruncate:
		var c truncateCmd
		if err := json.Unmarshal(data[9:], &c); err != nil {
			return fmt.Errorf("partition %d: %w: truncate command: %v", p.cfg.Index, ErrCorrupt, err)
		}
		opErr, err = p.applyTruncate(w, c)
	case kindTier:
		var c TierSegment
		if err := json.Unmarshal(data[9:], &c); err != nil {
			return fmt.Errorf("partition %d: %w: tier command: %v", p.cfg.Index, ErrCorrupt, err)
		}
		opErr, err = p.applyTier(w, c)
	case kindCompact:
		var c compactCmd
		if err := json.Unmarshal(data[9:], &c); err != nil {
			return fmt.Errorf("partition %d: %w: compact command: %v", p.cfg.Index, ErrCorrupt, err)
		}
		opErr, err = p.applyCompact(w, c)
	default:
		return p.applyGroup(w, id, data[9:])
	}
	if err != nil {
		return err
	}
	p.opResults = append(p.opResults, opResult{id: id, err: opErr})
	return nil
}

// applyGroup applies one group command.
func (p *Partition) applyGroup(w *pebble.Batch, id uint64, js []byte) error {
	var op GroupOp
	if err := json.Unmarshal(js, &op); err != nil {
		return fmt.Errorf("partition %d: %w: group command: %v", p.cfg.Index, ErrCorrupt, err)
	}
	st, exists, err := p.groupState(op.Group)
	if err != nil {
		return err
	}
	var opErr error
	switch op.Kind {
	case OpCommit:
		if op.Generation < st.Fence && !failpoint.Enabled(failpoint.BugAcceptFencedCommit) {
			opErr = &FencedError{Group: op.Group, Generation: op.Generation, Fence: st.Fence}
			break
		}
		st.Committed, st.Offset, st.Fence, st.CommitTime = true, op.Offset, max(st.Fence, op.Generation), op.Time
		exists = true
	case OpFence:
		st.Fence = max(st.Fence, op.Generation)
		exists = true
	case OpReset:
		st.Committed, st.Offset, st.Epoch, st.CommitTime = true, op.Offset, op.Epoch, op.Time
		st.Fence = max(st.Fence, op.Generation)
		exists = true
	case OpDelete:
		st, exists = GroupState{}, false
	default:
		// A command kind this build does not know: skip it the same way on
		// every replica, and tell its proposer.
		opErr = fmt.Errorf("partition: unknown group command %q", op.Kind)
	}
	if opErr == nil {
		k := keys.CommitKey(p.cfg.Group, op.Group)
		if exists {
			v, err := json.Marshal(st)
			if err != nil {
				return err
			}
			err = w.Set(k, v, nil)
			if err != nil {
				return err
			}
		} else if err := w.Delete(k, nil); err != nil {
			return err
		}
		p.passGroups[op.Group] = passGroup{state: st, exists: exists}
	}
	p.opResults = append(p.opResults, opResult{id: id, state: st, err: opErr})
	return nil
}

type opResult struct {
	id    uint64
	state GroupState
	err   error
}

// GroupState returns a group's committed state in this partition.
func (p *Partition) GroupState(name string) (GroupState, bool, error) { return p.readGroupState(name) }

// GroupNames returns the groups with a row in this partition.
func (p *Partition) GroupNames() ([]string, error) {
	s, e := keys.GroupSpan(keys.Commit, p.cfg.Group)
	it, err := p.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: s, UpperBound: e})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []string
	for valid := it.First(); valid; valid = it.Next() {
		if n, ok := keys.CommitKeyName(it.Key()); ok {
			out = append(out, n)
		}
	}
	return out, it.Error()
}
