package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/sdk/client"
)

func newDemo() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Start a throwaway broker, publish a few events and replay them",
		Long: `Start an embedded broker in a temporary directory, publish a small set of
order events in three waves, and show replays from a timestamp and from a
message ID. Nothing is left behind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return demo(cmd.Context()) },
	}
}

type demoEvent struct{ key, value string }

var demoWaves = [][]demoEvent{
	{
		{"order-1001", `{"type":"order.created","customer":"ada","total":42.50}`},
		{"order-1002", `{"type":"order.created","customer":"grace","total":13.00}`},
		{"order-1003", `{"type":"order.created","customer":"linus","total":99.90}`},
		{"order-1004", `{"type":"order.created","customer":"barbara","total":7.25}`},
	},
	{
		{"order-1001", `{"type":"payment.captured","amount":42.50}`},
		{"order-1003", `{"type":"payment.captured","amount":99.90}`},
		{"order-1002", `{"type":"payment.failed","reason":"card declined"}`},
		{"order-1004", `{"type":"payment.captured","amount":7.25}`},
	},
	{
		{"order-1001", `{"type":"order.shipped","carrier":"dhl"}`},
		{"order-1002", `{"type":"order.cancelled"}`},
		{"order-1003", `{"type":"order.shipped","carrier":"ups"}`},
		{"order-1004", `{"type":"order.shipped","carrier":"dhl"}`},
	},
}

func demo(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "rewind-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	node, err := engine.Open(engine.Config{Dir: dir, Logger: hclog.NewNullLogger()})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		node.Close()
		return err
	}
	srv := engine.NewHTTPServer(node.Handler())
	go srv.Serve(ln)
	defer func() {
		node.Drain()
		srv.Close()
		node.Close()
	}()
	addr := "http://" + ln.Addr().String()
	c := client.New(addr)
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }

	say("Started a broker at %s with its data in %s.\n", addr, dir)
	say("$ rewind topic create orders --partitions 3")
	if _, err := c.CreateTopic(ctx, "orders", client.WithPartitions(3)); err != nil {
		return err
	}
	var waveStart []time.Time
	var midID string
	for w, wave := range demoWaves {
		// Leave a gap between waves so a timestamp can fall between them.
		time.Sleep(20 * time.Millisecond)
		waveStart = append(waveStart, time.Now())
		time.Sleep(5 * time.Millisecond)
		msgs := make([]client.Message, len(wave))
		for i, e := range wave {
			msgs[i] = client.Message{Key: []byte(e.key), Value: []byte(e.value), IdempotencyKey: fmt.Sprintf("%s-%d", e.key, w)}
		}
		res, err := c.Publish(ctx, "orders", msgs...)
		if err != nil {
			return err
		}
		say("\npublished wave %d (%d events):", w+1, len(res))
		for i, r := range res {
			say("  %-10s -> partition %d offset %d  message_id %s", wave[i].key, r.Partition, r.Offset, r.MessageID)
		}
		if w == 1 {
			midID = res[1].MessageID
		}
	}
	show := func(title string, opts ...client.SubscribeOption) error {
		say("\n$ %s", title)
		sub, err := c.Subscribe(ctx, "orders", opts...)
		if err != nil {
			return err
		}
		defer sub.Close()
		for rec, err := range sub.Records() {
			if err != nil {
				return err
			}
			say("  p%d@%-2d %s  %-10s %s", rec.Partition, rec.Offset, rec.AppendTime.UTC().Format("15:04:05.000000"), rec.Key, rec.Value)
		}
		return nil
	}
	t := waveStart[1]
	if err := show(fmt.Sprintf("rewind replay orders --from @%s   # from a timestamp: waves 2 and 3", t.UTC().Format(time.RFC3339Nano)),
		client.From(client.Time(t)), client.Until(client.End())); err != nil {
		return err
	}
	if err := show(fmt.Sprintf("rewind replay orders --from id:%s   # from a message ID: its partition from that record, the others from its append time", midID),
		client.From(client.MessageID(midID)), client.Until(client.End())); err != nil {
		return err
	}
	if err := show("rewind replay orders --from earliest --to @<wave 2>   # history up to a time",
		client.From(client.Earliest()), client.Until(client.Time(t))); err != nil {
		return err
	}
	say("\nWithin a partition the order is the offset order; across partitions streams interleave.")
	say("Each key lives in one partition, so every order's events replay in the order they happened.")
	say("\nTry it for real:  rewind serve   (then, in another terminal, the commands above)")
	return nil
}
