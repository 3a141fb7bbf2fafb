package api

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/raftlog"
	"github.com/rewind-io/rewind/sandbox"
)

// /metrics serves the Prometheus exposition of a node through
// client_golang's registry: the Go runtime (go_*) and process (process_*)
// collectors, and one collector of Rewind's own families that reads the
// broker's counters when scraped. The counting itself stays in the broker
// and below, as atomics on the paths that count (no Prometheus types
// there); a scrape only reads them. docs/operations.md lists every family.
//
// Cardinality is bounded by what the node runs: series per topic (traffic)
// and per partition (storage) follow the catalog, raft series are per node
// (the partitions' groups aggregated), filter and stream series are one per
// kind, and the group lag series are at most MaxGroupLagSeries per family.

// MaxGroupLagSeries bounds the series of rewind_group_lag_records (and of
// rewind_group_lag_seconds) one scrape exposes: groups beyond it, by name,
// are counted in rewind_group_lag_series_omitted instead.
const MaxGroupLagSeries = 10_000

// publishBuckets are the bounds of rewind_publish_duration_seconds: powers
// of two from 100 µs to about 26 s (a publish waits for a raft commit and
// an fsync on a majority; a slow disk or an election stretches it).
var publishBuckets = prometheus.ExponentialBuckets(100e-6, 2, 19)

// durations is a histogram over publishBuckets, without locks.
type durations struct {
	counts [20]atomic.Uint64 // len(publishBuckets)+1: the last is +Inf
	sum    atomic.Int64      // nanoseconds
}

