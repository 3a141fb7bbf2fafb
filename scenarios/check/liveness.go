package check

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// Liveness compares each fault's figures with the scenario's bounds
// (history.Bounds; a zero bound is not checked).
//
// The figure that says what users feel is the failover time: for each
// fault and each partition of the first topic, the longest time the
// partition went without an acknowledged publish, from the fault's start
// until the first acknowledgement on it after the fault ended. A partition
// whose leader the fault took waits from the fault's start (its publishers'
// requests hang) until a new leader acknowledges; one the fault did not
// touch goes on acknowledging, its figure the usual gap between two
// acknowledgements. An acknowledgement that was on its way when the fault
// began does not hide the stall after it: every gap in the window counts.
// FailoverWithin bounds the maximum over every fault and partition, never
// a percentile: one stuck partition fails the run.
//
// For fault i (index in History.Faults) Stats has, in seconds or counts:
//
//	fault<i>.failover_s      the longest failover time of any partition in fault i
//	fault<i>.p<P>.failover_s partition P's
//	fault<i>.recovery_s      from the fault's end to the End of the first acknowledged publish (any partition) that ended after it
//	fault<i>.p99_during_s    p99 latency of the acknowledged publishes whose Start is in [fault start, fault end)
//	fault<i>.p99_after_s     the same for [fault end, fault end + the fault's length)
//	fault<i>.acked_during, fault<i>.acked_after  how many publishes those p99s are over
//	fault<i>.p99_ratio       p99 during over baseline_p99_s, the p99 of the publishes sent before the first fault
//
// and over all faults failover_max_s (the worst partition of the worst
// fault) and failover_p50_s (the median of the faults' worst partitions),
// recovery_p50_s, recovery_max_s, unrecovered (faults after whose end
// nothing was acknowledged) and stuck (fault and partition pairs with no
// acknowledgement on the partition after the fault ended). A partition on
// which nothing was ever acknowledged is not measured (unmeasured_partitions).
// A fault with no End (never healed) is counted in unhealed and not
// measured. One healed at or after History.WorkloadEnd is counted in
// outlasted_workload: nothing was published after it, so it has no
// recovery, and its failover time is measured up to the workload's end
// (a partition that waited longer than the bound by then fails it).
// Percentiles are nearest-rank; a window without acknowledged publishes
// has no p99 and passes its bound (the failover time judges the outage).
func Liveness(h *history.History) Verdict {
	b := newVerdict("liveness", "no partition goes longer than the failover bound without an acknowledged publish during each fault, "+
		"and publish p99 during and after the fault stays within its bounds")
	if len(h.Faults) == 0 {
		return b.skip("no faults injected")
	}
	acked := ackedByEnd(h)
	byPart := ackedByPartition(h, acked)
	b.set("unmeasured_partitions", float64(unmeasured(h, byPart)))
	baseline := quietP99(acked, h.Faults)
	if baseline > 0 {
		b.set("baseline_p99_s", baseline.Seconds())
	}
	var recoveries, failovers []time.Duration
	for i, f := range h.Faults {
		if f.End.IsZero() {
			b.inc("unhealed")
			continue
		}
		if outlastedWorkload(h, f) {
			// Nothing was published after it: only the part of it the
			// workload saw is measured, and a partition that waited
			// longer than the bound in that part fails it.
			b.inc("outlasted_workload")
			part := f
			part.End = h.WorkloadEnd
			failovers = append(failovers, failover(b, h, byPart, i, part, true))
			continue
		}
		failovers = append(failovers, failover(b, h, byPart, i, f, false))
		if rec, ok := recovery(acked, f); ok {
			recoveries = append(recoveries, rec)
			b.set(fmt.Sprintf("fault%d.recovery_s", i), rec.Seconds())
			if bound := h.Bounds.RecoverWithin; bound > 0 && rec > bound {
				b.addf(nil, nil, "%s: the first acknowledgement came %s after the fault ended, bound %s", faultName(i, f), rec, bound)
			}
		} else {
			b.inc("unrecovered")
			if h.Bounds.RecoverWithin > 0 {
				b.addf(nil, nil, "%s: no publish was acknowledged after the fault ended", faultName(i, f))
			}
		}
		length := f.End.Sub(f.Start)
		during := window(b, acked, f, i, "during", f.Start, f.End, h.Bounds.PublishP99During)
		window(b, acked, f, i, "after", f.End, f.End.Add(length), h.Bounds.PublishP99After)
		if baseline > 0 && during > 0 {
			ratio := float64(during) / float64(baseline)
			b.set(fmt.Sprintf("fault%d.p99_ratio", i), ratio)
			if r := h.Bounds.PublishP99Ratio; r > 0 && ratio > r {
				b.addf(nil, nil, "%s: publish p99 during the fault was %s, %.1f× the %s before the first fault, bound ×%g",
					faultName(i, f), during, ratio, baseline, r)
			}
		}
	}
	b.set("failover_p50_s", percentile(failovers, 0.5).Seconds())
	b.set("failover_max_s", percentile(failovers, 1).Seconds())
	p50, pmax := percentile(recoveries, 0.5), percentile(recoveries, 1)
	b.set("recovery_p50_s", p50.Seconds())
	b.set("recovery_max_s", pmax.Seconds())
	if h.Bounds == (history.Bounds{}) {
		return b.skip("no liveness bounds set (the figures are in Stats)")
	}
	return b.done()
}

