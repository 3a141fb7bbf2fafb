package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/cmd/rewind/internal/bench"
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
	return cmd
}
