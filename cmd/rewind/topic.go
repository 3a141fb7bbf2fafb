package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

func newTopic(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "topic", Short: "Create, list, describe, alter and delete topics"}
	cmd.AddCommand(newTopicCreate(g), newTopicAlter(g), newTopicList(g), newTopicDescribe(g), newTopicDelete(g))
	return cmd
}

// addFormat adds --format (text, the default, or json; on the commands
// enableTemplates names, also a template).
func addFormat(cmd *cobra.Command, format *string) {
	*format = "text"
	cmd.Flags().Var(&formatValue{p: format}, "format", "output format: text or json")
}

// checkFormat reports a format that is not text, json or a template that
// compiles (the flag itself refuses templates where they do not apply).
func checkFormat(format string) error {
	return (&formatValue{templates: true}).check(format)
}

// retentionFlags are the retention flags of topic create and alter.
type retentionFlags struct {
	age, bytes, cleanup, deleteRetention string
	localAge, localBytes                 string
	records                              uint64
}

func (r *retentionFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.age, "retention-age", "", "delete every record appended longer ago than this, e.g. 7d or 12h (0: no limit)")
	f.StringVar(&r.bytes, "retention-bytes", "", "keep the newest records whose sizes (key + value + headers + idempotency key) add up to at most this, per partition, e.g. 10GiB or 500MB (0: no limit)")
	f.Uint64Var(&r.records, "retention-records", 0, "keep exactly this many newest records per partition (0: no limit)")
	f.StringVar(&r.cleanup, "cleanup", "", "delete (the default), compact (keep the latest record per key) or compact,delete")
	f.StringVar(&r.deleteRetention, "delete-retention", "", "how long a tombstone (a key with an empty value) survives compaction (default 24h)")
	f.StringVar(&r.localAge, "local-retention-age", "", "with tiered storage (serve --tier): records appended longer ago than this leave the servers' disks once in the object store, and are read from there, e.g. 6h (0: no local limit)")
	f.StringVar(&r.localBytes, "local-retention-bytes", "", "with tiered storage: about this much of the newest history per partition stays on the servers' disks, e.g. 10GiB (0: no local limit)")
}

// options turns the flags into topic options; base, when set, is the
// current topic, and only the flags given on the command line change it.
func (r *retentionFlags) options(cmd *cobra.Command, base *client.Topic) ([]client.TopicOption, error) {
	changed := func(name string) bool { return base == nil || cmd.Flags().Changed(name) }
	var age, dr, localAge time.Duration
	var bytes, localBytes uint64
	records, cleanup := r.records, r.cleanup
	if base != nil {
		age, bytes, dr = base.RetentionAge, base.RetentionBytes, base.DeleteRetention
		localAge, localBytes = base.LocalRetentionAge, base.LocalRetentionBytes
		if !changed("retention-records") {
			records = base.RetentionRecords
		}
		if !changed("cleanup") {
			cleanup = base.Cleanup
		}
	}
	var err error
	if changed("retention-age") && r.age != "" {
		if age, err = parseDurationFlag(r.age); err != nil || age < 0 {
			return nil, fmt.Errorf("--retention-age: want a duration such as 7d or 12h")
		}
	}
	if changed("retention-bytes") && r.bytes != "" {
		if bytes, err = parseBytes(r.bytes); err != nil {
			return nil, fmt.Errorf("--retention-bytes: %w", err)
		}
	}
	if changed("delete-retention") && r.deleteRetention != "" {
		if dr, err = parseDurationFlag(r.deleteRetention); err != nil || dr < 0 {
			return nil, fmt.Errorf("--delete-retention: want a duration such as 24h")
		}
	}
	if changed("local-retention-age") && r.localAge != "" {
		if localAge, err = parseDurationFlag(r.localAge); err != nil || localAge < 0 {
			return nil, fmt.Errorf("--local-retention-age: want a duration such as 6h")
		}
	}
	if changed("local-retention-bytes") && r.localBytes != "" {
		if localBytes, err = parseBytes(r.localBytes); err != nil {
			return nil, fmt.Errorf("--local-retention-bytes: %w", err)
		}
	}
	switch cleanup {
	case "", client.CleanupDelete, client.CleanupCompact, client.CleanupCompactDelete, "delete,compact":
	default:
		return nil, fmt.Errorf("--cleanup %q: use delete, compact or compact,delete", cleanup)
	}
	opts := []client.TopicOption{client.WithRetention(age, bytes, records), client.WithCleanup(cleanup),
		client.WithLocalRetention(localAge, localBytes)}
	if dr > 0 {
		opts = append(opts, client.WithDeleteRetention(dr))
	}
	return opts, nil
}

