package httpedge

import "sync/atomic"

// Counts are what the guards of this process refused since it started,
// summed over its listeners and servers (a process serves one node; tests
// that run several read differences). /metrics exposes them
// (engine/internal/api, rewind_http_*).
type Counts struct {
	// ConnsRefusedTotal and ConnsRefusedPerSource: connections closed at
	// accept for the global and the per-source cap.
	ConnsRefusedTotal, ConnsRefusedPerSource uint64
	// BodyTimeouts: request bodies not received within their deadline.
	BodyTimeouts uint64
	// BodyBudgetRefused: requests refused because the bodies in flight had
	// used the budget.
	BodyBudgetRefused uint64
	// BodyBytesInFlight: request body bytes read and not yet consumed now.
	BodyBytesInFlight int64
	// HostsRefused: requests refused by the Host check.
	HostsRefused uint64
	// FastpathStreams: fast-path streams open now; FastpathCalls: calls
	// they carried.
	FastpathStreams int64
	FastpathCalls   uint64
}

var counters struct {
	connsRefusedTotal, connsRefusedSource atomic.Uint64
	bodyTimeouts, bodyBudgetRefused       atomic.Uint64
	hostsRefused                          atomic.Uint64
	bodyInFlight                          atomic.Int64
	fastpathStreams                       atomic.Int64
	fastpathCalls                         atomic.Uint64
}

// Totals returns the process's counts.
func Totals() Counts {
	return Counts{
		ConnsRefusedTotal:     counters.connsRefusedTotal.Load(),
		ConnsRefusedPerSource: counters.connsRefusedSource.Load(),
		BodyTimeouts:          counters.bodyTimeouts.Load(),
		BodyBudgetRefused:     counters.bodyBudgetRefused.Load(),
		BodyBytesInFlight:     counters.bodyInFlight.Load(),
		HostsRefused:          counters.hostsRefused.Load(),
		FastpathStreams:       counters.fastpathStreams.Load(),
		FastpathCalls:         counters.fastpathCalls.Load(),
	}
}
