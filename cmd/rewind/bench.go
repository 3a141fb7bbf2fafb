package main

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/cmd/rewind/internal/bench"
	"github.com/rewind-io/rewind/sdk/client"
)

func newBench(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running server: publish, replay, time to first record",
		Long: `Measure a running server. Each prints a summary and RESULT lines in the
format of the peer baseline scripts, so Rewind and NATS JetStream figures
from the same run tabulate side by side.`,
	}
	var (
		o                           bench.PublishOptions
		pubReps, replayReps, nSeeks int
	)
	pub := &cobra.Command{
		Use:   "publish",
		Short: "Publish records as fast as acknowledgements allow",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for rep := range pubReps {
				r, err := bench.Publish(cmd.Context(), g.client(), o)
				if err != nil {
					return err
				}
				r.Print(os.Stdout, rep)
			}
			return nil
		},
	}
	pf := pub.Flags()
	pf.StringVar(&o.Topic, "topic", "bench", "topic (created if missing)")
	pf.IntVar(&o.Records, "records", 1_000_000, "records to publish")
	pf.IntVar(&o.Size, "size", 100, "value size in bytes")
	pf.Uint32Var(&o.Partitions, "partitions", 4, "partitions, when the topic is created")
	pf.IntVar(&o.Batch, "batch", 1000, "records per request")
	pf.IntVar(&o.Publishers, "publishers", 4, "concurrent publishers (one request in flight each)")
	pf.BoolVar(&o.Keys, "keys", false, "give records keys (10,000 distinct)")
	pf.IntVar(&pubReps, "reps", 1, "repetitions")

	var (
		replayTopic, readFrom string
		streams               int
		loadFor               time.Duration
	)
	rep := &cobra.Command{
		Use:   "replay",
		Short: "Replay a whole topic: once per repetition, or with --duration as a load",
		Long: `Replay a whole topic from the earliest record to the end.

Without --duration it replays --reps times, one after the other, and reports
each. With --duration it runs --streams concurrent replays, each starting
over when it ends, for that long, and reports the records all of them
received per second: the load to run beside "rewind bench latency".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := readFromOptions(readFrom)
			if err != nil {
				return err
			}
			if loadFor > 0 {
				r, err := bench.ReplayLoad(cmd.Context(), g.client(), replayTopic, max(streams, 1), loadFor, opts...)
				if err != nil {
					return err
				}
				r.Print(os.Stdout, 0)
				return nil
			}
			for i := range replayReps {
				r, err := bench.Replay(cmd.Context(), g.client(), replayTopic, opts...)
				if err != nil {
					return err
				}
				r.Print(os.Stdout, i)
			}
			return nil
		},
	}
	rep.Flags().StringVar(&replayTopic, "topic", "bench", "topic")
	rep.Flags().IntVar(&replayReps, "reps", 1, "repetitions")
	rep.Flags().StringVar(&readFrom, "read-from", "", "leader or replica (default: the server's setting)")
	rep.Flags().IntVar(&streams, "streams", 1, "concurrent replays (with --duration)")
	rep.Flags().DurationVar(&loadFor, "duration", 0, "replay back to back for this long, with --streams at once")
	var (
		ttfmTopic string
		at        float64
	)
	ttfm := &cobra.Command{
		Use:   "ttfm",
		Short: "Time to the first record of a timestamp replay from the middle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := bench.TTFM(cmd.Context(), g.client(), ttfmTopic, at, nSeeks)
			if err != nil {
				return err
			}
			r.Print(os.Stdout, 0)
			return nil
		},
	}
	ttfm.Flags().StringVar(&ttfmTopic, "topic", "bench", "topic")
	ttfm.Flags().Float64Var(&at, "at", 0.5, "where to seek, as a fraction of partition 0")
	ttfm.Flags().IntVar(&nSeeks, "reps", 20, "seeks to measure")
	var lo bench.LatencyOptions
	lat := &cobra.Command{
		Use:   "latency",
		Short: "Publish at a steady rate (open loop) and measure each acknowledgement (and delivery, with --e2e)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ack, e2e, err := bench.Latency(cmd.Context(), g.client(), lo)
			if err != nil {
				return err
			}
			ack.Print(os.Stdout, 0)
			if lo.EndToEnd {
				e2e.Print(os.Stdout, 0)
			}
			return nil
		},
	}
	lat.Flags().StringVar(&lo.Topic, "topic", "lat", "topic (created with one partition if missing)")
	lat.Flags().IntVar(&lo.Rate, "rate", 2000, "records per second")
	lat.Flags().DurationVar(&lo.Duration, "duration", 15*time.Second, "how long")
	lat.Flags().IntVar(&lo.Size, "size", 100, "value size in bytes (at least 8)")
	lat.Flags().BoolVar(&lo.EndToEnd, "e2e", false, "also read the topic live and measure publish to delivery")
	lat.Flags().IntVar(&lo.Publishers, "publishers", 0, "send through this many batching publishers (a record waits while its publisher's request is out); 0: one request per record")
	cmd.AddCommand(pub, rep, ttfm, lat)
	cmd.AddCommand(eventStoreBench(g)...)
	return cmd
}

// eventStoreBench returns the event store's subcommands: fill a history,
// load an entity from it, conditional appends, tag-conditioned appends.
// Each asks what the PostgreSQL peer's probe pg-fill, pg-load, pg-append
// and pg-dcb ask (docs/benchmarks.md, "Event store").
func eventStoreBench(g *globals) []*cobra.Command {
	var fo bench.FillOptions
	fill := &cobra.Command{
		Use:   "eventstore-fill",
		Short: "Publish an event history: --events keyed records, --events-per-key per key, round robin",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := bench.EventStoreFill(cmd.Context(), g.client(), fo)
			if err != nil {
				return err
			}
			r.Print(os.Stdout, 0)
			return nil
		},
	}
	ff := fill.Flags()
	ff.StringVar(&fo.Topic, "topic", "es", "topic (created if missing)")
	ff.IntVar(&fo.Events, "events", 100_000, "records to publish")
	ff.IntVar(&fo.EventsPerKey, "events-per-key", 20, "records per key: keys k0 to k<events/events-per-key - 1>")
	ff.IntVar(&fo.Size, "size", 100, "value size in bytes")
	ff.Uint32Var(&fo.Partitions, "partitions", 4, "partitions, when the topic is created")
	ff.IntVar(&fo.Batch, "batch", 1000, "records per request")
	ff.IntVar(&fo.Publishers, "publishers", 4, "concurrent publishers (one request in flight each)")

	var (
		loadTopic, loadKey string
		iters, loadReps    int
	)
	load := &cobra.Command{
		Use:   "eventstore-load",
		Short: "Load one key's whole history (an entity) --iters times and time each read",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for rep := range loadReps {
				r, err := bench.EventStoreLoad(cmd.Context(), g.client(), loadTopic, loadKey, iters)
				if err != nil {
					return err
				}
				r.Print(os.Stdout, rep)
			}
			return nil
		},
	}
	load.Flags().StringVar(&loadTopic, "topic", "es", "topic")
	load.Flags().StringVar(&loadKey, "key", "k4242", "key to load")
	load.Flags().IntVar(&iters, "iters", 2000, "loads to time")
	load.Flags().IntVar(&loadReps, "reps", 1, "repetitions")

	appendCmd := func(use, short, topic string, run func(context.Context, *client.Client, bench.AppendOptions) (bench.Report, error)) *cobra.Command {
		var (
			o    bench.AppendOptions
			reps int
		)
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				for rep := range reps {
					r, err := run(cmd.Context(), g.client(), o)
					if r.Elapsed > 0 {
						r.Print(os.Stdout, rep)
					}
					if err != nil {
						return err
					}
				}
				return nil
			},
		}
		f := c.Flags()
		f.StringVar(&o.Topic, "topic", topic, "topic (created if missing)")
		f.Uint32Var(&o.Partitions, "partitions", 4, "partitions, when the topic is created")
		f.IntVar(&o.Writers, "writers", 16, "concurrent writers (one request in flight each)")
		if use == "eventstore-dcb" {
			f.IntVar(&o.Tags, "tags", 1000, "distinct tags the writers pick from (fewer: more conflicts)")
			f.BoolVar(&o.QueryLast, "query-last", false, "read the tag's last record (LastN(1)) instead of its first (the server reads the tag index backward)")
		} else {
			f.IntVar(&o.Keys, "keys", 10_000, "distinct keys (entities) the writers pick from (fewer: more conflicts)")
		}
		f.DurationVar(&o.Duration, "duration", 10*time.Second, "how long")
		f.Uint64Var(&o.Seed, "seed", 7, "seed of the writers' random choices")
		f.IntVar(&reps, "reps", 1, "repetitions")
		return c
	}
	return []*cobra.Command{fill, load,
		appendCmd("eventstore-append", "Conditional appends: read a key's head, append expecting that version, retry on conflict", "es-append", bench.EventStoreAppend),
		appendCmd("eventstore-dcb", "Tag-conditioned appends: query a tag's position, append with FailIfMatched, retry on conflict", "es-dcb", bench.EventStoreDCB),
	}
}