// parseBytes reads a size: a number with an optional unit (B, KB, MB, GB,
// TB in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024).
func parseBytes(s string) (uint64, error) {
	units := []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := uint64(1)
	num := strings.TrimSpace(s)
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 1) {
		return 0, fmt.Errorf("%q is not a size (e.g. 10GiB, 500MB, 1048576)", s)
	}
	// Sizes become int64 in places (free disk, quotas): refuse what
	// would overflow one rather than wrap to a negative number.
	if b := v * float64(mult); b >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large: at most %d bytes (8 EiB)", s, int64(math.MaxInt64))
	}
	return uint64(v * float64(mult)), nil
}

func newTopicCreate(g *globals) *cobra.Command {
	var (
		rf                        uint32
		partitions                = partitionCount(1)
		format, dedupe, maxRecord string
		ret                       retentionFlags
		keyIndex                  bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			opts, err := ret.options(cmd, nil)
			if err != nil {
				return err
			}
			var maxRecordBytes uint32
			if maxRecord != "" {
				n, err := parseBytes(maxRecord)
				if err != nil || n > math.MaxUint32 {
					return fmt.Errorf("--max-record-bytes: want a size such as 4MiB or 1048576 (at most 16MiB)")
				}
				maxRecordBytes = uint32(n)
			}
			opts = append(opts, client.WithPartitions(uint32(partitions)), client.WithReplicationFactor(rf), client.WithMaxRecordBytes(maxRecordBytes))
			if dedupe != "" {
				d, err := parseDurationFlag(dedupe)
				if err != nil || d < 0 {
					return fmt.Errorf("--dedupe-window: want a duration such as 24h, 7d or 0")
				}
				opts = append(opts, client.WithDedupeWindow(d))
			}
			opts = append(opts, client.WithKeyIndex(keyIndex))
			t, err := g.client().CreateTopic(cmd.Context(), args[0], opts...)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(topicJSON(t, nil))
			}
			fmt.Printf("created topic %s (id %d) with %s\n", t.Name, t.ID, plural(t.Partitions, "partition"))
			return nil
		},
	}
	f := cmd.Flags()
	f.Var(&partitions, "partitions", fmt.Sprintf("number of partitions, 1 to %d (topic alter adds more later)", maxPartitions))
	f.Uint32Var(&rf, "replication-factor", 0, "replicas per partition (default: the server's)")
	f.StringVar(&maxRecord, "max-record-bytes", "", "largest record accepted, e.g. 4MiB (default 1 MiB, at most 16 MiB)")
	f.StringVar(&dedupe, "dedupe-window", "", "how long idempotency keys are remembered (default 24h; 0 turns deduplication off)")
	f.BoolVar(&keyIndex, "key-index", true, "keep the key and tag indexes: key versions, conditional appends (--expect-version), replay --key; --key-index=false about doubles keyed publish throughput (fixed at creation)")
	ret.add(cmd)
	addFormat(cmd, &format)
	return cmd
}