// failover measures fault i's failover time on every partition (see
// Liveness), checks each against the bound and returns the longest. cut:
// f ends with the workload, nothing came after it, so a partition that had
// no acknowledgement after f.End is not stuck.
func failover(b *verdict, h *history.History, byPart map[part][]history.Publish, i int, f history.Fault, cut bool) time.Duration {
	var worst time.Duration
	for _, p := range sortedParts(byPart) {
		stall, stuck := longestStall(byPart[p], f, h.WorkloadEnd)
		b.set(fmt.Sprintf("fault%d.p%d.failover_s", i, p.id), stall.Seconds())
		worst = max(worst, stall)
		bound := h.Bounds.FailoverWithin
		switch {
		case stuck && !cut:
			b.inc("stuck")
			if bound > 0 {
				b.addf(nil, nil, "%s: partition %s had no acknowledged publish after the fault ended (none for %s from %s)",
					faultName(i, f), p, stall.Round(time.Millisecond), offsetOf(h, f.Start))
			}
		case bound > 0 && stall > bound:
			b.addf(nil, nil, "%s: partition %s went %s without an acknowledged publish (failover), bound %s",
				faultName(i, f), p, stall.Round(time.Millisecond), bound)
		}
	}
	b.set(fmt.Sprintf("fault%d.failover_s", i), worst.Seconds())
	return worst
}

// longestStall is the longest stretch without an acknowledgement among
// acked (one partition's, sorted by End) from f's start until the first
// acknowledgement at or after f's end. stuck: there was none after the
// end; the last stretch is then measured to the later of f's end and
// workloadEnd.
func longestStall(acked []history.Publish, f history.Fault, workloadEnd time.Time) (stall time.Duration, stuck bool) {
	i, _ := slices.BinarySearchFunc(acked, f.Start, func(p history.Publish, t time.Time) int {
		if !p.End.After(t) {
			return -1
		}
		return 1
	})
	prev := f.Start
	for ; i < len(acked); i++ {
		stall = max(stall, acked[i].End.Sub(prev))
		prev = acked[i].End
		if !prev.Before(f.End) {
			return stall, false
		}
	}
	end := f.End
	if workloadEnd.After(end) {
		end = workloadEnd
	}
	return max(stall, end.Sub(prev)), true
}

