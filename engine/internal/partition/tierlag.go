package partition

import "fmt"

// TierLag is how far a partition's uploads to the tier trail what its
// local limits want moved off the disks.
type TierLag struct {
	// Records are the offsets from the upload point (the manifest's end,
	// or the log start before the first upload) up to the local boundary
	// (PlanLocal) lowered to a batch boundary, since only whole batches
	// move: eligible to move, not uploaded yet. 0 when caught up.
	Records uint64
	// Nanos is the age of the oldest of them (now minus the append time
	// of the record at the upload point); 0 when caught up.
	Nanos int64
}

// UploadLag returns the partition's TierLag at now (Unix nanoseconds), and
// false when the partition has no local limits or this node no tier. Each
// replica computes it from its own state; the leader is the one whose
// uploads close it.
func (p *Partition) UploadLag(now int64) (TierLag, bool, error) {
	pol := p.Policy()
	if p.cfg.Tier == nil || (pol.LocalMaxAge <= 0 && pol.LocalMaxBytes == 0) {
		return TierLag{}, false, nil
	}
	x, ok, err := p.PlanLocal(now)
	if err != nil {
		return TierLag{}, false, err
	}
	loc := p.local()
	up := tierEnd(p.Tiered(), loc.LogStart)
	if !ok || x <= up {
		return TierLag{}, true, nil
	}
	if x < loc.Next {
		_, base, err := p.lookup(x, loc)
		if err != nil {
			return TierLag{}, false, fmt.Errorf("partition %d: upload lag: %w", p.cfg.Index, err)
		}
		if x = base; x <= up {
			return TierLag{}, true, nil
		}
	}
	t, err := p.TimeOf(up)
	if err != nil {
		return TierLag{}, false, fmt.Errorf("partition %d: upload lag: %w", p.cfg.Index, err)
	}
	return TierLag{Records: x - up, Nanos: max(now-t, 0)}, true, nil
}
