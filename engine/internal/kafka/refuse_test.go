package kafka_test

import (
	"context"
	"errors"
	"net"
	"testing"

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
