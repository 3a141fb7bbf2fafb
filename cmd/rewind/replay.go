package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

func newReplay(g *globals) *cobra.Command {
	var (
		from, to, format, readFrom string
		key                        string
		parts                      partitionsFlag
		follow, clamp              bool
		flt                        filterFlags
		lim                        streamFlags
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
  v:N                        with --key: version N of the key

--key K reads one key's records only (an entity's events), through the
key index: the cost follows the key's records, not the partition's. With
--key, -N is the key's last N records.

Without --follow or --to the replay stops at the end as of its start. --to
takes N, @time, -duration, id:<message-id> or end; the stop itself is not
printed. A --to time still to come waits for new records until then (one
after 2262 never comes: that replay follows until stopped). --follow keeps reading live records after the history. -n stops
after N records.

If the server stops or restarts meanwhile, the replay waits for it (up to
--reconnect-window, 1m by default), says so on stderr, and goes on from
where it stopped: no record is printed twice or skipped. A replay that
stops at the end fixes that end again when it goes on.

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
			c := g.client()
			opts := []client.SubscribeOption{client.Partitions(parts...), client.ReconnectWithin(lim.reconnect)}
			if key != "" {
				opts = append(opts, client.Key([]byte(key)))
				if n, ok := start.AsRecordsBack(); ok {
					// The key's last N: from the version N before its head.
					var ropts []client.ReadOption
					if len(parts) == 1 {
						ropts = append(ropts, client.InPartition(parts[0]))
					}
					r, err := c.ReadKey(cmd.Context(), args[0], []byte(key), append(ropts, client.LastN(1))...)
					if err != nil {
						return err
					}
					switch {
					case n == 0 || !r.HasHead:
						if !follow && to == "" {
							return nil // nothing to print
						}
						start = client.Latest()
					case r.Head+1 <= n:
						start = client.KeyVersion(0)
					default:
						start = client.KeyVersion(r.Head + 1 - n)
					}
				}
			}
			opts = append(opts, client.From(start))
			fopts, err := flt.options()
			if err != nil {
				return err
			}
			opts = append(opts, fopts...)
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
				if err := checkRange(start, stop, from, to); err != nil {
					return err
				}
				opts = append(opts, client.Until(stop))
			case !follow:
				opts = append(opts, client.Until(client.End()))
			}
			resume := func(token string) string { return flt.resumeCommand(args[0], token, to, follow) }
			return replay(cmd, c, args[0], format, opts, lim.count, resume)
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "start position (required)")
	f.StringVar(&to, "to", "", "stop position (exclusive)")
	f.StringVar(&key, "key", "", "read only this key's records (through the key index)")
	f.Var(&parts, "partition", "partition to read (repeatable; default all)")
	f.BoolVar(&follow, "follow", false, "keep reading live records")
	f.StringVar(&readFrom, "read-from", "", "in a cluster: leader (each partition from its leader) or replica (from the connected node's replicas, fetch from follower); default: the server's setting, which sees what the leader sees but reads history the connected node's replica holds from that replica")
	f.BoolVar(&clamp, "clamp", false, "if retention removed the start offset, start at the earliest stored record (and say so) instead of failing")
	flt.add(cmd)
	lim.add(cmd)
	addFormat(cmd, &format)
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// replay prints the records of a subscription, at most limit (0: all).
// resume renders the command that continues from a resume token, for the
// error of a failed filter.
func replay(cmd *cobra.Command, c *client.Client, topic, format string, opts []client.SubscribeOption, limit uint64, resume func(token string) string) error {
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
	cut := false // -n stopped inside an event: no resume token is exact
	lastShown := time.Now()
	if st, ok := sub.Event().(*client.Started); ok {
		for _, p := range st.Partitions {
			if p.Clamped {
				fmt.Fprintf(os.Stderr, "note: partition %d: the start was removed by retention; starting at its earliest record, offset %d\n", p.Partition, p.NextOffset)
			}
		}
	}
	for (limit == 0 || n < limit) && sub.Next() {
		if streamStatus(sub.Event()) {
			continue
		}
		switch e := sub.Event().(type) {
		case *client.Records:
			k, err := printRecords(out, e.Records, limit, n)
			n += uint64(k)
			cut = k < len(e.Records)
			if err != nil {
				return err
			}
		case *client.CaughtUp:
			if progress && e.LaggingPartitions == 0 {
				fmt.Fprintf(os.Stderr, "\r\033[K-- caught up after %s; following live records --\n", plural(n, "record"))
			}
		case *client.Progress:
			if progress && time.Since(lastShown) > time.Second {
				var lag uint64
				for _, p := range e.Partitions {
					lag += p.EndOffset - min(p.NextOffset, p.EndOffset)
				}
				fmt.Fprintf(os.Stderr, "\r\033[K%s, lag %d", plural(n, "record"), lag)
				lastShown = time.Now()
			}
		}
	}
	if ctx.Err() != nil {
		return nil // interrupted by the user
	}
	if limit == 0 || n < limit {
		if err := sub.Err(); err != nil {
			return streamErr(filterFailed(err, resume))
		}
	}
	if progress && !cut {
		fmt.Fprintf(os.Stderr, "\r\033[K%s; resume with --from token:%s\n", plural(n, "record"), sub.ResumeToken())
	}
	return nil
}

