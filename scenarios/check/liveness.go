package check

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// Liveness compares each fault's figures with the scenario's bounds
// (history.Bounds; a zero bound is not checked). For fault i (index in
// History.Faults) Stats has, in seconds or counts:
//
//	fault<i>.recovery_s    from the fault's end to the End of the first acknowledged publish that ended after it
//	fault<i>.p99_during_s  p99 latency of the acknowledged publishes whose Start is in [fault start, fault end)
//	fault<i>.p99_after_s   the same for [fault end, fault end + the fault's length)
//	fault<i>.acked_during, fault<i>.acked_after  how many publishes those p99s are over
//	fault<i>.p99_ratio     p99 during over baseline_p99_s, the p99 of the publishes sent before the first fault
//
// and over all faults recovery_p50_s, recovery_max_s and unrecovered
// (faults after whose end nothing was acknowledged). A fault with no End
// (never healed) is counted in unhealed and not measured, and one healed
// at or after History.WorkloadEnd in outlasted_workload (nothing was
// published after it). Percentiles are
// nearest-rank; a window without acknowledged publishes has no p99 and
// passes its bound (recovery judges the outage).
func Liveness(h *history.History) Verdict {
	b := newVerdict("liveness", "after each fault a publish is acknowledged within the recovery bound, "+
		"and publish p99 during and after the fault stays within its bounds")
	if len(h.Faults) == 0 {
		return b.skip("no faults injected")
	}
	acked := ackedByEnd(h)
	baseline := quietP99(acked, h.Faults)
	if baseline > 0 {
		b.set("baseline_p99_s", baseline.Seconds())
	}
	var recoveries []time.Duration
	for i, f := range h.Faults {
		if f.End.IsZero() {
			b.inc("unhealed")
			continue
		}
		if outlastedWorkload(h, f) {
			b.inc("outlasted_workload")
			continue
		}
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
	p50, pmax := percentile(recoveries, 0.5), percentile(recoveries, 1)
	b.set("recovery_p50_s", p50.Seconds())
	b.set("recovery_max_s", pmax.Seconds())
	if h.Bounds == (history.Bounds{}) {
		return b.skip("no liveness bounds set (the figures are in Stats)")
	}
	return b.done()
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