// ackedByPartition splits acked (sorted by End) by partition of the first
// topic.
func ackedByPartition(h *history.History, acked []history.Publish) map[part][]history.Publish {
	out := map[part][]history.Publish{}
	if len(h.Topics) == 0 {
		return out
	}
	topic := h.Topics[0].Name
	for _, p := range acked {
		if p.Topic == topic {
			k := part{topic, p.Partition}
			out[k] = append(out[k], p)
		}
	}
	return out
}

// unmeasured counts the first topic's partitions without any
// acknowledged publish.
func unmeasured(h *history.History, byPart map[part][]history.Publish) int {
	if len(h.Topics) == 0 {
		return 0
	}
	return max(0, int(h.Topics[0].Partitions)-len(byPart))
}

func sortedParts(m map[part][]history.Publish) []part {
	ps := make([]part, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b part) int { return cmp.Compare(a.id, b.id) })
	return ps
}

// offsetOf is t as an offset from the run's start, for messages.
func offsetOf(h *history.History, t time.Time) string {
	if h.Start.IsZero() {
		return t.Format(time.RFC3339Nano)
	}
	return "+" + t.Sub(h.Start).Round(time.Millisecond).String()
}

// ackedByEnd returns the acknowledged publishes sorted by End.
func ackedByEnd(h *history.History) []history.Publish {
	var acked []history.Publish
	for _, p := range h.Publishes {
		if p.Outcome == history.Acked {
			acked = append(acked, p)
		}
	}
	slices.SortStableFunc(acked, func(a, b history.Publish) int { return a.End.Compare(b.End) })
	return acked
}

// recovery is the time from a fault's end to the first acknowledgement
// at or after it.
func recovery(acked []history.Publish, f history.Fault) (time.Duration, bool) {
	i, _ := slices.BinarySearchFunc(acked, f.End, func(p history.Publish, t time.Time) int { return p.End.Compare(t) })
	if i == len(acked) {
		return 0, false
	}
	return acked[i].End.Sub(f.End), true
}

// quietP99 is the p99 of the publishes sent before the first fault
// began (0: none).
func quietP99(acked []history.Publish, faults []history.Fault) time.Duration {
	if len(faults) == 0 {
		return 0
	}
	first := faults[0].Start
	for _, f := range faults {
		if f.Start.Before(first) {
			first = f.Start
		}
	}
	var lat []time.Duration
	for _, p := range acked {
		if p.Start.Before(first) {
			lat = append(lat, p.End.Sub(p.Start))
		}
	}
	return percentile(lat, 0.99)
}

// window measures the p99 of the publishes sent in [from, to), checks it
// against bound, and returns it (0: no publish).
func window(b *verdict, acked []history.Publish, f history.Fault, i int, name string, from, to time.Time, bound time.Duration) time.Duration {
	var lat []time.Duration
	for _, p := range acked {
		if !p.Start.Before(from) && p.Start.Before(to) {
			lat = append(lat, p.End.Sub(p.Start))
		}
	}
	b.set(fmt.Sprintf("fault%d.acked_%s", i, name), float64(len(lat)))
	if len(lat) == 0 {
		return 0
	}
	p99 := percentile(lat, 0.99)
	b.set(fmt.Sprintf("fault%d.p99_%s_s", i, name), p99.Seconds())
	if bound > 0 && p99 > bound {
		b.addf(nil, nil, "%s: publish p99 %s the fault was %s over %d publishes, bound %s",
			faultName(i, f), name, p99, len(lat), bound)
	}
	return p99
}

// percentile is the nearest-rank q-quantile (0 < q ≤ 1) of ds, 0 when
// empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

func faultName(i int, f history.Fault) string {
	return fmt.Sprintf("fault %d %q (%s of nodes %v)", i, f.Name, f.Kind, f.Targets)
}

// outlastedWorkload reports whether fault f was healed only once the
// workload was over: no publish could come after it, so it has no recovery
// to measure.
func outlastedWorkload(h *history.History, f history.Fault) bool {
	return !h.WorkloadEnd.IsZero() && !f.End.Before(h.WorkloadEnd)
}
