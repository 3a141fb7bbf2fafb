package api

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Topic and partition quotas (finding 7f of issue 24) are checked by the
// metadata group as it applies a creation (meta/quota.go); CreateTopic
// records the caller's principal as the topic's creator and turns a
// refusal into ResourceExhausted (quotaError). These are their metrics:
// what each principal owns is the cluster's catalog as this node has it,
// the same on every node once applied.
var (
	quotaTopics          = desc("rewind_quota_topics", "Topics the principal created that still exist (cluster-wide).", "principal")
	quotaTopicsLimit     = desc("rewind_quota_topics_limit", "The principal's topics quota (absent: unlimited).", "principal")
	quotaPartitions      = desc("rewind_quota_partitions", "Partitions of the topics the principal created that still exist (cluster-wide).", "principal")
	quotaPartitionsLimit = desc("rewind_quota_partitions_limit", "The principal's partitions quota (absent: unlimited).", "principal")
)

// topicQuotaDescs lists the descriptors for collector.Describe.
var topicQuotaDescs = []*prometheus.Desc{quotaTopics, quotaTopicsLimit, quotaPartitions, quotaPartitionsLimit}

// collectTopicQuotas reports, with --auth, every principal that owns
// topics or has its own topic or partition quota: its usage, and its limits
// where it has some. The series are bounded by the principals the operator
// created.
func (s *Server) collectTopicQuotas(ch chan<- prometheus.Metric) {
	if s.guard == nil {
		return
	}
	st := s.b.Auth()
	owned := s.b.TopicsOwned()
	principals := map[string]bool{}
	for p := range owned {
		principals[p] = true
	}
	for p, l := range st.Quotas {
		if l.Topics > 0 || l.Partitions > 0 {
			principals[p] = true
		}
	}
	gauge := func(d *prometheus.Desc, v float64, p string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, p)
	}
	for p := range principals {
		o, l := owned[p], st.QuotaFor(p)
		gauge(quotaTopics, float64(o.Topics), p)
		gauge(quotaPartitions, float64(o.Partitions), p)
		if l.Topics > 0 {
			gauge(quotaTopicsLimit, float64(l.Topics), p)
		}
		if l.Partitions > 0 {
			gauge(quotaPartitionsLimit, float64(l.Partitions), p)
		}
	}
}
