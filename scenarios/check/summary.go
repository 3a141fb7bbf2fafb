package check

import (
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// Stats are the figures of one run for the report's and
// docs/reliability.md's table.
type Stats struct {
	// Operations counts what the workload did: publishes, reads, follows
	// and group commits and resets (deliveries are not operations).
	Operations int
	Publishes  int
	Acked      int
	Failed     int
	Unknown    int
	// Lost: acknowledged publishes missing from a replica that should
	// hold them. Duplicated: publishes stored more than once on a
	// replica. Reordered: acknowledged publishes stored at another offset
	// than acknowledged, or acknowledged out of their publisher's order.
	// All three are 0 when no replica was recorded.
	Lost, Duplicated, Reordered int
	// Faults injected; Recovery* over those followed by an
	// acknowledgement (see Liveness); Unrecovered: the others.
	Faults                   int
	RecoveryP50, RecoveryMax time.Duration
	Unrecovered              int
}

// Summary counts a run's operations and outcomes and the Log checker's
// lost, duplicated and reordered records.
func Summary(h *history.History) Stats {
	s := Stats{Publishes: len(h.Publishes), Faults: len(h.Faults)}
	for _, p := range h.Publishes {
		switch p.Outcome {
		case history.Acked:
			s.Acked++
		case history.Failed:
			s.Failed++
		case history.Unknown:
			s.Unknown++
		}
	}
	s.Operations = len(h.Publishes) + len(h.Reads) + len(h.Follows)
	for _, ev := range h.Groups {
		if ev.Kind == history.Committed || ev.Kind == history.CommitRefused || ev.Kind == history.Reset || ev.Kind == history.ResetUnknown {
			s.Operations++
		}
	}
	if len(h.Replicas) > 0 {
		_, c := checkLog(newIndex(h))
		s.Lost, s.Duplicated, s.Reordered = c.lost, c.duplicated, c.reordered
	}
	acked := ackedByEnd(h)
	var recoveries []time.Duration
	for _, f := range h.Faults {
		if f.End.IsZero() || outlastedWorkload(h, f) {
			continue
		}
		if r, ok := recovery(acked, f); ok {
			recoveries = append(recoveries, r)
		} else {
			s.Unrecovered++
		}
	}
	s.RecoveryP50, s.RecoveryMax = percentile(recoveries, 0.5), percentile(recoveries, 1)
	return s
}