func newTopicAlter(g *globals) *cobra.Command {
	var (
		format     string
		ret        retentionFlags
		partitions partitionCount
	)
	cmd := &cobra.Command{
		Use:   "alter NAME",
		Short: "Change a topic's retention policy or add partitions (flags not given keep their value)",
		Long: `Change a topic's retention policy (the retention flags given; the others
keep their value) or give it more partitions (--partitions N, the count in
all).

Partitions can be added, never removed. Keys hash over the new count, so
a key's new records may go to another partition than its old ones: order
per key holds within one partition count. Idempotency keys stay
deduplicated. Streams already open keep reading the partitions they
started with (so does a stream resumed from a token taken before); new
subscriptions read them all, and subscriber groups are rebalanced over
them. A topic with the key index (topic create --key-index, the default)
cannot grow: its key versions count per key and partition.`,
		Example: `  rewind topic alter orders --partitions 8
  rewind topic alter orders --retention-age 7d`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			c := g.client()
			cur, _, err := c.DescribeTopic(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			grow := cmd.Flags().Changed("partitions")
			retention := !grow || slices.ContainsFunc(retentionFlagNames, cmd.Flags().Changed)
			var opts []client.TopicOption
			if retention {
				// Checked before growing, so a bad flag changes nothing.
				if opts, err = ret.options(cmd, cur); err != nil {
					return err
				}
			}
			t := cur
			if grow {
				if t, err = c.GrowTopic(cmd.Context(), args[0], uint32(partitions)); err != nil {
					return err
				}
			}
			if retention {
				if t, err = c.AlterTopic(cmd.Context(), args[0], opts...); err != nil {
					return err
				}
			}
			if format == "json" {
				return printJSON(topicJSON(t, nil))
			}
			switch {
			case grow && t.Partitions == cur.Partitions:
				fmt.Printf("topic %s has %s already\n", t.Name, plural(t.Partitions, "partition"))
			case grow:
				fmt.Printf("altered topic %s: %s (was %d)\n", t.Name, plural(t.Partitions, "partition"), cur.Partitions)
			}
			if retention {
				fmt.Printf("altered topic %s: %s\n", t.Name, retentionText(t))
			}
			return nil
		},
	}
	ret.add(cmd)
	cmd.Flags().Var(&partitions, "partitions", fmt.Sprintf("give the topic this many partitions in all, more than it has (at most %d); keys may move to the new ones", maxPartitions))
	addFormat(cmd, &format)
	return cmd
}

// retentionFlagNames are the flags retentionFlags.add defines.
var retentionFlagNames = []string{"retention-age", "retention-bytes", "retention-records", "cleanup", "delete-retention",
	"local-retention-age", "local-retention-bytes"}

func retentionText(t *client.Topic) string {
	lim := func(v uint64) string {
		if v == 0 {
			return "no limit"
		}
		return fmt.Sprint(v)
	}
	age := "no limit"
	if t.RetentionAge > 0 {
		age = t.RetentionAge.String()
	}
	s := fmt.Sprintf("cleanup %s, max age %s, max bytes %s, max records %s", t.Cleanup, age, lim(t.RetentionBytes), lim(t.RetentionRecords))
	if t.Cleanup != client.CleanupDelete {
		s += fmt.Sprintf(", delete retention %s", t.DeleteRetention)
	}
	if t.LocalRetentionAge > 0 || t.LocalRetentionBytes > 0 {
		local := "no limit"
		if t.LocalRetentionAge > 0 {
			local = t.LocalRetentionAge.String()
		}
		s += fmt.Sprintf("; on the nodes' disks (tiered storage): max age %s, max bytes %s", local, lim(t.LocalRetentionBytes))
	}
	return s
}

