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

	var topic, readFrom string
	var at float64
	rep := &cobra.Command{
		Use:   "replay",
		Short: "Replay a whole topic once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := readFromOptions(readFrom)
			if err != nil {
				return err
			}
			for i := range replayReps {
				r, err := bench.Replay(cmd.Context(), g.client(), topic, opts...)
				if err != nil {
					return err
				}
				r.Print(os.Stdout, i)
			}
			return nil
		},
	}
	rep.Flags().StringVar(&topic, "topic", "bench", "topic")
	rep.Flags().IntVar(&replayReps, "reps", 1, "repetitions")
	rep.Flags().StringVar(&readFrom, "read-from", "", "leader or replica (default: the server's setting)")
	ttfm := &cobra.Command{
		Use:   "ttfm",
		Short: "Time to the first record of a timestamp replay from the middle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := bench.TTFM(cmd.Context(), g.client(), topic, at, nSeeks)
			if err != nil {
				return err
			}
			r.Print(os.Stdout, 0)
			return nil
		},
	}
	ttfm.Flags().StringVar(&topic, "topic", "bench", "topic")
	ttfm.Flags().Float64Var(&at, "at", 0.5, "where to seek, as a fraction of partition 0")
	ttfm.Flags().IntVar(&nSeeks, "reps", 20, "seeks to measure")
	var (
		rate int
		dur  time.Duration
		size int
	)
	lat := &cobra.Command{
		Use:   "latency",
		Short: "Publish at a steady rate (open loop) and measure each acknowledgement",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := bench.Latency(cmd.Context(), g.client(), topic, rate, dur, size)
			if err != nil {
				return err
			}
			r.Print(os.Stdout, 0)
			return nil
		},
	}
	lat.Flags().StringVar(&topic, "topic", "lat", "topic (created with one partition if missing)")
	lat.Flags().IntVar(&rate, "rate", 2000, "records per second")
	lat.Flags().DurationVar(&dur, "duration", 15*time.Second, "how long")
	lat.Flags().IntVar(&size, "size", 100, "value size in bytes")
	cmd.AddCommand(pub, rep, ttfm, lat)
	return cmd
}
