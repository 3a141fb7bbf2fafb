package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

func newReplay(g *globals) *cobra.Command {
	var (
		from, to, format, readFrom string
		parts                      partitionsFlag
		follow, clamp              bool
		flt                        filterFlags
	)
	cmd := &cobra.Command{
		Use:   "replay TOPIC --from POS [--to POS] [--filter REF | --filter-file F.wasm] [--filter-config JSON]",
		Short: "Read a topic from a position: history, live, or both",
		Long: `Read a topic from a start position, in offset order within each partition.

POS is one of:
  earliest | latest          the first stored record | only new records
  N                          an offset (use with --partition)
  @2026-12-01T10:00:00Z      the first record appended at or after a time
  @1796119200000             the same, as Unix milliseconds
  -1h | -15m | -7d           a duration ago
  -N                         N records back from the end of each partition
  id:<message-id>            a record by message ID (other partitions: its time)
  token:<resume-token>       continue where a previous replay stopped

Without --follow or --to the replay stops at the end as of its start. --to
takes N, @time, -duration, id:<message-id> or end; the stop itself is not
printed. --follow keeps reading live records after the history.

--filter runs a registered WebAssembly module (NAME for its newest version,
NAME@VERSION, or sha256:HEX) beside each partition reader, and only what it
keeps or emits is printed; --filter-file sends a module file with the
request instead (see rewind plugin). --filter-config is the module's config.
If the module fails, the replay stops with the module, partition, offset and
reason, and a command that resumes where it stopped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			start, err := client.ParsePosition(from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			opts := []client.SubscribeOption{client.From(start), client.Partitions(parts...)}
			fopt, err := flt.option()
			if err != nil {
				return err
			}
			if fopt != nil {
				opts = append(opts, fopt)
			}
			if clamp {
				opts = append(opts, client.ClampStart())
			}
			rf, err := readFromOptions(readFrom)
			if err != nil {
				return err
			}
			opts = append(opts, rf...)
			switch {
			case to != "" && follow:
				return fmt.Errorf("--to and --follow exclude each other")
			case to != "":
				stop, err := client.ParsePosition(to)
				if err != nil {
					return fmt.Errorf("--to: %w", err)
				}
				opts = append(opts, client.Until(stop))
			case !follow:
				opts = append(opts, client.Until(client.End()))
			}
			resume := func(token string) string { return flt.resumeCommand(args[0], token, to, follow) }
			return replay(cmd, g.client(), args[0], format, opts, resume)
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "start position (required)")
	f.StringVar(&to, "to", "", "stop position (exclusive)")
	f.Var(&parts, "partition", "partition to read (repeatable; default all)")
	f.BoolVar(&follow, "follow", false, "keep reading live records")
	f.StringVar(&readFrom, "read-from", "", "in a cluster: leader (each partition from its leader) or replica (from the connected node's replicas, fetch from follower); default: the server's setting, which sees what the leader sees but reads history the connected node's replica holds from that replica")
	f.BoolVar(&clamp, "clamp", false, "if retention removed the start offset, start at the earliest stored record (and say so) instead of failing")
	flt.add(cmd)
	addFormat(cmd, &format)
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// replay prints the records of a subscription. resume renders the command
// that continues from a resume token, for the error of a failed filter.
func replay(cmd *cobra.Command, c *client.Client, topic, format string, opts []client.SubscribeOption, resume func(token string) string) error {
	ctx := cmd.Context()
	sub, err := c.Subscribe(ctx, topic, opts...)
	if err != nil {
		return filterFailed(err, resume)
	}
	defer sub.Close()
	out := newRecordWriter(os.Stdout, format)
	defer out.flush()
	progress := isTerminal(os.Stderr)
	var n uint64
	lastShown := time.Now()
	if st, ok := sub.Event().(*client.Started); ok {
		for _, p := range st.Partitions {
			if p.Clamped {
				fmt.Fprintf(os.Stderr, "note: partition %d: the start was removed by retention; starting at its earliest record, offset %d\n", p.Partition, p.NextOffset)
			}
		}
	}
	for sub.Next() {
		switch e := sub.Event().(type) {
		case *client.Records:
			for i := range e.Records {
				if err := out.write(&e.Records[i]); err != nil {
					return err
				}
			}
			n += uint64(len(e.Records))
			out.flush()
		case *client.CaughtUp:
			if progress && e.LaggingPartitions == 0 {
				fmt.Fprintf(os.Stderr, "\r\033[K-- caught up after %d records; following live records --\n", n)
			}
		case *client.Progress:
			if progress && time.Since(lastShown) > time.Second {
				var lag uint64
				for _, p := range e.Partitions {
					lag += p.EndOffset - min(p.NextOffset, p.EndOffset)
				}
				fmt.Fprintf(os.Stderr, "\r\033[K%d records, lag %d", n, lag)
				lastShown = time.Now()
			}
		}
	}
	if ctx.Err() != nil {
		return nil // interrupted by the user
	}
	if err := sub.Err(); err != nil {
		return filterFailed(err, resume)
	}
	if progress {
		fmt.Fprintf(os.Stderr, "\r\033[K%d records; resume with --from token:%s\n", n, sub.ResumeToken())
	}
	return nil
}

// readFromOptions turns --read-from into subscribe options.
func readFromOptions(s string) ([]client.SubscribeOption, error) {
	switch s {
	case "":
		return nil, nil
	case "leader":
		return []client.SubscribeOption{client.LeaderReads()}, nil
	case "replica":
		return []client.SubscribeOption{client.FollowerReads()}, nil
	}
	return nil, fmt.Errorf("--read-from %q: use leader or replica", s)
}
