package main

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

func newTopic(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "topic", Short: "Create, list, describe and delete topics"}
	cmd.AddCommand(newTopicCreate(g), newTopicList(g), newTopicDescribe(g), newTopicDelete(g))
	return cmd
}

func addFormat(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVar(format, "format", "text", "output format: text or json")
}

func checkFormat(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("unknown format %q (text or json)", format)
	}
	return nil
}

func newTopicCreate(g *globals) *cobra.Command {
	var (
		partitions, rf, maxRecord uint32
		retBytes, retRecords      uint64
		retAge, format, dedupe    string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			var age time.Duration
			if retAge != "" {
				d, err := parseDurationFlag(retAge)
				if err != nil {
					return fmt.Errorf("--retention-age: %w", err)
				}
				age = d
			}
			opts := []client.TopicOption{client.WithPartitions(partitions), client.WithReplicationFactor(rf),
				client.WithMaxRecordBytes(maxRecord), client.WithRetention(age, retBytes, retRecords)}
			if dedupe != "" {
				d, err := parseDurationFlag(dedupe)
				if err != nil || d < 0 {
					return fmt.Errorf("--dedupe-window: want a duration such as 24h, 7d or 0")
				}
				opts = append(opts, client.WithDedupeWindow(d))
			}
			t, err := g.client().CreateTopic(cmd.Context(), args[0], opts...)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(topicJSON(t, nil))
			}
			fmt.Printf("created topic %s (id %d) with %d partitions\n", t.Name, t.ID, t.Partitions)
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&partitions, "partitions", 1, "number of partitions")
	f.Uint32Var(&rf, "replication-factor", 0, "replicas per partition (default: the server's)")
	f.Uint32Var(&maxRecord, "max-record-bytes", 0, "largest record accepted (default 1 MiB)")
	f.StringVar(&retAge, "retention-age", "", "keep records this long, e.g. 7d or 12h (stored; enforcement comes with retention)")
	f.Uint64Var(&retBytes, "retention-bytes", 0, "keep at most this many bytes per partition")
	f.Uint64Var(&retRecords, "retention-records", 0, "keep at most this many records per partition")
	f.StringVar(&dedupe, "dedupe-window", "", "how long idempotency keys are remembered (default 24h; 0 turns deduplication off)")
	addFormat(cmd, &format)
	return cmd
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
			fmt.Printf("topic %s (id %d): %d partitions, max record %d bytes, dedupe window %s\n", t.Name, t.ID, t.Partitions, t.MaxRecordBytes, t.DedupeWindow)
			if t.RetentionAge > 0 || t.RetentionBytes > 0 || t.RetentionRecords > 0 {
				fmt.Printf("retention: age %s, bytes %d, records %d (0 = no limit)\n", t.RetentionAge, t.RetentionBytes, t.RetentionRecords)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PARTITION\tLOG START\tEND\tRECORDS\tBYTES\tFIRST APPEND\tLAST APPEND\tLEADER")
			for _, p := range parts {
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
		"dedupe_window": t.DedupeWindow.String(),
		"retention": map[string]any{
			"max_age": t.RetentionAge.String(), "max_bytes": t.RetentionBytes, "max_records": t.RetentionRecords,
		},
	}
	if parts != nil {
		ps := make([]map[string]any, len(parts))
		for i, p := range parts {
			ps[i] = map[string]any{
				"partition": p.Partition, "log_start_offset": p.LogStartOffset, "end_offset": p.EndOffset,
				"records": p.EndOffset - p.LogStartOffset, "bytes": p.Bytes, "leader": p.Leader,
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
