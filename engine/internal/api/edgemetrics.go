package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rewind-io/rewind/internal/httpedge"
)

// The HTTP edge's refusals (internal/httpedge, issue 24): counted by the
// process, read at each scrape.
var (
	httpConnsRefused = desc("rewind_http_connections_refused_total", "Connections closed as they were accepted, over the connection cap: reason total (--max-connections) or per_source (--max-connections-per-ip).", "reason")
	httpBodyTimeouts = desc("rewind_http_body_timeouts_total", "Requests whose body did not arrive within --body-read-timeout of their headers.")
	httpBodyRefused  = desc("rewind_http_body_budget_refused_total", "Requests refused (ResourceExhausted) because the request bodies in flight had used --max-body-bytes-in-flight.")
	httpBodyInFlight = desc("rewind_http_body_bytes_in_flight", "Request body bytes read and not yet consumed, all requests together.")
	httpHostsRefused = desc("rewind_http_hosts_refused_total", "Requests refused by the Host check (DNS rebinding protection, --allowed-hosts).")
	fastpathStreams  = desc("rewind_fastpath_streams", "Fast-path streams open now (one per client connection that carries unary calls as frames).")
	fastpathCalls    = desc("rewind_fastpath_calls_total", "Unary calls served over fast-path streams.")
)

// edgeCollector reads httpedge's counters.
type edgeCollector struct{}

// Describe implements prometheus.Collector.
func (edgeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{httpConnsRefused, httpBodyTimeouts, httpBodyRefused, httpBodyInFlight, httpHostsRefused, fastpathStreams, fastpathCalls} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (edgeCollector) Collect(ch chan<- prometheus.Metric) {
	t := httpedge.Totals()
	ch <- prometheus.MustNewConstMetric(httpConnsRefused, prometheus.CounterValue, float64(t.ConnsRefusedTotal), "total")
	ch <- prometheus.MustNewConstMetric(httpConnsRefused, prometheus.CounterValue, float64(t.ConnsRefusedPerSource), "per_source")
	ch <- prometheus.MustNewConstMetric(httpBodyTimeouts, prometheus.CounterValue, float64(t.BodyTimeouts))
	ch <- prometheus.MustNewConstMetric(httpBodyRefused, prometheus.CounterValue, float64(t.BodyBudgetRefused))
	ch <- prometheus.MustNewConstMetric(httpBodyInFlight, prometheus.GaugeValue, float64(t.BodyBytesInFlight))
	ch <- prometheus.MustNewConstMetric(httpHostsRefused, prometheus.CounterValue, float64(t.HostsRefused))
	ch <- prometheus.MustNewConstMetric(fastpathStreams, prometheus.GaugeValue, float64(t.FastpathStreams))
	ch <- prometheus.MustNewConstMetric(fastpathCalls, prometheus.CounterValue, float64(t.FastpathCalls))
}