// printRecords prints records, at most limit-done of them if limit is not
// 0, flushes, and returns how many it printed.
func printRecords(out *recordWriter, recs []client.Record, limit, done uint64) (int, error) {
	k := len(recs)
	if limit > 0 {
		k = int(min(uint64(k), limit-done))
	}
	for i := range k {
		if err := out.write(&recs[i]); err != nil {
			return i, err
		}
	}
	return k, out.flush()
}

// streamFlags are the flags of commands that print a stream.
type streamFlags struct {
	count     uint64
	reconnect time.Duration
}

func (f *streamFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.Uint64VarP(&f.count, "count", "n", 0, "stop after N records (0: no limit)")
	fs.DurationVar(&f.reconnect, "reconnect-window", client.DefaultReconnectWindow, "if the server stops or restarts, wait this long for it and go on where the stream stopped (0: end at once)")
}

// streamStatus says on stderr, always, that a stream broke or went on, and
// reports whether ev was such an event.
func streamStatus(ev client.Event) bool {
	switch e := ev.(type) {
	case *client.Disconnected:
		fmt.Fprintf(os.Stderr, "-- server unavailable (%s); retrying for up to %s --\n", errText(e.Err), e.RetryFor)
	case *client.Reconnected:
		// A group member's stream starts with no partitions: the
		// assignment that follows says where it goes on.
		at := ""
		if len(e.Partitions) > 0 {
			parts := make([]string, len(e.Partitions))
			for i, p := range e.Partitions {
				parts[i] = fmt.Sprintf("%d@%d", p.Partition, p.NextOffset)
			}
			at = fmt.Sprintf("; resumed at partitions [%s]", strings.Join(parts, " "))
		}
		fmt.Fprintf(os.Stderr, "-- reconnected after %s%s --\n", e.Down.Round(time.Millisecond), at)
	default:
		return false
	}
	return true
}

// streamErr words the end of a stream whose server did not come back: not
// the "is it running" hint of a server that never answered.
func streamErr(err error) error {
	var re *client.ReconnectError
	if errors.As(err, &re) {
		return fmt.Errorf("the server was unavailable for %s (--reconnect-window); gave up after %s: %s",
			re.Window, plural(re.Attempts, "attempt"), errText(re.Err))
	}
	return err
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

// checkRange refuses a stop that is not after the start when both are
// offsets or both are times: the range would be empty (the stop is
// exclusive), and a replay of it would print nothing without saying why.
func checkRange(start, stop client.Position, from, to string) error {
	if a, ok := start.AsOffset(); ok {
		if b, ok := stop.AsOffset(); ok && b <= a {
			return fmt.Errorf("--to %s is not after --from %s: the range is empty (--to is exclusive)", to, from)
		}
	}
	if a, ok := start.AsTime(); ok {
		if b, ok := stop.AsTime(); ok && !b.After(a) {
			return fmt.Errorf("--to %s is not after --from %s: the range is empty (--to is exclusive)", to, from)
		}
	}
	return nil
}