func newTopicList(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			ts, err := g.client().ListTopics(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				out := make([]any, len(ts))
				for i, t := range ts {
					out[i] = topicJSON(t, nil)
				}
				return printJSON(out)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tID\tPARTITIONS\tCREATED")
			for _, t := range ts {
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", t.Name, t.ID, t.Partitions, t.CreateTime.UTC().Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func newTopicDescribe(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic and the state of its partitions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			t, parts, err := g.client().DescribeTopic(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(topicJSON(t, parts))
			}
			keyIndex := "on"
			if !t.KeyIndex {
				keyIndex = "off"
			}
			fmt.Printf("topic %s (id %d): %s, max record %s, dedupe window %s, key index %s\n", t.Name, t.ID, plural(t.Partitions, "partition"), plural(t.MaxRecordBytes, "byte"), t.DedupeWindow, keyIndex)
			fmt.Printf("retention: %s\n", retentionText(t))
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			tiered := false
			for _, p := range parts {
				tiered = tiered || p.TieredSegments > 0 || p.LocalStartOffset > p.LogStartOffset
			}
			if tiered {
				fmt.Fprintln(w, "PARTITION\tLOG START\tLOCAL START\tEND\tRECORDS\tLOCAL BYTES\tTIERED\tFIRST APPEND\tLAST APPEND\tLEADER")
			} else {
				fmt.Fprintln(w, "PARTITION\tLOG START\tEND\tRECORDS\tBYTES\tFIRST APPEND\tLAST APPEND\tLEADER")
			}
			for _, p := range parts {
				if tiered {
					fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\n", p.Partition, p.LogStartOffset, p.LocalStartOffset, p.EndOffset,
						p.EndOffset-p.LogStartOffset, p.Bytes, fmt.Sprintf("%d B in %s", p.TieredBytes, plural(p.TieredSegments, "segment")),
						fmtTime(p.FirstAppendTime), fmtTime(p.LastAppendTime), p.Leader)
					continue
				}
				fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\n", p.Partition, p.LogStartOffset, p.EndOffset,
					p.EndOffset-p.LogStartOffset, p.Bytes, fmtTime(p.FirstAppendTime), fmtTime(p.LastAppendTime), p.Leader)
			}
			return w.Flush()
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func newTopicDelete(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a topic and all of its records",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if err := g.client().DeleteTopic(cmd.Context(), args[0]); err != nil {
				return err
			}
			if format == "json" {
				return printJSON(map[string]any{"deleted": args[0]})
			}
			fmt.Printf("deleted topic %s\n", args[0])
			return nil
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func topicJSON(t *client.Topic, parts []client.PartitionInfo) map[string]any {
	m := map[string]any{
		"name": t.Name, "id": t.ID, "partitions": t.Partitions, "replication_factor": t.ReplicationFactor,
		"max_record_bytes": t.MaxRecordBytes, "create_time": t.CreateTime.UTC().Format(time.RFC3339Nano),
		"dedupe_window": t.DedupeWindow.String(), "key_index": t.KeyIndex,
		"retention": map[string]any{
			"max_age": t.RetentionAge.String(), "max_bytes": t.RetentionBytes, "max_records": t.RetentionRecords,
			"cleanup": t.Cleanup, "delete_retention": t.DeleteRetention.String(),
			"local_max_age": t.LocalRetentionAge.String(), "local_max_bytes": t.LocalRetentionBytes,
		},
	}
	if parts != nil {
		ps := make([]map[string]any, len(parts))
		for i, p := range parts {
			ps[i] = map[string]any{
				"partition": p.Partition, "log_start_offset": p.LogStartOffset, "end_offset": p.EndOffset,
				"records": p.EndOffset - p.LogStartOffset, "bytes": p.Bytes, "leader": p.Leader,
				"local_start_offset": p.LocalStartOffset, "tiered_segments": p.TieredSegments, "tiered_bytes": p.TieredBytes,
			}
			if !p.FirstAppendTime.IsZero() {
				ps[i]["first_append_time"] = p.FirstAppendTime.UTC().Format(time.RFC3339Nano)
				ps[i]["last_append_time"] = p.LastAppendTime.UTC().Format(time.RFC3339Nano)
			}
		}
		m["partition_info"] = ps
	}
	return m
}
