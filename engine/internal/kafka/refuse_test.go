package kafka_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine"
)

// TestRefusedWithAuth: a node with authentication on refuses to serve
// the Kafka listener, which has no SASL yet and would bypass its ACLs;
// Serve returns ErrKafkaWithAuth before serving anything and closes the
// node and both listeners.
func TestRefusedWithAuth(t *testing.T) {
	node, err := engine.Open(engine.Config{Dir: t.TempDir(), Auth: engine.AuthConfig{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	api, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = node.Serve(context.Background(), api, engine.ServeConfig{KafkaListener: kln})
	if !errors.Is(err, engine.ErrKafkaWithAuth) {
		t.Fatalf("Serve with auth and a Kafka listener: %v, want ErrKafkaWithAuth", err)
	}
	for name, ln := range map[string]net.Listener{"api": api, "kafka": kln} {
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the %s listener is still open: %v", name, err)
		}
	}
}

// TestStopsWithTheNode: stopping the node (Node.Serve's shutdown) with a
// 30 s long-polling Fetch just sent on the Kafka port (in flight or not
// yet read: the test cannot tell) answers or closes its connection,
// closes the listener and waits for them: Stop returns, and the port is
// closed.
func TestStopsWithTheNode(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	createTopic(t, n.client(t), "stop", 1)
	c := dialRaw(t, n.Kafka)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, 30_000, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "stop"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if _, err := c.Write(frameRequest(req)); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	// The long poll was answered (empty) or its connection closed; either
	// way the read ends, well before the poll's 30 s.
	var b [4]byte
	if _, err := io.ReadFull(c, b[:]); err == nil {
		// An answer: read it to its end, then the connection closes.
		body := make([]byte, int(b[0])<<24|int(b[1])<<16|int(b[2])<<8|int(b[3]))
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatal(err)
		}
		c.closedByServer()
	}
	if conn, err := net.Dial("tcp", n.Kafka); err == nil {
		conn.Close()
		t.Fatal("the Kafka port still accepts connections after Stop")
	}
}
