package main

import (
	"context"
	"encoding/json"
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
message ID, each as the command you would type and what it prints. The
orders' keys spread them over the three partitions. Nothing is left
behind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return demo(cmd.Context()) },
	}
}

type demoEvent struct{ key, value string }

var demoWaves = [][]demoEvent{
	{
		{"order-1001", `{"type":"order.created","customer":"ada","total":42.50}`},
		{"order-1007", `{"type":"order.created","customer":"grace","total":13.00}`},
		{"order-1003", `{"type":"order.created","customer":"linus","total":99.90}`},
		{"order-1008", `{"type":"order.created","customer":"barbara","total":7.25}`},
	},
	{
		{"order-1001", `{"type":"payment.captured","amount":42.50}`},
		{"order-1003", `{"type":"payment.captured","amount":99.90}`},
		{"order-1007", `{"type":"payment.failed","reason":"card declined"}`},
		{"order-1008", `{"type":"payment.captured","amount":7.25}`},
	},
	{
		{"order-1001", `{"type":"order.shipped","carrier":"dhl"}`},
		{"order-1007", `{"type":"order.cancelled"}`},
		{"order-1003", `{"type":"order.shipped","carrier":"ups"}`},
		{"order-1008", `{"type":"order.shipped","carrier":"dhl"}`},
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
	// The node serves until the demo ends; then it drains, its
	// connections close at once, and its store closes (Node.Serve).
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- node.Serve(sctx, ln, engine.ServeConfig{ShutdownTimeout: -1}) }()
	defer func() { stop(); <-served }()
	addr := "http://" + ln.Addr().String()
	c := client.New(addr)
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }

	say("Started a broker at %s with its data in %s.", addr, dir)
	say("Below, each command is followed by what it prints.\n")
	say("$ rewind topic create orders --partitions 3")
	tp, err := c.CreateTopic(ctx, "orders", client.WithPartitions(3))
	if err != nil {
		return err
	}
	say("created topic %s (id %d) with %s", tp.Name, tp.ID, plural(tp.Partitions, "partition"))
	var waveStart []time.Time
	var midID string
	for w, wave := range demoWaves {
		// Leave a gap between waves so a timestamp can fall between them.
		time.Sleep(20 * time.Millisecond)
		waveStart = append(waveStart, time.Now())
		time.Sleep(5 * time.Millisecond)
		msgs := make([]client.Message, len(wave))
		say("\n$ rewind publish orders --input json <<'EOF'   # wave %d", w+1)
		for i, e := range wave {
			msgs[i] = client.Message{Key: []byte(e.key), Value: []byte(e.value), IdempotencyKey: fmt.Sprintf("%s-%d", e.key, w)}
			line, _ := json.Marshal(struct {
				Key   string `json:"key"`
				Value string `json:"value"`
				Idem  string `json:"idempotency_key"`
			}{e.key, e.value, msgs[i].IdempotencyKey})
			say("%s", line)
		}
		say("EOF")
		res, err := c.Publish(ctx, "orders", msgs...)
		if err != nil {
			return err
		}
		out := newResultWriter("text")
		for _, r := range res {
			if err := out.write(r); err != nil {
				return err
			}
		}
		if w == 1 {
			midID = res[1].MessageID
		}
	}
	show := func(args, note string, opts ...client.SubscribeOption) error {
		say("\n$ rewind replay orders %s   # %s", args, note)
		sub, err := c.Subscribe(ctx, "orders", opts...)
		if err != nil {
			return err
		}
		defer sub.Close()
		out := newRecordWriter(os.Stdout, "text")
		defer out.flush()
		for rec, err := range sub.Records() {
			if err != nil {
				return err
			}
			if err := out.write(&rec); err != nil {
				return err
			}
		}
		return nil
	}
	t := waveStart[1]
	at := "@" + t.UTC().Format(time.RFC3339Nano)
	if err := show("--from "+at, "from a timestamp: waves 2 and 3",
		client.From(client.Time(t)), client.Until(client.End())); err != nil {
		return err
	}
	if err := show("--from id:"+midID, "from a message ID: its partition from that record, the others from its append time",
		client.From(client.MessageID(midID)), client.Until(client.End())); err != nil {
		return err
	}
	if err := show("--from earliest --to "+at, "history up to a time: wave 1",
		client.From(client.Earliest()), client.Until(client.Time(t))); err != nil {
		return err
	}
	say("\nWithin a partition the order is the offset order; across partitions streams interleave.")
	say("Each key lives in one partition, so every order's events replay in the order they happened.")
	say("\nTry it for real:  rewind serve   (then, in another terminal, the commands above)")
	return nil
}
