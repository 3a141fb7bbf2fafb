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
	// Faults injected. FailoverMax is the longest a partition went
	// without an acknowledged publish during a fault, FailoverP50 the
	// median over the faults of their worst partition's (see Liveness):
	// what a publisher waited. Recovery* are from each fault's end to the
	// next acknowledgement on any partition, over the faults followed by
	// one; Unrecovered: the others. Measured: some fault was measured (the
	// failover and recovery figures mean something).
	Faults                   int
	Measured                 bool
	FailoverP50, FailoverMax time.Duration
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
	if len(h.Faults) == 0 {
		return s
	}
	lv := Liveness(h).Stats
	sec := func(name string) time.Duration { return time.Duration(lv[name] * float64(time.Second)) }
	s.Measured = int(lv["unhealed"]) < len(h.Faults)
	s.FailoverP50, s.FailoverMax = sec("failover_p50_s"), sec("failover_max_s")
	s.RecoveryP50, s.RecoveryMax = sec("recovery_p50_s"), sec("recovery_max_s")
	s.Unrecovered = int(lv["unrecovered"])
	return s
}
