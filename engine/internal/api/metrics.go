package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/rewind-io/rewind/raftlog"
)

// metrics serves the Prometheus text format: per partition, what is stored;
// per node, whether publishes are refused for lack of disk.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	gauge := func(name, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
	}
	type row struct {
		labels string
		vals   [4]uint64
	}
	var rows []row
	for _, t := range s.b.ListTopics() {
		_, parts, err := s.b.DescribeTopic(t.Name)
		if err != nil {
			continue
		}
		for _, p := range parts {
			rows = append(rows, row{
				labels: fmt.Sprintf(`topic=%q,partition="%d"`, t.Name, p.Partition),
				vals:   [4]uint64{p.State.Bytes, p.State.Next - p.State.LogStart, p.State.LogStart, p.State.Next},
			})
		}
	}
	for i, m := range []struct{ name, help string }{
		{"rewind_partition_bytes", "Bytes of record batches stored in the partition."},
		{"rewind_partition_records", "Records in the stored offset range (compacted offsets included)."},
		{"rewind_partition_log_start_offset", "First offset still stored."},
		{"rewind_partition_end_offset", "Offset the next record gets."},
	} {
		gauge(m.name, m.help)
		for _, r := range rows {
			fmt.Fprintf(&b, "%s{%s} %d\n", m.name, r.labels, r.vals[i])
		}
	}
	rs := s.b.ReadStats()
	for _, c := range []struct {
		name, help string
		v          uint64
	}{
		{"rewind_leader_fetches_served_total", "Fetches this node answered as a partition leader for streams relayed by other nodes.", rs.FetchesServed},
		{"rewind_leader_fetch_bytes_served_total", "Record bytes those fetches carried.", rs.BytesServed},
		{"rewind_remote_partition_reads_total", "Partitions of streams on this node read through their leader on another node.", rs.RemoteReads},
	} {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", c.name, c.help, c.name, c.name, c.v)
	}
	ss := s.b.ReplayStats()
	for _, c := range []struct {
		name, help string
		v          string
	}{
		{"rewind_records_delivered_total", "Records sent to subscribers, live and replayed.", fmt.Sprint(s.b.Delivered())},
		{"rewind_replay_turns_total", "Catch-up units (one event's worth of history) that got a turn.", fmt.Sprint(ss.Units)},
		{"rewind_replay_cpu_seconds_total", "Processor time catch-up units were charged.", fmt.Sprint(ss.CPU.Seconds())},
		{"rewind_replay_wait_seconds_total", "Time catch-up units waited for their turn (budget, slots, live work).", fmt.Sprint(ss.Waited.Seconds())},
		{"rewind_replay_deferred_total", "Catch-up units held back by live work in progress.", fmt.Sprint(ss.Deferred)},
	} {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %s\n", c.name, c.help, c.name, c.name, c.v)
	}
	queue, store, wake, sync := s.b.Timings()
	for _, h := range []struct {
		name, help string
		h          *raftlog.Histogram
	}{
		{"rewind_publish_queue_seconds", "Time appends waited for the raft loop to take them into a proposal.", queue},
		{"rewind_publish_store_seconds", "Time from a proposal to the records durable and applied (the acknowledgement).", store},
		{"rewind_raft_wake_seconds", "Time the idle raft loop took to run after it was woken: how long it waited for a processor.", wake},
		{"rewind_raft_sync_seconds", "Time each synced raft write took (fsync and Pebble's commit pipeline).", sync},
	} {
		histogram(&b, h.name, h.help, h.h)
	}
	gauge("rewind_replay_budget_factor", "Share of the catch-up budget (--replay-share) the governor allows now: it halves while live work waits over 500 µs to run (p99).")
	fmt.Fprintf(&b, "rewind_replay_budget_factor %g\n", ss.Factor)
	gauge("rewind_disk_full", "1 while publishes are refused because free disk space is below the floor.")
	full := 0
	if s.b.DiskFull() {
		full = 1
	}
	fmt.Fprintf(&b, "rewind_disk_full %d\n", full)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}

// histogram writes h in the Prometheus text format.
func histogram(b *strings.Builder, name, help string, h *raftlog.Histogram) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	counts := h.Counts(nil)
	var cum uint64
	for i, n := range counts {
		cum += n
		if i == len(counts)-1 {
			break // the last bucket is open-ended: +Inf below
		}
		fmt.Fprintf(b, "%s_bucket{le=\"%g\"} %d\n", name, raftlog.DelayBuckets[i+1], cum)
	}
	fmt.Fprintf(b, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, cum, name, h.Sum().Seconds(), name, cum)
}
