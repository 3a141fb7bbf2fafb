package cliente2e_test

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/sdk/client"
)

// exampleServer starts a throwaway node for the examples and returns its
// address and a function that stops it.
func exampleServer() (string, func()) {
	dir, _ := os.MkdirTemp("", "rewind-example-")
	n, err := engine.Open(engine.Config{Dir: dir})
	if err != nil {
		panic(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx, ln, engine.ServeConfig{ShutdownTimeout: -1}) }()
	return "http://" + ln.Addr().String(), func() { cancel(); <-served; os.RemoveAll(dir) }
}

func Example() {
	addr, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c := client.New(addr)
	c.CreateTopic(ctx, "orders", client.WithPartitions(1))
	res, _ := c.Publish(ctx, "orders",
		client.Message{Key: []byte("o-1"), Value: []byte("created")},
		client.Message{Key: []byte("o-1"), Value: []byte("paid")},
		client.Message{Key: []byte("o-1"), Value: []byte("shipped")},
	)
	// Replay from the second record (by its message ID) to the end.
	sub, _ := c.Subscribe(ctx, "orders", client.From(client.MessageID(res[1].MessageID)), client.Until(client.End()))
	defer sub.Close()
	for rec, err := range sub.Records() {
		if err != nil {
			panic(err)
		}
		fmt.Println(rec.Offset, string(rec.Value))
	}
	// Output:
	// 1 paid
	// 2 shipped
}

func ExampleClient_Subscribe_resume() {
	addr, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c := client.New(addr)
	c.CreateTopic(ctx, "events", client.WithPartitions(1))
	for i := range 5 {
		c.Publish(ctx, "events", client.Message{Value: []byte(fmt.Sprint("e", i))})
	}
	// Read two records, keep the token, stop.
	sub, _ := c.Subscribe(ctx, "events", client.MaxRecordsPerEvent(2))
	sub.Next() // the first event after Started: two records
	token := sub.ResumeToken()
	sub.Close()
	// Later, maybe after a restart: continue exactly there.
	sub, _ = c.Subscribe(ctx, "events", client.From(client.ResumeToken(token)), client.Until(client.End()))
	defer sub.Close()
	for rec := range sub.Records() {
		fmt.Println(string(rec.Value))
	}
	// Output:
	// e2
	// e3
	// e4
}

func ExamplePublisher() {
	addr, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c := client.New(addr)
	c.CreateTopic(ctx, "clicks", client.WithPartitions(2))
	p := c.NewPublisher("clicks", client.WithBatchSize(100))
	var last *client.Pending
	for i := range 250 {
		last, _ = p.Publish(ctx, client.Message{Key: []byte("user-7"), Value: []byte(fmt.Sprint(i))})
	}
	p.Close(ctx) // flushes
	r, _ := last.Wait(ctx)
	fmt.Println("last offset:", r.Offset)
	// Output:
	// last offset: 249
}
