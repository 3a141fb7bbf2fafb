package main

import (
	"errors"
	"fmt"
	"net"

	"github.com/spf13/pflag"

	"github.com/rewind-io/rewind/engine"
)

// kafkaFlags are serve's Kafka listener flags (docs/kafka.md).
type kafkaFlags struct {
	listen, advertise string
	ln                net.Listener
}

func (k *kafkaFlags) register(f *pflag.FlagSet) {
	f.StringVar(&k.listen, "kafka-listen", "", "also serve the Kafka protocol on this address (docs/kafka.md: producers and simple consumers; no consumer groups, SASL, TLS or idempotent producers yet); default: off. Refused with --auth, and on a non-loopback address without --insecure")
	f.StringVar(&k.advertise, "kafka-advertise", "", "with --kafka-listen: the host:port Kafka clients are told to dial for this node (default: the --kafka-listen address)")
}

// bind checks the Kafka flags against the node's security and binds
// --kafka-listen, so that a refusal or a busy address fails before the
// data directory is opened. The listener has neither TLS nor
// authentication yet: it is refused on a node with --auth (its ACLs
// would not apply there), and, like --listen without client
// authentication, on a non-loopback address unless --insecure.
func (k *kafkaFlags) bind(authOn, insecure bool) error {
	if k.listen == "" {
		if k.advertise != "" {
			return errors.New("--kafka-advertise needs --kafka-listen")
		}
		return nil
	}
	if authOn {
		return errors.New("--kafka-listen with --auth: the Kafka listener has no authentication yet (SASL is not built), so it would serve every topic to anyone, whatever the ACLs say. Drop --kafka-listen, or --auth")
	}
	if !isLoopback(k.listen) && !insecure {
		return fmt.Errorf("refusing to serve Kafka on %s: the Kafka listener has no TLS and no authentication yet, so anyone who reaches it could produce to and read every topic. "+
			"Listen on loopback (127.0.0.1), or pass --insecure to accept the risk", k.listen)
	}
	if err := (engine.KafkaConfig{Advertise: k.advertise}).Validate(); err != nil {
		return fmt.Errorf("--kafka-advertise: %w", err)
	}
	ln, err := net.Listen("tcp", k.listen)
	if err != nil {
		return fmt.Errorf("--kafka-listen: %w", err)
	}
	k.ln = ln
	return nil
}

// serve has sc serve Kafka on --kafka-listen (if given).
func (k *kafkaFlags) serve(sc *engine.ServeConfig) {
	if k.ln != nil {
		sc.KafkaListener, sc.Kafka = k.ln, engine.KafkaConfig{Advertise: k.advertise}
	}
}

// close closes the listener if the node never served it.
func (k *kafkaFlags) close() {
	if k.ln != nil {
		k.ln.Close() // a no-op once Node.Serve's Kafka server closed it
	}
}