func (h *durations) add(d time.Duration) {
	s, i := d.Seconds(), len(publishBuckets)
	for j, b := range publishBuckets {
		if s <= b {
			i = j
			break
		}
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

func (h *durations) metric(desc *prometheus.Desc) prometheus.Metric {
	buckets := make(map[float64]uint64, len(publishBuckets))
	var cum uint64
	for i, b := range publishBuckets {
		cum += h.counts[i].Load()
		buckets[b] = cum
	}
	cum += h.counts[len(publishBuckets)].Load()
	return prometheus.MustNewConstHistogram(desc, cum, time.Duration(h.sum.Load()).Seconds(), buckets)
}

// countPublishFailure counts a client's publish that failed with err.
func (s *Server) countPublishFailure(ctx context.Context, err error) {
	if code := connect.CodeOf(err); !isHop(ctx) && int(code) < len(s.publishFailures) {
		s.publishFailures[code].Add(1)
	}
}

// isHop reports whether the request came from another node (a forwarded
// publish): the edge that received the client's request times it.
func isHop(ctx context.Context) bool {
	ci, ok := connect.CallInfoForHandlerContext(ctx)
	return ok && (ci.RequestHeader().Get(ForwardedHeader) != "" || ci.RequestHeader().Get(RelayedHeader) != "")
}

// metricsHandler returns the /metrics handler.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{s: s},
		edgeCollector{}, // edgemetrics.go
	)
	reg.MustRegister(s.obs.rpc.collectors()...) // rpcmetrics.go
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// Rewind's metric families; docs/operations.md explains each.
var (
	// Storage, per partition this node keeps a replica of.
	partitionBytes    = desc("rewind_partition_bytes", "Bytes of record batches stored in the partition.", "topic", "partition")
	partitionRecords  = desc("rewind_partition_records", "Records in the stored offset range (compacted offsets included).", "topic", "partition")
	partitionLogStart = desc("rewind_partition_log_start_offset", "First offset still stored.", "topic", "partition")
	// Tiered storage (a node with --tier).
	partitionLocalStart = desc("rewind_partition_local_start_offset", "First offset on this node's disk; below it, up to the log start, history is read from the tier.", "topic", "partition")
	partitionTierBytes  = desc("rewind_partition_tiered_bytes", "Bytes of the partition's segment objects in the tier.", "topic", "partition")
	partitionTierObjs   = desc("rewind_partition_tiered_segments", "Segment objects of the partition in the tier.", "topic", "partition")
	partitionTierLag    = desc("rewind_partition_tier_upload_lag_records", "Records the topic's local retention no longer wants on disk that are not uploaded to the tier yet (from the manifest's end to the local boundary); 0 when caught up. Partitions with local limits.", "topic", "partition")
	partitionTierLagAge = desc("rewind_partition_tier_upload_lag_seconds", "Age of the oldest of those records (now minus its append time); 0 when caught up.", "topic", "partition")
	tierReadBytes       = desc("rewind_tier_read_bytes_total", "Bytes this node read from the tier's object store (windows of batches and segment indexes).")
	tierCacheHits       = desc("rewind_tier_cache_hits_total", "Reads of tiered segment parts (a window of batches, an index) answered from memory: kept in the tier cache, or shared with a read in flight.")
	tierCacheMisses     = desc("rewind_tier_cache_misses_total", "Reads of tiered segment parts that went to the object store. Hit ratio: hits / (hits + misses).")
	tierPrefetches      = desc("rewind_tier_prefetches_total", "Windows of tiered batches read ahead of a replay (the window after the one it entered); a replay finding one counts a hit.")
	tierCacheBytes      = desc("rewind_tier_cache_bytes", "Bytes of tiered segment parts the tier cache keeps now (at most --tier-cache-mib).")
	tierCacheEvicted    = desc("rewind_tier_cache_evictions_total", "Parts the tier cache dropped to stay within its bound (least recently used first).")
	partitionEnd        = desc("rewind_partition_end_offset", "Offset the next record gets.", "topic", "partition")

	// Traffic, per topic.
	publishedRecords = desc("rewind_published_records_total", "Records this node appended as a partition leader (idempotent duplicates not counted).", "topic")
	publishedBytes   = desc("rewind_published_bytes_total", "Payload bytes (key, value, headers, idempotency key) of those records.", "topic")
	deliveredRecords = desc("rewind_delivered_records_total", "Records this node's streams sent to subscribers, live and replayed.", "topic")
	deliveredBytes   = desc("rewind_delivered_bytes_total", "Payload bytes of those records.", "topic")
	deliveredAll     = desc("rewind_records_delivered_total", "Records this node's streams sent, every topic (deleted ones included).")
	publishDuration  = desc("rewind_publish_duration_seconds", "Time from a client's publish request arriving at this node to its acknowledgement (successful publishes).")
	publishFailures  = desc("rewind_publish_failures_total", "Client publish requests to this node that failed as a whole, by Connect code (unavailable, resource_exhausted, invalid_argument, ...).", "code")

	// Publish stages and the raft loop.
	stageHists = []struct {
		d   *prometheus.Desc
		get func(q, st, w, sy *raftlog.Histogram) *raftlog.Histogram
	}{
		{desc("rewind_publish_queue_seconds", "Time appends waited for the raft loop to take them into a proposal."), func(q, _, _, _ *raftlog.Histogram) *raftlog.Histogram { return q }},
		{desc("rewind_publish_store_seconds", "Time from a proposal to the records durable and applied (the acknowledgement)."), func(_, st, _, _ *raftlog.Histogram) *raftlog.Histogram { return st }},
		{desc("rewind_raft_wake_seconds", "Time the idle raft loop took to run after it was woken: how long it waited for a processor."), func(_, _, w, _ *raftlog.Histogram) *raftlog.Histogram { return w }},
		{desc("rewind_raft_sync_seconds", "Time each synced raft write took (fsync and Pebble's commit pipeline)."), func(_, _, _, sy *raftlog.Histogram) *raftlog.Histogram { return sy }},
	}

	// Streams and replays.
	streamsOpen     = desc("rewind_streams_open", "Subscribe streams running on this node, by kind: group, filtered, live (started at the end) or replay (started in history).", "kind")
	replayReadBytes = desc("rewind_replay_read_bytes_total", "Encoded bytes of the record batches streams read while catching up (history, not the live tail).")
	replayTurns     = desc("rewind_replay_turns_total", "Catch-up units (one event's worth of history) that got a turn.")
	replayCPU       = desc("rewind_replay_cpu_seconds_total", "Processor time catch-up units were charged.")
	replayWait      = desc("rewind_replay_wait_seconds_total", "Time catch-up units waited for their turn (budget, slots, live work).")
	replayDeferred  = desc("rewind_replay_deferred_total", "Catch-up units held back by live work in progress.")
	replayFactor    = desc("rewind_replay_budget_factor", "Share of the catch-up budget (--replay-share) the governor allows now: it halves while live work waits over 500 µs to run (p99).")

	// Reads through other nodes.
	fetchesServed = desc("rewind_leader_fetches_served_total", "Fetches this node answered as a partition leader for streams relayed by other nodes.")
	fetchBytes    = desc("rewind_leader_fetch_bytes_served_total", "Record bytes those fetches carried.")
	remoteReads   = desc("rewind_remote_partition_reads_total", "Partitions of streams on this node read through their leader on another node.")

	// Subscriber groups (exposed by the coordinating node only).
	groupLagRecords = desc("rewind_group_lag_records", "Records after the group's committed offset in the partition (from the log start without a commit). Exposed by the node coordinating groups.", "group", "topic", "partition")
	groupLagSeconds = desc("rewind_group_lag_seconds", "Age of the oldest record the group has not committed in the partition (now minus its append time); 0 when caught up.", "group", "topic", "partition")
	groupLagOmitted = desc("rewind_group_lag_series_omitted", "Group partitions left out of rewind_group_lag_records and _seconds because the scrape reached its bound.")

	// WebAssembly filters.
	filterCalls  = desc("rewind_filter_calls_total", "Guest calls of filter modules (each filters a batch of records).")
	filterFuel   = desc("rewind_filter_fuel_total", "Fuel (metered guest instructions) filter calls burned.")
	filterFailed = desc("rewind_filter_failures_total", "Filter runs that failed, by kind: invalid, trap, fuel, output, limit, guest, config.", "kind")
	// The idle instance pool and the compile queue (issue 24).
	filterIdle      = desc("rewind_filter_idle_instances", "Initialised filter instances kept for reuse (idle, not running).")
	filterIdleBytes = desc("rewind_filter_idle_bytes", "Linear memory of the idle filter instances, bytes (at most --filter-idle-memory-mib).")
	filterIdleEvict = desc("rewind_filter_idle_evictions_total", "Idle filter instances closed to stay within the idle pool's count and memory bounds.")
	filterDropped   = desc("rewind_filter_compiles_dropped_total", "Module compiles taken out of the queue before their turn because every replay waiting for them had gone.")

	// Raft: the metadata group alone, the partitions' groups aggregated.
	raftTerm      = desc("rewind_raft_term", "Current raft term of the group.", "group")
	raftLeader    = desc("rewind_raft_is_leader", "1 if this node leads the group.", "group")
	raftKnown     = desc("rewind_raft_leader_known", "1 if this node knows a leader of the group.", "group")
	raftApplyLag  = desc("rewind_raft_apply_lag_entries", "Committed raft entries not applied yet (for group=\"partitions\": the largest of any partition group on this node).", "group")
	raftChanges   = desc("rewind_raft_leader_changes_total", "Times a group on this node learned of a new leader.", "group")
	raftDropped   = desc("rewind_raft_proposals_dropped_total", "Proposals raft refused (no leader, a transfer in progress, the uncommitted tail full).", "group")
	raftSnapshots = desc("rewind_raft_snapshots_sent_total", "Snapshots this node sent as leader to replicas too far behind for the log.", "group")
	raftParts     = desc("rewind_raft_partition_groups", "Partition raft groups on this node by role: leader, follower, or no_leader (none known).", "role")
	// The failure detector (raftlog/detector.go, --failure-detect-ticks).
	detSuspicions = desc("rewind_raft_member_suspicions_total", "Times this node found a member that leads groups here silent for --failure-detect-ticks and made its followers forget it as leader.")
	detWithdrawn  = desc("rewind_raft_member_suspicions_withdrawn_total", "Suspicions withdrawn: the member was heard again within an election timeout (a false alarm, or a pause shorter than that).")
	detCampaigns  = desc("rewind_raft_detector_campaigns_total", "Elections this node started because the failure detector suspected a group's leader.")

	// Quotas (with --auth; quota.go), per principal, on this node.
	quotaPublished = desc("rewind_quota_published_bytes_total", "Record bytes the principal published through this node (quota accounting).", "principal")
	quotaReplayed  = desc("rewind_quota_replayed_bytes_total", "Bytes of history the principal's streams read on this node.", "principal")
	quotaFuel      = desc("rewind_quota_filter_fuel_total", "WebAssembly fuel the principal's filters burned on this node.", "principal")
	quotaRefused   = desc("rewind_quota_refused_total", "Publishes and streams of the principal refused over its quota.", "principal")
	quotaPaced     = desc("rewind_quota_paced_seconds_total", "Time the principal's replays and filters waited for their quota.", "principal")
	quotaStreams   = desc("rewind_quota_open_streams", "Streams the principal has open on this node.", "principal")

	// The node.
	diskFull = desc("rewind_disk_full", "1 while publishes are refused because free disk space is below the floor.")
	ready    = desc("rewind_ready", "1 while the node is ready (what /readyz answers 200 for).")
)

// filterKinds names the sandbox.Kind values in rewind_filter_failures_total.
var filterKinds = map[sandbox.Kind]string{
	sandbox.KindInvalid: "invalid", sandbox.KindTrap: "trap", sandbox.KindFuel: "fuel", sandbox.KindOutput: "output",
	sandbox.KindLimit: "limit", sandbox.KindGuest: "guest", sandbox.KindConfig: "config",
}

// collector reads the broker's counters at each scrape.
type collector struct{ s *Server }

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		partitionBytes, partitionRecords, partitionLogStart, partitionEnd,
		partitionLocalStart, partitionTierBytes, partitionTierObjs, partitionTierLag, partitionTierLagAge,
		tierReadBytes, tierCacheHits, tierCacheMisses, tierPrefetches, tierCacheBytes, tierCacheEvicted,
		publishedRecords, publishedBytes, deliveredRecords, deliveredBytes, deliveredAll, publishDuration, publishFailures,
		streamsOpen, replayReadBytes, replayTurns, replayCPU, replayWait, replayDeferred, replayFactor,
		fetchesServed, fetchBytes, remoteReads,
		groupLagRecords, groupLagSeconds, groupLagOmitted,
		filterCalls, filterFuel, filterFailed, filterIdle, filterIdleBytes, filterIdleEvict, filterDropped,
		raftTerm, raftLeader, raftKnown, raftApplyLag, raftChanges, raftDropped, raftSnapshots, raftParts,
		detSuspicions, detWithdrawn, detCampaigns,
		quotaPublished, quotaReplayed, quotaFuel, quotaRefused, quotaPaced, quotaStreams,
		diskFull, ready,
	} {
		ch <- d
	}
	for _, d := range topicQuotaDescs {
		ch <- d
	}
	for _, h := range stageHists {
		ch <- h.d
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	b := c.s.b
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}

	if c.s.guard != nil {
		for _, u := range c.s.limiter().Usage() {
			counter(quotaPublished, float64(u.PublishBytes), u.Principal)
			counter(quotaReplayed, float64(u.ReplayBytes), u.Principal)
			counter(quotaFuel, float64(u.Fuel), u.Principal)
			counter(quotaRefused, float64(u.Refused), u.Principal)
			counter(quotaPaced, float64(u.PacedNanos)/1e9, u.Principal)
			gauge(quotaStreams, float64(u.Streams), u.Principal)
		}
	}
	c.s.collectTopicQuotas(ch)
	for _, t := range b.ListTopics() {
		_, parts, err := b.DescribeTopic(t.Name)
		if err != nil {
			continue // not every partition here, or being deleted
		}
		for _, p := range parts {
			part := strconv.FormatUint(uint64(p.Partition), 10)
			gauge(partitionBytes, float64(p.State.Bytes), t.Name, part)
			gauge(partitionRecords, float64(p.State.Next-p.State.LogStart), t.Name, part)
			gauge(partitionLogStart, float64(p.State.LogStart), t.Name, part)
			gauge(partitionEnd, float64(p.State.Next), t.Name, part)
			if len(p.Tiered) > 0 || p.LocalStart > p.State.LogStart {
				var tb float64
				for _, s := range p.Tiered {
					tb += float64(s.Bytes)
				}
				gauge(partitionLocalStart, float64(max(p.LocalStart, p.State.LogStart)), t.Name, part)
				gauge(partitionTierBytes, tb, t.Name, part)
				gauge(partitionTierObjs, float64(len(p.Tiered)), t.Name, part)
			}
		}
	}
	for _, l := range b.TierLags() {
		part := strconv.FormatUint(uint64(l.Partition), 10)
		gauge(partitionTierLag, float64(l.Records), l.Topic, part)
		gauge(partitionTierLagAge, time.Duration(l.Nanos).Seconds(), l.Topic, part)
	}
	if ts, ok := b.TierCacheStats(); ok {
		counter(tierReadBytes, float64(ts.ReadBytes))
		counter(tierCacheHits, float64(ts.Hits))
		counter(tierCacheMisses, float64(ts.Misses))
		counter(tierPrefetches, float64(ts.Prefetches))
		gauge(tierCacheBytes, float64(ts.Bytes))
		counter(tierCacheEvicted, float64(ts.Evictions))
	}
	for _, t := range b.Traffic() {
		counter(publishedRecords, float64(t.PublishedRecords), t.Topic)
		counter(publishedBytes, float64(t.PublishedBytes), t.Topic)
		counter(deliveredRecords, float64(t.DeliveredRecords), t.Topic)
		counter(deliveredBytes, float64(t.DeliveredBytes), t.Topic)
	}
	counter(deliveredAll, float64(b.Delivered()))
	ch <- c.s.publishDurations.metric(publishDuration)
	for code := connect.CodeCanceled; code <= connect.CodeUnauthenticated; code++ {
		counter(publishFailures, float64(c.s.publishFailures[code].Load()), code.String())
	}
	q, st, w, sy := b.Timings()
	for _, h := range stageHists {
		ch <- constHistogram(h.d, h.get(q, st, w, sy))
	}

	for k, n := range b.OpenStreams() {
		gauge(streamsOpen, float64(n), k.String())
	}
	counter(replayReadBytes, float64(b.ReplayReadBytes()))
	ss := b.ReplayStats()
	counter(replayTurns, float64(ss.Units))
	counter(replayCPU, ss.CPU.Seconds())
	counter(replayWait, ss.Waited.Seconds())
	counter(replayDeferred, float64(ss.Deferred))
	gauge(replayFactor, ss.Factor)

	rs := b.ReadStats()
	counter(fetchesServed, float64(rs.FetchesServed))
	counter(fetchBytes, float64(rs.BytesServed))
	counter(remoteReads, float64(rs.RemoteReads))

	if lags, omitted, ok, err := b.GroupLags(MaxGroupLagSeries); err != nil {
		c.s.log.Warn("metrics: group lag", "error", err)
	} else if ok {
		for _, l := range lags {
			part := strconv.FormatUint(uint64(l.Partition), 10)
			gauge(groupLagRecords, float64(l.Records), l.Group, l.Topic, part)
			gauge(groupLagSeconds, time.Duration(l.Nanos).Seconds(), l.Group, l.Topic, part)
		}
		gauge(groupLagOmitted, float64(omitted))
	}

	fs := b.FilterStats()
	counter(filterCalls, float64(fs.Calls))
	counter(filterFuel, float64(fs.Fuel))
	for k, name := range filterKinds {
		counter(filterFailed, float64(fs.Failures[k]), name)
	}
	gauge(filterIdle, float64(fs.IdleInstances))
	gauge(filterIdleBytes, float64(fs.IdleBytes))
	counter(filterIdleEvict, float64(fs.IdleEvictions))
	counter(filterDropped, float64(fs.CompilesDropped))

	r := b.RaftStats()
	gauge(raftTerm, float64(r.Meta.Term), "meta")
	gauge(raftLeader, boolValue(r.Meta.Leading), "meta")
	gauge(raftKnown, boolValue(r.Meta.Leader != 0), "meta")
	gauge(raftApplyLag, float64(r.Meta.ApplyLag), "meta")
	gauge(raftApplyLag, float64(r.Partitions.MaxApplyLag), "partitions")
	for _, g := range []struct {
		name string
		c    broker.RaftCounters
	}{{"meta", r.MetaCounters}, {"partitions", r.PartitionsCounters}} {
		counter(raftChanges, float64(g.c.LeaderChanges), g.name)
		counter(raftDropped, float64(g.c.ProposalsDropped), g.name)
		counter(raftSnapshots, float64(g.c.SnapshotsSent), g.name)
	}
	p := r.Partitions
	gauge(raftParts, float64(p.Leading), "leader")
	gauge(raftParts, float64(p.Groups-p.Leading-p.NoLeader), "follower")
	gauge(raftParts, float64(p.NoLeader), "no_leader")
	det := b.Detector()
	counter(detSuspicions, float64(det.Suspicions))
	counter(detWithdrawn, float64(det.Withdrawn))
	counter(detCampaigns, float64(det.Campaigns))

	gauge(diskFull, boolValue(b.DiskFull()))
	gauge(ready, boolValue(b.Ready() == nil))
}

// constHistogram turns h into a Prometheus histogram.
func constHistogram(d *prometheus.Desc, h *raftlog.Histogram) prometheus.Metric {
	counts := h.Counts(nil)
	buckets := make(map[float64]uint64, len(counts))
	var cum uint64
	for i, n := range counts {
		cum += n
		if i < len(counts)-1 { // the last bucket is open-ended: +Inf
			buckets[raftlog.DelayBuckets[i+1]] = cum
		}
	}
	return prometheus.MustNewConstHistogram(d, cum, h.Sum().Seconds(), buckets)
}
