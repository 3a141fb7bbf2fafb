package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

func newSubscribe(g *globals) *cobra.Command {
	var from, format, name, readFrom string
	var group string
	var commitEvery time.Duration
	var lim streamFlags
	cmd := &cobra.Command{
		Use:   "subscribe TOPIC --group G",
		Short: "Consume a topic as a member of a subscriber group",
		Long: `Join subscriber group G on TOPIC and print the records of the partitions
the server assigns to this member, committing progress as it goes (at least
once: records printed but not yet committed are delivered again after a
crash). Run several to share the work; stop one and its partitions move to
the others. --from says where partitions the group never committed start
(default earliest; see rewind replay --help for POS).

Ctrl-C (or SIGTERM) stops gracefully: the member stops reading, commits
every record it printed, then leaves the group, so the next member goes on
from there. -n stops after N records and commits exactly those.

If the server stops or restarts, the member waits for it (up to
--reconnect-window, 1m by default), joins the group again and goes on
without printing a record twice. What the member does (its partitions,
replays, failed commits, reconnects) is said on stderr.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if group == "" {
				return errors.New("--group: give the group's name (it cannot be empty)")
			}
			if err := checkFormat(format); err != nil {
				return err
			}
			start, err := client.ParsePosition(from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			rf, err := readFromOptions(readFrom)
			if err != nil {
				return err
			}
			sub, err := g.client().Subscribe(cmd.Context(), args[0], append(rf, client.Group(group), client.ClientName(name),
				client.From(start), client.AutoCommit(commitEvery), client.ReconnectWithin(lim.reconnect))...)
			if err != nil {
				if cmd.Context().Err() != nil {
					return nil // stopped (SIGINT, SIGTERM) while it joined: nothing was read
				}
				return err
			}
			out := newRecordWriter(os.Stdout, format)
			err = consume(cmd.Context(), sub, out, lim.count)
			// Stop gracefully: what was printed is flushed, then committed
			// (Close), then the member leaves.
			if ferr := out.flush(); err == nil {
				err = ferr
			}
			if cerr := sub.Close(); cerr != nil {
				fmt.Fprintf(os.Stderr, "-- commit on exit failed: %s --\n", errText(cerr))
				if err == nil {
					err = fmt.Errorf("committing what was printed: %s", errText(cerr))
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "subscriber group (required)")
	f.StringVar(&from, "from", "earliest", "where partitions without a committed offset start")
	f.StringVar(&name, "name", hostnameOr("rewind-cli"), "this member's name in group describe")
	f.DurationVar(&commitEvery, "commit-every", time.Second, "commit progress at most this often (0: after every event)")
	f.StringVar(&readFrom, "read-from", "", "in a cluster: leader or replica (see rewind replay --help); default: the server's setting")
	lim.add(cmd)
	addFormat(cmd, &format)
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

// consume prints a member's records, at most limit (0: all), until the
// stream ends or ctx does. Status goes to stderr whether or not it is a
// terminal: a failed commit must never go unseen.
func consume(ctx context.Context, sub *client.Subscription, out *recordWriter, limit uint64) error {
	var n uint64
	var lastCommitErr string
	for (limit == 0 || n < limit) && sub.Next() {
		if streamStatus(sub.Event()) {
			continue
		}
		switch e := sub.Event().(type) {
		case *client.Records:
			k, err := printRecords(out, e.Records, limit, n)
			n += uint64(k)
			if k < len(e.Records) {
				sub.Processed(k) // commit what was printed, not the rest
			}
			if err != nil {
				return err
			}
		case *client.Assigned:
			fmt.Fprintln(os.Stderr, assignedLine(e))
		case *client.ReplayStarted:
			fmt.Fprintf(os.Stderr, "-- replay (epoch %d): partition %d from offset %d --\n", e.Epoch, e.Partition, e.FromOffset)
		}
		msg := ""
		if err := sub.CommitErr(); err != nil {
			msg = errText(err)
		}
		if msg != lastCommitErr && msg != "" {
			fmt.Fprintf(os.Stderr, "-- commit failed: %s --\n", msg)
		}
		lastCommitErr = msg
	}
	if ctx.Err() != nil || (limit > 0 && n >= limit) {
		return nil
	}
	return streamErr(sub.Err())
}

// assignedLine is what subscribe says of an assignment. A rebalance that
// takes partitions from a member reaches it in two steps of one
// generation: first the partitions it must stop reading (Revoked), then,
// once every member has let go, its whole new assignment. The first is
// said as a revocation, so each generation's partitions are said once.
func assignedLine(e *client.Assigned) string {
	if len(e.Revoked) > 0 {
		parts := make([]string, len(e.Revoked))
		for i, p := range e.Revoked {
			parts[i] = strconv.FormatUint(uint64(p), 10)
		}
		return fmt.Sprintf("-- member %s, generation %d: revoked partitions [%s] --", e.MemberID, e.Generation, strings.Join(parts, " "))
	}
	parts := make([]string, len(e.Partitions))
	for i, p := range e.Partitions {
		parts[i] = fmt.Sprintf("%d@%d", p.Partition, p.NextOffset)
	}
	return fmt.Sprintf("-- member %s, generation %d: partitions [%s] --", e.MemberID, e.Generation, strings.Join(parts, " "))
}

func hostnameOr(def string) string {
	h, err := os.Hostname()
	if err != nil {
		return def
	}
	return fmt.Sprintf("%s:%d", h, os.Getpid())
}

func newGroup(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "group", Short: "List, describe, reset and delete subscriber groups"}
	cmd.AddCommand(newGroupList(g), newGroupDescribe(g), newGroupReset(g), newGroupDelete(g))
	return cmd
}

func newGroupList(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List groups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			gs, err := g.client().ListGroups(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				out := make([]map[string]any, len(gs))
				for i, x := range gs {
					out[i] = map[string]any{"group": x.Group, "topic": x.Topic, "members": x.Members, "generation": x.Generation}
				}
				return printJSON(out)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "GROUP\tTOPIC\tMEMBERS\tGENERATION")
			for _, x := range gs {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", x.Group, x.Topic, x.Members, x.Generation)
			}
			return w.Flush()
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func newGroupDescribe(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members, assignments, committed offsets and lag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			ts, err := g.client().DescribeGroup(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(groupJSON(args[0], ts))
			}
			for _, t := range ts {
				fmt.Printf("group %s on topic %s: generation %d, epoch %d, %s\n", args[0], t.Topic, t.Generation, t.Epoch, plural(len(t.Members), "member"))
				w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "MEMBER\tCLIENT\tPARTITIONS\tJOINED")
				for _, m := range t.Members {
					fmt.Fprintf(w, "%s\t%s\t%v\t%s\n", m.ID, m.ClientName, m.Partitions, m.JoinTime.UTC().Format(time.RFC3339))
				}
				w.Flush()
				w = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "PARTITION\tCOMMITTED\tEND\tLAG\tLAG TIME\tMEMBER")
				for _, p := range t.Partitions {
					committed := "-"
					if p.Committed {
						committed = fmt.Sprint(p.CommittedOffset)
					}
					fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%s\t%s\n", p.Partition, committed, p.EndOffset, p.Lag, p.LagTime.Round(time.Millisecond), orDash(p.MemberID))
				}
				w.Flush()
			}
			return nil
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func groupJSON(name string, ts []client.GroupTopic) map[string]any {
	topics := make([]map[string]any, len(ts))
	for i, t := range ts {
		members := make([]map[string]any, len(t.Members))
		for j, m := range t.Members {
			members[j] = map[string]any{"member_id": m.ID, "client_name": m.ClientName, "partitions": m.Partitions, "join_time": m.JoinTime.UTC().Format(time.RFC3339Nano)}
		}
		parts := make([]map[string]any, len(t.Partitions))
		for j, p := range t.Partitions {
			parts[j] = map[string]any{
				"partition": p.Partition, "committed": p.Committed, "committed_offset": p.CommittedOffset,
				"end_offset": p.EndOffset, "log_start_offset": p.LogStartOffset, "lag": p.Lag,
				"lag_seconds": p.LagTime.Seconds(), "member_id": p.MemberID,
			}
		}
		topics[i] = map[string]any{"topic": t.Topic, "generation": t.Generation, "epoch": t.Epoch, "members": members, "partitions": parts}
	}
	return map[string]any{"group": name, "topics": topics}
}

func newGroupReset(g *globals) *cobra.Command {
	var (
		topic, to, format string
		parts             partitionsFlag
		execute, create   bool
	)
	cmd := &cobra.Command{
		Use:   "reset GROUP --topic T --to POS [--execute]",
		Short: "Move a group's committed offsets (group replay); a dry run unless --execute",
		Long: `Plan, and with --execute carry out, moving group GROUP's committed offsets
on topic T. POS: earliest, latest, N (an offset), @time, -1h (a duration
ago), id:<message-id>, or -N / +N (shift each committed offset back or
forward by N records). Targets outside the stored range are clamped to it.

On a live group nothing needs to stop: members' streams seek in place and
say "replay started" before the first re-delivered record, and commits from
before the reset are refused.

A group that has no committed offsets and no members on T is not found,
unless --create says to start it (for example at latest, before its first
member joins).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			target, err := parseResetTarget(to)
			if err != nil {
				return err
			}
			var opts []client.ResetOption
			if create {
				opts = append(opts, client.CreateGroup())
			}
			res, err := g.client().ResetGroup(cmd.Context(), args[0], topic, target, parts, !execute, opts...)
			if err != nil {
				return err
			}
			if format == "json" {
				rows := make([]map[string]any, len(res.Rows))
				for i, r := range res.Rows {
					rows[i] = map[string]any{"partition": r.Partition, "had_commit": r.HadCommit, "current": r.Current,
						"new": r.New, "records_to_reread": r.RecordsToReread, "lag": r.Lag, "clamped": r.Clamped}
				}
				return printJSON(map[string]any{"executed": res.Executed, "epoch": res.Epoch, "generation": res.Generation, "plan": rows})
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PARTITION\tCURRENT\tNEW\tLAG")
			for _, r := range res.Rows {
				cur := fmt.Sprint(r.Current)
				if !r.HadCommit {
					cur = "-"
				}
				note := ""
				if r.Clamped {
					note = "\t(clamped to the stored range)"
				}
				fmt.Fprintf(w, "%d\t%s\t%d\t%d%s\n", r.Partition, cur, r.New, r.Lag, note)
			}
			w.Flush()
			if res.Executed {
				fmt.Printf("reset executed: epoch %d, generation %d\n", res.Epoch, res.Generation)
			} else {
				fmt.Println("dry run: nothing changed (add --execute to reset)")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic (required)")
	f.StringVar(&to, "to", "", "target position (required)")
	f.Var(&parts, "partition", "partition to reset (repeatable; default all)")
	f.BoolVar(&execute, "execute", false, "carry the reset out (default: dry run)")
	f.BoolVar(&create, "create", false, "reset a group that has no committed offsets and no members on the topic, creating it (without it, such a reset fails: a mistyped name does not start a new group)")
	addFormat(cmd, &format)
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// parseResetTarget reads POS for a reset: -N means shift back by N records
// (for a replay it means N back from the end).
func parseResetTarget(s string) (client.Position, error) {
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		if n, err := strconv.ParseInt(rest, 10, 64); err == nil {
			return client.Shift(-n), nil
		}
	}
	p, err := client.ParsePosition(s)
	if err != nil {
		return client.Position{}, fmt.Errorf("--to: %w", err)
	}
	return p, nil
}

func newGroupDelete(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete GROUP",
		Short: "Delete a group's committed offsets",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().DeleteGroup(cmd.Context(), args[0], force); err != nil {
				return err
			}
			fmt.Printf("deleted group %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete even while members are connected (their streams end)")
	return cmd
}
